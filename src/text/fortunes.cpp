#include "posenc/text/fortunes.h"

#include <algorithm>
#include <cstdint>
#include <system_error>

#include "posenc/error.h"
#include "read_text_file.h"

namespace posenc::text {
namespace {

// Well-formed UTF-8 (no overlongs, surrogates or code points past U+10FFFF).
bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      n = 1, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3, cp = c & 0x07;
    } else {
      return false;
    }
    if (i + n >= s.size()) return false;  // truncated sequence
    for (size_t k = 1; k <= n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    const uint32_t min = n == 1 ? 0x80 : n == 2 ? 0x800 : 0x10000;
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n + 1;
  }
  return true;
}

std::string collapse_whitespace(std::string_view s) {
  std::string out;
  for (char c : s) {
    const bool space = c == ' ' || c == '\t' || c == '\n' || c == '\r';
    if (space) {
      if (!out.empty() && out.back() != ' ') out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

}  // namespace

std::vector<Fortune> parse_fortunes(std::string_view text, std::string_view category, int64_t* skipped) {
  std::vector<Fortune> out;
  int64_t dropped = 0;
  std::string current;
  const auto flush = [&] {
    std::string t = collapse_whitespace(current);
    current.clear();
    if (t.empty()) return;
    if (!valid_utf8(t)) {
      ++dropped;
      return;
    }
    out.push_back({std::string(category), std::move(t)});
  };
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line == "%") {
      flush();
    } else {
      current.append(line);
      current.push_back('\n');
    }
  }
  flush();
  if (skipped) *skipped = dropped;
  return out;
}

std::vector<Fortune> read_fortunes(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    fail_runtime("corpus", dir.string(), ": not found; install Debian's fortunes (bash scripts/setup.sh)");
  }
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::filesystem::path& p = entry.path();
    if (!p.has_extension() && entry.is_regular_file(ec) && !entry.is_symlink(ec)) files.push_back(p);
  }
  if (ec) fail_runtime("corpus", dir.string(), ": cannot list: ", ec.message());
  std::sort(files.begin(), files.end());
  std::vector<Fortune> out;
  for (const std::filesystem::path& p : files) {
    std::vector<Fortune> some = parse_fortunes(detail::read_package_file(p, "fortunes"), p.filename().string());
    out.insert(out.end(), std::make_move_iterator(some.begin()), std::make_move_iterator(some.end()));
  }
  return out;
}

}  // namespace posenc::text
