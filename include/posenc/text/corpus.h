// The experiments' corpus: English documents from Debian packages, each with
// a real label, split deterministically by document into train / validation /
// test (80 / 10 / 10 by a hash of the document's split key, so a document's
// split never depends on which other documents are loaded or in what order).
//
//   wordnet   a synset's words and gloss ("abacus: a calculator that performs
//             arithmetic functions by ..."), label its lexicographer file
//             ("noun.artifact"), pos its part of speech; split key the synset
//   gcide     a GCIDE entry's cleaned text, label its headword; split key the
//             lowercased headword, so every sense of a word shares a split
//   fortunes  a fortune, label its category; split key the category and index
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace posenc::text {

enum class Split { kTrain, kValidation, kTest };
std::string_view split_name(Split split) noexcept;  // "train", "validation", "test"

// 64-bit FNV-1a of the key, mod 100: < 80 train, < 90 validation, else test.
Split split_of(std::string_view split_key) noexcept;

struct Document {
  std::string id;         // "wordnet:n02666196", "gcide:abacus#1", "fortunes:computers#17"
  std::string source;     // "wordnet", "gcide", "fortunes"
  std::string text;
  std::string label;      // see above
  char pos = 0;           // wordnet only: 'n', 'v', 'a', 'r'
  Split split = Split::kTrain;
};

inline constexpr std::array<std::string_view, 3> kCorpusSources = {"wordnet", "gcide", "fortunes"};

struct CorpusOptions {
  std::vector<std::string> sources = {"wordnet", "gcide", "fortunes"};
  std::filesystem::path wordnet_dir = "/usr/share/wordnet";
  std::filesystem::path gcide_index = "/usr/share/dictd/gcide.index";
  std::filesystem::path gcide_dict = "/usr/share/dictd/gcide.dict.dz";
  std::filesystem::path fortunes_dir = "/usr/share/games/fortunes";
};

// The documents of the sources, in source order, each source in its file order.
// "[corpus] source must be one of wordnet, gcide, fortunes, got 'x'"; a source
// named twice is refused; a missing package names it (see wordnet.h).
std::vector<Document> load_corpus(const CorpusOptions& options = {});

struct SplitStats {
  int64_t documents = 0;
  int64_t bytes = 0;
  int64_t words = 0;  // runs of non-space characters
};

// Per source (in the order given) and split.
struct CorpusStats {
  std::vector<std::string> sources;
  std::vector<std::array<SplitStats, 3>> splits;  // [source][split]
};
CorpusStats corpus_stats(const std::vector<Document>& documents);

}  // namespace posenc::text
