// The corpus: sources, labels, the deterministic split and the statistics,
// on small package trees written here.
#include "posenc/text/corpus.h"

#include <zlib.h>

#include <map>

#include "posenc/text/fortunes.h"
#include "text_test_support.h"

namespace posenc::text {
namespace {

using test::expect_error;

// 64-bit FNV-1a, written here from its definition.
uint64_t fnv(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

TEST(Corpus, SplitIsAHashOfTheKey) {
  std::map<Split, int> counts;
  for (int i = 0; i < 20000; ++i) {
    const std::string key = "doc" + std::to_string(i);
    const Split s = split_of(key);
    const uint64_t b = fnv(key) % 100;
    EXPECT_EQ(s, b < 80 ? Split::kTrain : b < 90 ? Split::kValidation : Split::kTest) << key;
    ++counts[s];
  }
  // 80 / 10 / 10 within a few standard deviations (sd of the 10% share at n = 20000: 42).
  EXPECT_NEAR(counts[Split::kTrain], 16000, 250);
  EXPECT_NEAR(counts[Split::kValidation], 2000, 200);
  EXPECT_NEAR(counts[Split::kTest], 2000, 200);
  EXPECT_EQ(split_name(Split::kValidation), "validation");
}

TEST(Fortunes, SeparatorsWhitespaceAndBadUtf8) {
  int64_t skipped = -1;
  const std::vector<Fortune> f =
      parse_fortunes("First one\n  on two lines\n%\n%\nSecond\r\n%\nbad \xff byte\n%\nlast, no separator", "cat",
                     &skipped);
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[0].text, "First one on two lines");
  EXPECT_EQ(f[1].text, "Second");
  EXPECT_EQ(f[2].text, "last, no separator");
  EXPECT_EQ(f[2].category, "cat");
  EXPECT_EQ(skipped, 1);
  EXPECT_EQ(parse_fortunes("caf\xc3\xa9\n%\n\xe2\x82\n", "x").size(), 1u);  // a truncated sequence is dropped
}

// dictd's base-64 digits (the sizes here are below 64: one digit).
constexpr const char* kDigits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

class PackageTree : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_.write("data.noun", "00001740 03 n 01 entity 0 000 | that which is perceived\n"
                            "00002137 03 n 02 abstraction 0 abstract_entity 0 000 | a general concept\n");
    dir_.write("data.verb", "00002325 29 v 01 respire 1 000 | undergo respiration\n");
    dir_.write("data.adj", "");
    dir_.write("data.adv", "00001740 02 r 01 barely 0 000 | only just\n");
    const std::string noun = "Cat \\Cat\\, n. A small animal.\n";
    const std::string verb = "Cat \\Cat\\, v. t. To bring to the cathead.\n";
    const std::string dict = noun + verb;
    gzFile f = gzopen((dir_.path() / "g.dict.dz").c_str(), "wb");
    gzwrite(f, dict.data(), static_cast<unsigned>(dict.size()));
    gzclose(f);
    dir_.write("g.index", "cat\tA\t" + std::string(1, kDigits[noun.size()]) + "\nCat\t" +
                              std::string(1, kDigits[noun.size()]) + "\t" + std::string(1, kDigits[verb.size()]) +
                              "\n");
    std::filesystem::create_directories(dir_.path() / "fortunes");
    dir_.write("fortunes/food", "Eat.\n%\nDrink.\n");
    dir_.write("fortunes/food.dat", "binary index, skipped");
    dir_.write("fortunes/law", "Sue.\n");
    options_.wordnet_dir = dir_.path();
    options_.gcide_index = dir_.path() / "g.index";
    options_.gcide_dict = dir_.path() / "g.dict.dz";
    options_.fortunes_dir = dir_.path() / "fortunes";
  }
  test::ScratchDir dir_;
  CorpusOptions options_;
};

TEST_F(PackageTree, DocumentsIdsLabelsAndSplits) {
  const std::vector<Document> docs = load_corpus(options_);
  ASSERT_EQ(docs.size(), 9u);
  EXPECT_EQ(docs[0].id, "wordnet:n00001740");
  EXPECT_EQ(docs[0].text, "entity: that which is perceived");
  EXPECT_EQ(docs[0].label, "noun.Tops");
  EXPECT_EQ(docs[0].pos, 'n');
  EXPECT_EQ(docs[1].text, "abstraction, abstract entity: a general concept");
  EXPECT_EQ(docs[2].label, "verb.body");
  EXPECT_EQ(docs[3].id, "wordnet:r00001740");
  EXPECT_EQ(docs[4].id, "gcide:cat#1");
  EXPECT_EQ(docs[4].text, "Cat, n. A small animal.");
  EXPECT_EQ(docs[4].label, "cat");
  EXPECT_EQ(docs[5].id, "gcide:cat#2");
  EXPECT_EQ(docs[5].label, "Cat");
  EXPECT_EQ(docs[4].split, docs[5].split);  // every sense of a word in one split
  EXPECT_EQ(docs[6].id, "fortunes:food#1");
  EXPECT_EQ(docs[7].text, "Drink.");
  EXPECT_EQ(docs[8].label, "law");
  for (const Document& d : docs) {
    EXPECT_EQ(d.split, split_of(d.source == "gcide" ? "gcide:cat" : d.id)) << d.id;
  }
  // One source alone gives the same documents as in the whole corpus.
  options_.sources = {"fortunes"};
  const std::vector<Document> alone = load_corpus(options_);
  ASSERT_EQ(alone.size(), 3u);
  EXPECT_EQ(alone[1].id, docs[7].id);
  EXPECT_EQ(alone[1].split, docs[7].split);
}

TEST_F(PackageTree, Stats) {
  const std::vector<Document> docs = load_corpus(options_);
  const CorpusStats stats = corpus_stats(docs);
  ASSERT_EQ(stats.sources, (std::vector<std::string>{"wordnet", "gcide", "fortunes"}));
  int64_t documents = 0, words = 0;
  for (const auto& per_split : stats.splits) {
    for (const SplitStats& s : per_split) documents += s.documents, words += s.words;
  }
  EXPECT_EQ(documents, 9);
  // Runs of non-space characters: 5 + 6 + 3 + 3 wordnet ("entity:" is one), 5 + 8 gcide, 1 + 1 + 1 fortunes.
  EXPECT_EQ(words, 5 + 6 + 3 + 3 + 5 + 8 + 3);
}

TEST_F(PackageTree, BadOptions) {
  options_.sources = {"wordnet", "wiki"};
  expect_error<std::invalid_argument>([&] { load_corpus(options_); },
                                      "[corpus] source must be one of wordnet, gcide, fortunes, got 'wiki'");
  options_.sources = {"gcide", "gcide"};
  expect_error<std::invalid_argument>([&] { load_corpus(options_); }, "[corpus] source 'gcide' is named twice");
  options_.sources = {};
  expect_error<std::invalid_argument>([&] { load_corpus(options_); },
                                      "[corpus] sources must name at least one of wordnet, gcide, fortunes, got none");
  options_.sources = {"fortunes"};
  options_.fortunes_dir = dir_.path() / "nothing";
  expect_error<std::runtime_error>([&] { load_corpus(options_); },
                                   "[corpus] " + (dir_.path() / "nothing").string() +
                                       ": not found; install Debian's fortunes (bash scripts/setup.sh)");
}

}  // namespace
}  // namespace posenc::text
