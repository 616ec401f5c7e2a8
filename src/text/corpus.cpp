#include "posenc/text/corpus.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "posenc/error.h"
#include "posenc/text/dictd.h"
#include "posenc/text/fortunes.h"
#include "posenc/text/wordnet.h"

namespace posenc::text {
namespace {

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 14695981039346656037ull;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return h;
}

std::string lowercase(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

void add_wordnet(const CorpusOptions& o, std::vector<Document>& out) {
  for (Synset& s : read_wordnet(o.wordnet_dir)) {
    std::string words;
    for (const std::string& w : s.words) words += (words.empty() ? "" : ", ") + w;
    Document d;
    d.id = "wordnet:" + s.id;
    d.source = "wordnet";
    d.text = words + ": " + s.gloss;
    d.label = std::string(lexicographer_file_name(s.lex_filenum));
    d.pos = s.pos;
    d.split = split_of(d.id);
    out.push_back(std::move(d));
  }
}

void add_gcide(const CorpusOptions& o, std::vector<Document>& out) {
  std::map<std::string, int64_t> seen;  // occurrences of each lowercased headword so far
  for (DictEntry& e : read_gcide(o.gcide_index, o.gcide_dict)) {
    if (e.text.empty()) continue;
    const std::string key = lowercase(e.headword);
    Document d;
    d.id = "gcide:" + key + "#" + std::to_string(++seen[key]);
    d.source = "gcide";
    d.text = std::move(e.text);
    d.label = std::move(e.headword);
    d.split = split_of("gcide:" + key);
    out.push_back(std::move(d));
  }
}

void add_fortunes(const CorpusOptions& o, std::vector<Document>& out) {
  std::map<std::string, int64_t> seen;
  for (Fortune& f : read_fortunes(o.fortunes_dir)) {
    Document d;
    d.id = "fortunes:" + f.category + "#" + std::to_string(++seen[f.category]);
    d.source = "fortunes";
    d.text = std::move(f.text);
    d.label = std::move(f.category);
    d.split = split_of(d.id);
    out.push_back(std::move(d));
  }
}

int64_t count_words(std::string_view s) {
  int64_t n = 0;
  bool in_word = false;
  for (char c : s) {
    const bool space = std::isspace(static_cast<unsigned char>(c)) != 0;
    if (!space && !in_word) ++n;
    in_word = !space;
  }
  return n;
}

}  // namespace

std::string_view split_name(Split split) noexcept {
  switch (split) {
    case Split::kTrain: return "train";
    case Split::kValidation: return "validation";
    case Split::kTest: return "test";
  }
  return "?";
}

Split split_of(std::string_view split_key) noexcept {
  const uint64_t bucket = fnv1a(split_key) % 100;
  return bucket < 80 ? Split::kTrain : bucket < 90 ? Split::kValidation : Split::kTest;
}

std::vector<Document> load_corpus(const CorpusOptions& options) {
  require(!options.sources.empty(), "corpus", "sources must name at least one of wordnet, gcide, fortunes, got none");
  for (size_t i = 0; i < options.sources.size(); ++i) {
    const std::string& s = options.sources[i];
    require(std::find(kCorpusSources.begin(), kCorpusSources.end(), s) != kCorpusSources.end(), "corpus",
            "source must be one of wordnet, gcide, fortunes, got '", s, "'");
    require(std::find(options.sources.begin(), options.sources.begin() + static_cast<std::ptrdiff_t>(i), s) ==
                options.sources.begin() + static_cast<std::ptrdiff_t>(i),
            "corpus", "source '", s, "' is named twice");
  }
  std::vector<Document> out;
  for (const std::string& s : options.sources) {
    if (s == "wordnet") add_wordnet(options, out);
    if (s == "gcide") add_gcide(options, out);
    if (s == "fortunes") add_fortunes(options, out);
  }
  return out;
}

CorpusStats corpus_stats(const std::vector<Document>& documents) {
  CorpusStats stats;
  for (const Document& d : documents) {
    auto it = std::find(stats.sources.begin(), stats.sources.end(), d.source);
    size_t k = static_cast<size_t>(it - stats.sources.begin());
    if (it == stats.sources.end()) {
      stats.sources.push_back(d.source);
      stats.splits.emplace_back();
    }
    SplitStats& s = stats.splits[k][static_cast<size_t>(d.split)];
    ++s.documents;
    s.bytes += static_cast<int64_t>(d.text.size());
    s.words += count_words(d.text);
  }
  return stats;
}

}  // namespace posenc::text
