// WordNet data lines written here in wndb(5WN)'s format, read field by field.
#include "posenc/text/wordnet.h"

#include "text_test_support.h"

namespace posenc::text {
namespace {

using test::expect_error;

// The license header (two leading spaces), a noun with two words and pointers,
// a satellite adjective with a position marker, a verb with frames.
constexpr const char* kData =
    "  1 This software and database is being provided to you, the LICENSEE, by\n"
    "  2 Princeton University under the following license.\n"
    "00002137 03 n 02 abstraction 0 abstract_entity 0 002 @ 00001740 n 0000 ~ 00023100 n 0000 | a general "
    "concept formed by extracting common features from specific examples  \n"
    "00004980 00 s 01 galore(ip) 0 001 & 00004413 a 0000 | in great numbers; \"there were daffodils galore\"  \n"
    "00002325 29 v 01 respire 1 002 $ 00001740 v 0000 @ 02108395 v 0000 01 + 02 00 | undergo respiration  \n";

TEST(WordNet, ParsesTheFieldsACorpusNeeds) {
  const std::vector<Synset> s = parse_wordnet_data(kData, "data.test");
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].id, "n00002137");
  EXPECT_EQ(s[0].pos, 'n');
  EXPECT_EQ(s[0].lex_filenum, 3);
  EXPECT_EQ(lexicographer_file_name(s[0].lex_filenum), "noun.Tops");
  EXPECT_EQ(s[0].words, (std::vector<std::string>{"abstraction", "abstract entity"}));
  EXPECT_EQ(s[0].gloss, "a general concept formed by extracting common features from specific examples");
  // A satellite adjective is an adjective; the position marker is not part of the word.
  EXPECT_EQ(s[1].id, "a00004980");
  EXPECT_EQ(s[1].words, std::vector<std::string>{"galore"});
  EXPECT_EQ(s[1].gloss, "in great numbers; \"there were daffodils galore\"");
  EXPECT_EQ(s[2].pos, 'v');
  EXPECT_EQ(lexicographer_file_name(s[2].lex_filenum), "verb.body");
}

TEST(WordNet, LexicographerFiles) {
  EXPECT_EQ(lexicographer_file_name(0), "adj.all");
  EXPECT_EQ(lexicographer_file_name(18), "noun.person");
  EXPECT_EQ(lexicographer_file_name(44), "adj.ppl");
  expect_error<std::invalid_argument>([] { lexicographer_file_name(45); },
                                      "[corpus] lex_filenum must be in [0, 44], got 45");
}

TEST(WordNet, MalformedLinesNameFileAndLine) {
  expect_error<std::runtime_error>([] { parse_wordnet_data("  header\n00001740 03 n 01 entity 0 000\n", "data.x"); },
                                   "[corpus] data.x:2: no ' | ' before the gloss");
  expect_error<std::runtime_error>([] { parse_wordnet_data("00001740 77 n 01 entity 0 000 | x\n", "data.x"); },
                                   "[corpus] data.x:1: lex_filenum must be 00 .. 44, got '77'");
  expect_error<std::runtime_error>([] { parse_wordnet_data("00001740 03 q 01 entity 0 000 | x\n", "data.x"); },
                                   "[corpus] data.x:1: ss_type must be one of n v a s r, got 'q'");
  expect_error<std::runtime_error>([] { parse_wordnet_data("00001740 03 n 03 entity 0 000 | x\n", "data.x"); },
                                   "[corpus] data.x:1: fewer words than w_cnt says");
  expect_error<std::runtime_error>([] { parse_wordnet_data("00001740 03 n 01 entity 0 000 |  \n", "data.x"); },
                                   "[corpus] data.x:1: empty gloss");
}

TEST(WordNet, MissingPackageIsNamed) {
  test::ScratchDir dir;
  expect_error<std::runtime_error>([&] { read_wordnet(dir.path()); },
                                   "[corpus] " + (dir.path() / "data.noun").string() +
                                       ": not found; install Debian's wordnet-base (bash scripts/setup.sh)");
}

TEST(WordNet, ReadsTheFourFilesInOrder) {
  test::ScratchDir dir;
  dir.write("data.noun", "00001740 03 n 01 entity 0 000 | that which is perceived\n");
  dir.write("data.verb", "00002325 29 v 01 respire 1 000 | undergo respiration\n");
  dir.write("data.adj", "00001740 00 a 01 able 0 000 | having the means\n");
  dir.write("data.adv", "00001740 02 r 01 barely 0 000 | only just\n");
  const std::vector<Synset> s = read_wordnet(dir.path());
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0].id + s[1].id + s[2].id + s[3].id, "n00001740v00002325a00001740r00001740");
}

}  // namespace
}  // namespace posenc::text
