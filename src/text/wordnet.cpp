// wndb(5WN): synset_offset lex_filenum ss_type w_cnt (hex) word lex_id ...
// p_cnt ptr... [frames] | gloss. Only the fields a corpus needs are kept;
// the pointers are skipped by their count.
#include "posenc/text/wordnet.h"

#include <charconv>

#include "posenc/error.h"
#include "read_text_file.h"

namespace posenc::text {
namespace {

constexpr std::array<std::string_view, kLexicographerFiles> kLexNames = {
    "adj.all",          "adj.pert",           "adv.all",          "noun.Tops",       "noun.act",
    "noun.animal",      "noun.artifact",      "noun.attribute",   "noun.body",       "noun.cognition",
    "noun.communication", "noun.event",       "noun.feeling",     "noun.food",       "noun.group",
    "noun.location",    "noun.motive",        "noun.object",      "noun.person",     "noun.phenomenon",
    "noun.plant",       "noun.possession",    "noun.process",     "noun.quantity",   "noun.relation",
    "noun.shape",       "noun.state",         "noun.substance",   "noun.time",       "verb.body",
    "verb.change",      "verb.cognition",     "verb.communication", "verb.competition", "verb.consumption",
    "verb.contact",     "verb.creation",      "verb.emotion",     "verb.motion",     "verb.perception",
    "verb.possession",  "verb.social",        "verb.stative",     "verb.weather",    "adj.ppl"};

// Splits at single spaces, as the format writes fields.
std::vector<std::string_view> fields_of(std::string_view s) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (start < s.size()) {
    size_t end = s.find(' ', start);
    if (end == std::string_view::npos) end = s.size();
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

bool parse_number(std::string_view s, int base, int64_t& out) {
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out, base);
  return ec == std::errc() && end == s.data() + s.size();
}

// "physical_entity" -> "physical entity"; "galore(ip)" -> "galore" (adjective position markers).
std::string word_of(std::string_view w) {
  const size_t paren = w.find('(');
  if (paren != std::string_view::npos && !w.empty() && w.back() == ')') w = w.substr(0, paren);
  std::string out(w);
  for (char& c : out) {
    if (c == '_') c = ' ';
  }
  return out;
}

std::string trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return std::string(s);
}

Synset parse_line(std::string_view line, std::string_view source, int64_t line_number) {
  const auto bad = [&](std::string_view what) {
    fail_runtime("corpus", source, ":", line_number, ": ", what);
  };
  const size_t bar = line.find(" | ");
  if (bar == std::string_view::npos) bad("no ' | ' before the gloss");
  const std::vector<std::string_view> f = fields_of(line.substr(0, bar));
  if (f.size() < 6) bad("fewer than 6 fields before the gloss");
  Synset s;
  int64_t value = 0;
  if (!parse_number(f[1], 10, value) || value < 0 || value >= kLexicographerFiles) {
    bad("lex_filenum must be 00 .. 44, got '" + std::string(f[1]) + "'");
  }
  s.lex_filenum = static_cast<int>(value);
  if (f[2].size() != 1 || std::string_view("nvasr").find(f[2][0]) == std::string_view::npos) {
    bad("ss_type must be one of n v a s r, got '" + std::string(f[2]) + "'");
  }
  s.pos = f[2][0] == 's' ? 'a' : f[2][0];
  s.id.push_back(s.pos);  // built in place: GCC 12 warns falsely on char-string + string at -O3
  s.id.append(f[0]);
  int64_t words = 0;
  if (!parse_number(f[3], 16, words) || words < 1) bad("w_cnt must be a positive hex count, got '" + std::string(f[3]) + "'");
  if (static_cast<int64_t>(f.size()) < 4 + 2 * words) bad("fewer words than w_cnt says");
  for (int64_t i = 0; i < words; ++i) s.words.push_back(word_of(f[static_cast<size_t>(4 + 2 * i)]));
  s.gloss = trim(line.substr(bar + 3));
  if (s.gloss.empty()) bad("empty gloss");
  return s;
}

}  // namespace

std::string_view lexicographer_file_name(int lex_filenum) {
  require(lex_filenum >= 0 && lex_filenum < kLexicographerFiles, "corpus", "lex_filenum must be in [0, 44], got ",
          lex_filenum);
  return kLexNames[static_cast<size_t>(lex_filenum)];
}

std::vector<Synset> parse_wordnet_data(std::string_view text, std::string_view source) {
  std::vector<Synset> out;
  int64_t line_number = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(start, end - start);
    ++line_number;
    start = end + 1;
    if (line.empty() || line.starts_with("  ")) continue;  // the license header
    out.push_back(parse_line(line, source, line_number));
  }
  return out;
}

std::vector<Synset> read_wordnet(const std::filesystem::path& dir) {
  std::vector<Synset> out;
  for (const char* part : {"noun", "verb", "adj", "adv"}) {
    const std::filesystem::path path = dir / (std::string("data.") + part);
    const std::string text = detail::read_package_file(path, "wordnet-base");
    std::vector<Synset> synsets = parse_wordnet_data(text, path.string());
    out.insert(out.end(), std::make_move_iterator(synsets.begin()), std::make_move_iterator(synsets.end()));
  }
  return out;
}

}  // namespace posenc::text
