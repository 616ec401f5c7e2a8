#include "posenc/text/tokenizer.h"

#include <gtest/gtest.h>
#include <sentencepiece_trainer.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "text_test_support.h"

// sentencepiece's process-wide log level, exported by libsentencepiece.so
// 0.1.97 but declared in no installed header (see tokenizer.cpp).
namespace sentencepiece::logging {
int GetMinLogLevel();
void SetMinLogLevel(int v);
}  // namespace sentencepiece::logging

namespace posenc::text {
namespace {

namespace fs = std::filesystem;
using test::error_of;

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const fs::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::vector<std::string> entries(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}


// 400 sentences of 5-12 lowercase words from a 50-word list, drawn by a fixed
// LCG: a corpus of ASCII words and single spaces, so that sentencepiece's
// normalization (NFKC, whitespace folding) leaves every text as it is.
std::vector<std::string> corpus() {
  static const char* const kWords[] = {
      "the",  "cat",   "sat",     "on",      "mat",     "dog",    "ran",     "over",  "hill",   "and",
      "a",    "bird",  "sang",    "in",      "tree",    "small",  "red",     "fox",   "jumped", "quick",
      "brown", "lazy", "river",   "flows",   "through", "green",  "valley",  "under", "bright", "sun",
      "moon", "shines", "at",     "night",   "children", "play",  "with",    "ball",  "garden", "house",
      "old",  "man",   "reads",   "book",    "window",  "rain",   "falls",   "softly", "city",  "streets"};
  uint64_t state = 12345;
  std::vector<std::string> texts;
  for (int i = 0; i < 400; ++i) {
    std::string text;
    for (int k = 0; k < 5 + i % 8; ++k) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      if (k > 0) text += ' ';
      text += kWords[(state >> 33) % std::size(kWords)];
    }
    texts.push_back(text);
  }
  return texts;
}

TokenizerOptions options(std::string model_type, int64_t vocab_size) {
  TokenizerOptions o;
  o.model_type = std::move(model_type);
  o.vocab_size = vocab_size;
  return o;
}

// The largest vocabularies these 50 words allow are 83 pieces (unigram) and
// 352 (bpe), per sentencepiece's own error below.
const TokenizerOptions kUnigram = options("unigram", 64);
const TokenizerOptions kBpe = options("bpe", 100);

TEST(Tokenizer, TrainEncodeDecodeRoundTrips) {
  const std::vector<std::string> texts = corpus();
  for (const TokenizerOptions& o : {kUnigram, kBpe}) {
    SCOPED_TRACE(o.model_type);
    test::ScratchDir dir;
    const Tokenizer tokenizer = Tokenizer::train(texts, o, dir.path());
    EXPECT_FALSE(tokenizer.loaded_from_cache());
    EXPECT_EQ(tokenizer.vocab_size(), o.vocab_size);
    size_t total_ids = 0, total_words = 0;
    for (const std::string& text : texts) {
      const std::vector<int32_t> ids = tokenizer.encode(text);
      total_ids += ids.size();
      total_words += static_cast<size_t>(std::count(text.begin(), text.end(), ' ')) + 1;
      for (const int32_t id : ids) {
        ASSERT_GE(id, 0);
        ASSERT_LT(id, tokenizer.vocab_size());
        ASSERT_NE(id, kUnkId) << text;  // character_coverage 1: every character seen is a piece
      }
      ASSERT_EQ(tokenizer.decode(ids), text);
    }
    // Subwords, not characters: a text takes fewer ids than it has bytes.
    size_t total_bytes = 0;
    for (const std::string& text : texts) total_bytes += text.size();
    EXPECT_LT(total_ids, total_bytes / 2);
    EXPECT_GE(total_ids, total_words);
  }
}

TEST(Tokenizer, SpecialIdsAreFixed) {
  const std::vector<std::string> texts = corpus();
  for (const TokenizerOptions& o : {kUnigram, kBpe}) {
    SCOPED_TRACE(o.model_type);
    test::ScratchDir dir;
    const Tokenizer tokenizer = Tokenizer::train(texts, o, dir.path());
    const std::vector<int32_t> ids = tokenizer.encode("<mask> cat <sep> dog <mask>");
    EXPECT_EQ(std::count(ids.begin(), ids.end(), kMaskId), 2);
    EXPECT_EQ(std::count(ids.begin(), ids.end(), kSepId), 1);
    EXPECT_EQ(tokenizer.decode(std::vector<int32_t>{kMaskId}), "<mask>");
    EXPECT_EQ(tokenizer.decode(std::vector<int32_t>{kSepId}), "<sep>");
    // Control symbols: never produced by encode, dropped by decode.
    EXPECT_EQ(tokenizer.decode(std::vector<int32_t>{kPadId, kBosId, kEosId}), "");
    for (const std::string& text : texts) {
      for (const int32_t id : tokenizer.encode(text)) {
        ASSERT_TRUE(id != kPadId && id != kBosId && id != kEosId && id != kMaskId && id != kSepId) << id;
      }
    }
    // 'Q' is in no text: unknown. sentencepiece shows <unk> as " \u2047 ".
    const std::vector<int32_t> unknown = tokenizer.encode("cat Q");
    EXPECT_EQ(std::count(unknown.begin(), unknown.end(), kUnkId), 1);
    EXPECT_EQ(tokenizer.decode(std::vector<int32_t>{kUnkId}), " \xE2\x81\x87 ");
  }
}

TEST(Tokenizer, TrainingIsByteDeterministic) {
  const std::vector<std::string> texts = corpus();
  for (const TokenizerOptions& o : {kUnigram, kBpe}) {
    SCOPED_TRACE(o.model_type);
    test::ScratchDir a, b;
    const Tokenizer first = Tokenizer::train(texts, o, a.path());
    const Tokenizer second = Tokenizer::train(texts, o, b.path());
    EXPECT_FALSE(second.loaded_from_cache());
    EXPECT_EQ(first.model_file().filename(), second.model_file().filename());
    EXPECT_NE(first.model_file(), second.model_file());
    const std::string bytes = read_bytes(first.model_file());
    EXPECT_GT(bytes.size(), 1000u);
    EXPECT_TRUE(bytes == read_bytes(second.model_file()));
  }
}

TEST(Tokenizer, NewlinesInsideATextAreSpaces) {
  const std::vector<std::string> texts = corpus();
  std::vector<std::string> with_newlines = texts;
  for (std::string& text : with_newlines) std::replace(text.begin(), text.end(), ' ', '\n');
  test::ScratchDir dir;
  const Tokenizer spaced = Tokenizer::train(texts, kUnigram, dir.path());
  const Tokenizer broken = Tokenizer::train(with_newlines, kUnigram, dir.path());
  // Different texts, so a different cache entry, but the same model.
  EXPECT_NE(spaced.model_file(), broken.model_file());
  EXPECT_TRUE(read_bytes(spaced.model_file()) == read_bytes(broken.model_file()));
  EXPECT_EQ(spaced.encode("the cat\nsat\r\non a mat"), spaced.encode("the cat sat on a mat"));
}

TEST(Tokenizer, SecondTrainLoadsTheCachedModelWithoutRewritingIt) {
  const std::vector<std::string> texts = corpus();
  test::ScratchDir dir;
  const fs::path cache = dir / "cache" / "spm";  // created, parents included
  const Tokenizer first = Tokenizer::train(texts, kUnigram, cache);
  EXPECT_FALSE(first.loaded_from_cache());
  EXPECT_EQ(first.model_file().parent_path(), cache);
  const std::string name = first.model_file().filename().string();
  ASSERT_EQ(name.size(), std::string_view("spm-0123456789abcdef.model").size());
  EXPECT_EQ(name.substr(0, 4), "spm-");
  EXPECT_EQ(name.find_first_not_of("0123456789abcdef", 4), 20u);
  EXPECT_EQ(name.substr(20), ".model");
  EXPECT_EQ(entries(cache), std::vector<std::string>{name});  // no temporary file left behind

  struct stat before {};
  ASSERT_EQ(::stat(first.model_file().c_str(), &before), 0);
  const Tokenizer second = Tokenizer::train(texts, kUnigram, cache);
  EXPECT_TRUE(second.loaded_from_cache());
  EXPECT_EQ(second.model_file(), first.model_file());
  struct stat after {};
  ASSERT_EQ(::stat(second.model_file().c_str(), &after), 0);
  // An atomic rewrite would be a new inode (rename of a temporary file).
  EXPECT_EQ(after.st_ino, before.st_ino);
  EXPECT_EQ(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
  EXPECT_EQ(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
  EXPECT_EQ(entries(cache), std::vector<std::string>{name});
  for (const std::string& text : texts) ASSERT_EQ(second.encode(text), first.encode(text));
}

TEST(Tokenizer, EveryTextAndOptionIsPartOfTheCacheKey) {
  const std::vector<std::string> texts = corpus();
  std::vector<std::vector<std::string>> corpora(4, texts);
  corpora[1].back() += " cat";                  // one text changed
  corpora[2].push_back("dog");                  // one text more
  corpora[3][0] += corpora[3][1].substr(0, 3);  // same bytes, split elsewhere
  corpora[3][1] = corpora[3][1].substr(3);
  std::vector<TokenizerOptions> variants(5, kUnigram);
  variants[1].vocab_size = 65;
  variants[2].model_type = "bpe";
  variants[3].character_coverage = 0.9995;
  variants[4].seed = 1;
  test::ScratchDir dir;
  std::set<fs::path> files;
  for (const std::vector<std::string>& c : corpora) {
    files.insert(Tokenizer::train(c, kUnigram, dir.path()).model_file());
  }
  for (size_t i = 1; i < variants.size(); ++i) {
    files.insert(Tokenizer::train(texts, variants[i], dir.path()).model_file());
  }
  EXPECT_EQ(files.size(), corpora.size() + variants.size() - 1);
  EXPECT_EQ(entries(dir.path()).size(), files.size());
}

TEST(Tokenizer, LoadGivesTheSameEncodings) {
  const std::vector<std::string> texts = corpus();
  for (const TokenizerOptions& o : {kUnigram, kBpe}) {
    SCOPED_TRACE(o.model_type);
    test::ScratchDir dir;
    const Tokenizer trained = Tokenizer::train(texts, o, dir.path());
    const Tokenizer loaded = Tokenizer::load(trained.model_file());
    EXPECT_EQ(loaded.model_file(), trained.model_file());
    EXPECT_FALSE(loaded.loaded_from_cache());
    EXPECT_EQ(loaded.vocab_size(), o.vocab_size);
    for (const std::string& text : texts) ASSERT_EQ(loaded.encode(text), trained.encode(text));
    // A copy shares the model.
    const Tokenizer copy = loaded;
    EXPECT_EQ(copy.encode(texts[0]), trained.encode(texts[0]));
  }
}

TEST(Tokenizer, LoadRefusesAMissingGarbageOrForeignFile) {
  test::ScratchDir dir;
  const fs::path missing = dir / "missing.model";
  EXPECT_EQ(error_of<std::runtime_error>([&] { Tokenizer::load(missing); }),
            "[tokenizer] " + missing.string() + ": cannot open: No such file or directory");
  EXPECT_EQ(error_of<std::runtime_error>([&] { Tokenizer::load(dir.path()); }),
            "[tokenizer] " + dir.path().string() + ": not a regular file");

  const fs::path garbage = dir / "garbage.model";
  write_bytes(garbage, "hello, I am not a protobuf");
  EXPECT_EQ(error_of<std::runtime_error>([&] { Tokenizer::load(garbage); }),
            "[tokenizer] " + garbage.string() +
                ": not a sentencepiece model: cannot parse it");
  const fs::path empty = dir / "empty.model";
  write_bytes(empty, "");
  EXPECT_EQ(error_of<std::runtime_error>([&] { Tokenizer::load(empty); }),
            "[tokenizer] " + empty.string() + ": not a sentencepiece model: unk is not defined.");

  // A model with sentencepiece's default ids (unk 0, bos 1, eos 2, no pad).
  std::string foreign;
  class Texts final : public sentencepiece::SentenceIterator {
   public:
    bool done() const override { return index_ >= texts_.size(); }
    void Next() override { ++index_; }
    const std::string& value() const override { return texts_[index_]; }
    sentencepiece::util::Status status() const override { return {}; }

   private:
    std::vector<std::string> texts_ = corpus();
    size_t index_ = 0;
  } iterator;
  const int level = sentencepiece::logging::GetMinLogLevel();
  sentencepiece::logging::SetMinLogLevel(3);  // quiet, as posenc trains
  const bool trained = sentencepiece::SentencePieceTrainer::Train({{"vocab_size", "64"}}, &iterator, &foreign).ok();
  sentencepiece::logging::SetMinLogLevel(level);
  ASSERT_TRUE(trained);
  const fs::path foreign_file = dir / "foreign.model";
  write_bytes(foreign_file, foreign);
  EXPECT_EQ(error_of<std::runtime_error>([&] { Tokenizer::load(foreign_file); }),
            "[tokenizer] " + foreign_file.string() + ": pad id must be 0 (posenc's fixed special ids), got -1");
}

TEST(Tokenizer, ACorruptCacheEntryIsReportedNotRetrained) {
  const std::vector<std::string> texts = corpus();
  test::ScratchDir dir;
  const fs::path file = Tokenizer::train(texts, kUnigram, dir.path()).model_file();
  write_bytes(file, "");
  EXPECT_EQ(error_of<std::runtime_error>([&] { Tokenizer::train(texts, kUnigram, dir.path()); }),
            "[tokenizer] " + file.string() + ": not a sentencepiece model: unk is not defined.");
}

TEST(Tokenizer, BadOptionsAreRefused) {
  const std::vector<std::string> texts = corpus();
  test::ScratchDir dir;
  const auto train_error = [&](const std::vector<std::string>& t, const TokenizerOptions& o) {
    return error_of<std::invalid_argument>([&] { Tokenizer::train(t, o, dir.path()); });
  };
  TokenizerOptions o = kUnigram;
  o.vocab_size = 3;
  EXPECT_EQ(train_error(texts, o), "[tokenizer] vocab_size must be >= 16, got 3");
  o.vocab_size = int64_t{1} << 31;
  EXPECT_EQ(train_error(texts, o), "[tokenizer] vocab_size must be <= 2147483647, got 2147483648");
  o = kUnigram;
  o.model_type = "word2vec";
  EXPECT_EQ(train_error(texts, o), "[tokenizer] model_type must be \"unigram\" or \"bpe\", got \"word2vec\"");
  o = kUnigram;
  o.character_coverage = 0;
  EXPECT_EQ(train_error(texts, o), "[tokenizer] character_coverage must be in (0, 1], got 0");
  o.character_coverage = 1.5;
  EXPECT_EQ(train_error(texts, o), "[tokenizer] character_coverage must be in (0, 1], got 1.5");
  o.character_coverage = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(train_error(texts, o), "[tokenizer] character_coverage must be in (0, 1], got nan");
  o = kUnigram;
  o.seed = 4294967295u;
  EXPECT_EQ(train_error(texts, o),
            "[tokenizer] seed must be < 4294967295 (sentencepiece's 'no seed'), got 4294967295");
  EXPECT_EQ(train_error({}, kUnigram), "[tokenizer] texts must not be empty, got 0 texts");
  EXPECT_EQ(train_error({"", " \n", "\t"}, kUnigram), "[tokenizer] texts must not all be blank, got 3 blank texts");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { Tokenizer::train(texts, kUnigram, ""); }),
            "[tokenizer] cache_dir must not be empty");
  EXPECT_TRUE(entries(dir.path()).empty());  // nothing trained, nothing written
}

TEST(Tokenizer, ACorpusTooSmallForTheVocabularyIsReported) {
  const std::vector<std::string> texts = corpus();
  test::ScratchDir dir;
  EXPECT_EQ(error_of<std::runtime_error>([&] { Tokenizer::train(texts, options("unigram", 200), dir.path()); }),
            "[tokenizer] sentencepiece cannot train a unigram vocabulary of 200 on 400 texts: "
            "Vocabulary size too high (200). Please set it to a value <= 83.");
  EXPECT_EQ(error_of<std::runtime_error>([&] { Tokenizer::train(texts, options("bpe", 1000), dir.path()); }),
            "[tokenizer] sentencepiece cannot train a bpe vocabulary of 1000 on 400 texts: "
            "Vocabulary size too high (1000). Please set it to a value <= 352.");
  // Fewer pieces than the corpus has characters (26 letters, the space, 6 specials).
  EXPECT_EQ(error_of<std::runtime_error>([&] { Tokenizer::train(texts, options("unigram", 16), dir.path()); }),
            "[tokenizer] sentencepiece cannot train a unigram vocabulary of 16 on 400 texts: "
            "Vocabulary size is smaller than required_chars. 16 vs 33. "
            "Increase vocab_size or decrease character_coverage with --character_coverage option.");
  EXPECT_TRUE(entries(dir.path()).empty());
}

TEST(Tokenizer, AnUnusableCacheDirIsReported) {
  const std::vector<std::string> texts = corpus();
  test::ScratchDir dir;
  const fs::path file = dir / "file";
  write_bytes(file, "x");
  EXPECT_EQ(error_of<std::runtime_error>([&] { Tokenizer::train(texts, kUnigram, file / "cache"); }),
            "[tokenizer] " + (file / "cache").string() + ": cannot create the cache directory: Not a directory");
  EXPECT_EQ(error_of<std::runtime_error>([&] { Tokenizer::train(texts, kUnigram, file); }),
            "[tokenizer] " + file.string() + ": cannot create the cache directory: Not a directory");
}

TEST(Tokenizer, DecodeRefusesAnIdOutsideTheVocabulary) {
  test::ScratchDir dir;
  const Tokenizer tokenizer = Tokenizer::train(corpus(), kUnigram, dir.path());
  EXPECT_EQ(error_of<std::invalid_argument>([&] { tokenizer.decode(std::vector<int32_t>{5, 63, 64}); }),
            "[tokenizer] ids[2] must be in [0, 64), got 64");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { tokenizer.decode(std::vector<int32_t>{-1}); }),
            "[tokenizer] ids[0] must be in [0, 64), got -1");
  EXPECT_EQ(tokenizer.decode(std::vector<int32_t>{}), "");
}

TEST(Tokenizer, TrainingAndLoadingPrintNothingAndKeepTheLogLevel) {
  test::ScratchDir dir;
  const int level = sentencepiece::logging::GetMinLogLevel();
  sentencepiece::logging::SetMinLogLevel(0);  // sentencepiece would log every training step
  ::testing::internal::CaptureStderr();
  ::testing::internal::CaptureStdout();
  const Tokenizer trained = Tokenizer::train(corpus(), kBpe, dir.path());
  Tokenizer::load(trained.model_file());
  EXPECT_THROW(Tokenizer::train(corpus(), options("unigram", 200), dir.path()), std::runtime_error);
  const std::string out = ::testing::internal::GetCapturedStdout();
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(sentencepiece::logging::GetMinLogLevel(), 0);
  sentencepiece::logging::SetMinLogLevel(level);
  EXPECT_EQ(out, "");
  EXPECT_EQ(err, "");
}

}  // namespace
}  // namespace posenc::text
