// The fortune cookie files Debian's fortunes and fortunes-min install
// (/usr/share/games/fortunes/CATEGORY: texts separated by lines holding
// only "%"): short English texts labelled with their category.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace posenc::text {

inline constexpr const char* kFortunesDir = "/usr/share/games/fortunes";

struct Fortune {
  std::string category;  // the file's name: "computers", "food", ...
  std::string text;      // whitespace runs as one space
};

// The fortunes of one file's text, in order; empty ones and those that are not
// valid UTF-8 are skipped (skipped counts them when given).
std::vector<Fortune> parse_fortunes(std::string_view text, std::string_view category, int64_t* skipped = nullptr);

// Every category file of dir (regular files without an extension: not the
// .dat indexes or .u8 links), categories in name order. A missing dir:
// "[corpus] /usr/share/games/fortunes: not found; install Debian's fortunes (bash scripts/setup.sh)".
std::vector<Fortune> read_fortunes(const std::filesystem::path& dir = kFortunesDir);

}  // namespace posenc::text
