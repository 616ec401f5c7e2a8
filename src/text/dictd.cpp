#include "posenc/text/dictd.h"

#include <set>
#include <utility>

#include "posenc/error.h"
#include "read_text_file.h"

namespace posenc::text {
namespace {

int digit_of(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// A bracket group "[...]" at i: its end (one past ']'), or npos.
size_t bracket_end(std::string_view s, size_t i) {
  const size_t close = s.find(']', i);
  return close == std::string_view::npos ? close : close + 1;
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// A line holding only a bracketed source tag: "   [1913 Webster]".
bool is_source_tag_line(std::string_view line) {
  while (!line.empty() && is_space(line.front())) line.remove_prefix(1);
  while (!line.empty() && is_space(line.back())) line.remove_suffix(1);
  return line.size() >= 2 && line.front() == '[' && line.back() == ']' && line.find(']') == line.size() - 1;
}

}  // namespace

int64_t dictd_number(std::string_view digits) {
  require(!digits.empty(), "corpus", "a dictd number must have digits, got ''");
  require(digits.size() <= 10, "corpus", "a dictd number has at most 10 digits, got '", digits, "'");
  int64_t value = 0;
  for (char c : digits) {
    const int d = digit_of(c);
    require(d >= 0, "corpus", "dictd numbers use A-Z a-z 0-9 + /, got '", digits, "'");
    value = value * 64 + d;
  }
  return value;
}

std::vector<DictEntry> parse_dictd(std::string_view index, std::string_view dict, std::string_view source) {
  std::vector<DictEntry> out;
  std::set<std::pair<int64_t, int64_t>> seen;  // (offset, length) of the texts kept
  int64_t line_number = 0;
  size_t start = 0;
  while (start < index.size()) {
    size_t end = index.find('\n', start);
    if (end == std::string_view::npos) end = index.size();
    const std::string_view line = index.substr(start, end - start);
    start = end + 1;
    ++line_number;
    if (line.empty()) continue;
    const size_t tab1 = line.find('\t');
    const size_t tab2 = tab1 == std::string_view::npos ? tab1 : line.find('\t', tab1 + 1);
    if (tab2 == std::string_view::npos) {
      fail_runtime("corpus", source, ":", line_number, ": an index line is 'headword TAB offset TAB length'");
    }
    const std::string_view headword = line.substr(0, tab1);
    if (headword.starts_with("00-database-")) continue;
    int64_t offset = 0, length = 0;
    try {
      offset = dictd_number(line.substr(tab1 + 1, tab2 - tab1 - 1));
      length = dictd_number(line.substr(tab2 + 1));
    } catch (const std::invalid_argument& e) {
      fail_runtime("corpus", source, ":", line_number, ": ", std::string_view(e.what()).substr(9));
    }
    if (offset + length > static_cast<int64_t>(dict.size())) {
      fail_runtime("corpus", source, ":", line_number, ": entry '", headword, "' at ", offset, " + ", length,
                   " runs past the dictionary's ", dict.size(), " bytes");
    }
    if (!seen.insert({offset, length}).second) continue;  // the same text under another headword
    out.push_back({std::string(headword), std::string(dict.substr(static_cast<size_t>(offset),
                                                                   static_cast<size_t>(length)))});
  }
  return out;
}

std::string clean_gcide(std::string_view raw) {
  // Pass 1, by line: source-tag lines go.
  std::string kept;
  size_t start = 0;
  while (start < raw.size()) {
    size_t end = raw.find('\n', start);
    if (end == std::string_view::npos) end = raw.size();
    const std::string_view line = raw.substr(start, end - start);
    if (!is_source_tag_line(line)) {
      kept.append(line);
      kept.push_back('\n');
    }
    start = end + 1;
  }
  // Pass 2, by character.
  std::string out;
  const std::string_view s = kept;
  for (size_t i = 0; i < s.size();) {
    const char c = s[i];
    if (c == '\\') {
      // \Ab"a*cus\ and the respelling "(...)" that follows it.
      const size_t close = s.find('\\', i + 1);
      i = close == std::string_view::npos ? s.size() : close + 1;
      size_t j = i;
      while (j < s.size() && s[j] == ' ') ++j;
      if (j < s.size() && s[j] == '(') {
        const size_t paren = s.find(')', j);
        if (paren != std::string_view::npos && s.substr(j, paren - j).find('\n') == std::string_view::npos) {
          i = paren + 1;
        }
      }
      continue;
    }
    if (c == '[') {
      // A diacritic code has no space inside: "[a^]", "[imac]", "[.a]".
      const size_t close = bracket_end(s, i);
      if (close != std::string_view::npos && close - i <= 8 &&
          s.substr(i, close - i).find(' ') == std::string_view::npos) {
        i = close;
        continue;
      }
    }
    if (c == '{' || c == '}') {
      ++i;
      continue;
    }
    if (is_space(c)) {
      if (!out.empty() && out.back() != ' ') out.push_back(' ');
      ++i;
      continue;
    }
    if (c == ',' && !out.empty() && out.back() == ' ') out.pop_back();  // "Abacus \Ab"a*cus\, n." -> "Abacus, n."
    out.push_back(c);
    ++i;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

std::vector<DictEntry> read_gcide(const std::filesystem::path& index, const std::filesystem::path& dict) {
  const std::string index_text = detail::read_package_file(index, "dict-gcide");
  const std::string dict_text = detail::read_package_gzip(dict, "dict-gcide");
  std::vector<DictEntry> entries = parse_dictd(index_text, dict_text, index.string());
  for (DictEntry& e : entries) e.text = clean_gcide(e.text);
  return entries;
}

}  // namespace posenc::text
