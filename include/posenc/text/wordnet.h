// WordNet 3.0's synsets as Debian's wordnet-base installs them
// (/usr/share/wordnet/data.{noun,verb,adj,adv}, format wndb(5WN)): each
// synset's words, part of speech, lexicographer file and gloss. The glosses
// are English text with real labels for classification (part of speech, one
// of 4; lexicographer file, one of 45).
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace posenc::text {

inline constexpr const char* kWordNetDir = "/usr/share/wordnet";

struct Synset {
  std::string id;                  // "n00001740": part of speech and byte offset, unique
  char pos = 'n';                  // 'n', 'v', 'a' or 'r' (satellite adjectives 's' are read as 'a')
  int lex_filenum = 0;             // 0 .. 44, see lexicographer_file_name
  std::vector<std::string> words;  // "physical entity" (underscores as spaces, adjective markers removed)
  std::string gloss;               // definition and examples, as WordNet writes them
};

// The 45 lexicographer files of lexnames(5WN): 0 "adj.all" .. 44 "adj.ppl".
std::string_view lexicographer_file_name(int lex_filenum);
inline constexpr int kLexicographerFiles = 45;

// Every synset of the four data files in dir, in file order (noun, verb,
// adj, adv). Throws std::runtime_error naming the file and, when it is
// missing, the package: "[corpus] /usr/share/wordnet/data.noun: not found;
// install Debian's wordnet-base (bash scripts/setup.sh)"; a malformed line
// names the file and line number.
std::vector<Synset> read_wordnet(const std::filesystem::path& dir = kWordNetDir);

// One data file's lines (the license header lines start with two spaces and
// are skipped). source names the file in messages.
std::vector<Synset> parse_wordnet_data(std::string_view text, std::string_view source);

}  // namespace posenc::text
