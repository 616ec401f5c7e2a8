// Dictionaries in the dictd format (dictd(8): NAME.index lines "headword TAB
// offset TAB length", numbers in dictd's base 64, into the dictzip-compressed
// NAME.dict.dz), as Debian's dict-gcide installs the GNU Collaborative
// International Dictionary of English (GCIDE, 1913 Webster and additions).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace posenc::text {

inline constexpr const char* kGcideIndex = "/usr/share/dictd/gcide.index";
inline constexpr const char* kGcideDict = "/usr/share/dictd/gcide.dict.dz";

struct DictEntry {
  std::string headword;  // as the index spells it ("Abacus")
  std::string text;      // the entry's text (raw, or cleaned by clean_gcide)
};

// dictd's base 64: "A".."Z" "a".."z" "0".."9" "+" "/" as digits 0..63, most
// significant first. Throws std::invalid_argument naming the bad character.
int64_t dictd_number(std::string_view digits);

// Every entry of index, in index order, with its text from dict (the
// uncompressed bytes). Index entries whose headword starts with
// "00-database-" (the file's own metadata) are skipped; a text listed under
// several headwords (GCIDE lists a block of senses under each of its words)
// is kept once, under the first, so no text can land in two splits. Throws std::runtime_error
// naming source and the line for a malformed line or a range outside dict.
std::vector<DictEntry> parse_dictd(std::string_view index, std::string_view dict, std::string_view source);

// GCIDE with its markup removed by clean_gcide: not found -> "[corpus] ...:
// not found; install Debian's dict-gcide (bash scripts/setup.sh)".
std::vector<DictEntry> read_gcide(const std::filesystem::path& index = kGcideIndex,
                                  const std::filesystem::path& dict = kGcideDict);

// GCIDE's markup to plain text: the pronunciation between backslashes and a
// parenthesized respelling right after it are dropped; source tags on their
// own line ("[1913 Webster]", "[PJC]") and diacritic codes ("[a^]", "[imac]")
// are dropped; "{Abaci}" cross-reference braces are removed; whitespace runs
// become one space, and none is left before a comma.
std::string clean_gcide(std::string_view raw);

}  // namespace posenc::text
