#include "posenc/text/tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <limits>
#include <mutex>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>

#include "posenc/error.h"
#include "posenc/io/atomic_file.h"

// Exported by libsentencepiece.so 0.1.97 but declared only in its util.h and
// common.h, which Debian does not install. The trainer's "minloglevel" option
// would set the same level for good; we restore it instead.
namespace sentencepiece {
void SetRandomGeneratorSeed(unsigned int seed);
namespace logging {
int GetMinLogLevel();
void SetMinLogLevel(int v);
}  // namespace logging
}  // namespace sentencepiece

namespace posenc::text {
namespace {

// sentencepiece's message without the source location and the failed check it starts with
// ("./src/trainer_interface.cc(660) [(a) == (b)] Vocabulary size too high (200). ..."): they change from
// one sentencepiece release to the next, and say nothing to a user. An empty rest: "cannot parse it".
std::string sentencepiece_message(const sentencepiece::util::Status& status) {
  std::string_view m = status.message();
  const size_t open = m.find('(');
  const size_t close = m.find(") ");
  const bool located = open != std::string_view::npos && close != std::string_view::npos && open < close &&
                       m.substr(0, open).find(' ') == std::string_view::npos &&
                       m.substr(open + 1, close - open - 1).find_first_not_of("0123456789") == std::string_view::npos;
  if (located) {
    m.remove_prefix(close + 2);
    if (!m.empty() && m.front() == '[') {
      const size_t end = m.find("] ");
      m.remove_prefix(end == std::string_view::npos ? m.size() : end + 2);
    }
  }
  while (!m.empty() && m.back() == ' ') m.remove_suffix(1);
  return m.empty() ? std::string("cannot parse it") : std::string(m);
}


constexpr std::string_view kOp = "tokenizer";
// Part of the cache key: bump it when the training settings below change.
constexpr std::string_view kFormatVersion = "posenc-spm-1";
constexpr int64_t kMaxSentenceLength = int64_t{1} << 16;
// sentencepiece's "no seed, use std::random_device" value; setting it is a no-op there.
constexpr uint64_t kNoSeed = std::numeric_limits<unsigned int>::max();
constexpr int kLogFatal = 3;  // sentencepiece::logging::LOG_FATAL

// sentencepiece's log level and random seed are process-wide: one guard holds
// them for the whole of a training or loading, and puts the level back after.
class SentencepieceSession {
 public:
  SentencepieceSession() : lock_(mutex()), saved_level_(sentencepiece::logging::GetMinLogLevel()) {
    // Only LOG(FATAL) still prints, right before sentencepiece aborts anyway.
    sentencepiece::logging::SetMinLogLevel(kLogFatal);
  }
  ~SentencepieceSession() { sentencepiece::logging::SetMinLogLevel(saved_level_); }
  SentencepieceSession(const SentencepieceSession&) = delete;
  SentencepieceSession& operator=(const SentencepieceSession&) = delete;

 private:
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  std::lock_guard<std::mutex> lock_;
  int saved_level_;
};

// The texts one by one, newlines turned into spaces. The default nmt_nfkc
// normalization folds them too; doing it here keeps the promise whatever the rule.
class TextIterator final : public sentencepiece::SentenceIterator {
 public:
  explicit TextIterator(const std::vector<std::string>& texts) : texts_(texts) { load_current(); }
  bool done() const override { return index_ >= texts_.size(); }
  void Next() override {
    ++index_;
    load_current();
  }
  const std::string& value() const override { return current_; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  void load_current() {
    if (done()) return;
    current_ = texts_[index_];
    std::replace(current_.begin(), current_.end(), '\n', ' ');
    std::replace(current_.begin(), current_.end(), '\r', ' ');
  }
  const std::vector<std::string>& texts_;
  size_t index_ = 0;
  std::string current_;
};

class Fnv1a64 {
 public:
  void add_bytes(std::string_view bytes) {
    for (const char c : bytes) {
      hash_ ^= static_cast<unsigned char>(c);
      hash_ *= 0x100000001b3ull;
    }
  }
  void add(uint64_t value) {  // little-endian, so the key does not depend on the host
    for (int i = 0; i < 8; ++i) {
      const char byte = static_cast<char>((value >> (8 * i)) & 0xff);
      add_bytes(std::string_view(&byte, 1));
    }
  }
  // Length first: ("ab", "c") and ("a", "bc") must not collide.
  void add_string(std::string_view s) {
    add(s.size());
    add_bytes(s);
  }
  uint64_t value() const { return hash_; }

 private:
  uint64_t hash_ = 0xcbf29ce484222325ull;
};

std::string cache_file_name(const std::vector<std::string>& texts, const TokenizerOptions& options) {
  Fnv1a64 h;
  h.add_string(kFormatVersion);
  h.add(texts.size());
  for (const std::string& text : texts) h.add_string(text);
  h.add(static_cast<uint64_t>(options.vocab_size));
  h.add_string(options.model_type);
  h.add(std::bit_cast<uint64_t>(options.character_coverage));
  h.add(options.seed);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string name = "spm-0000000000000000.model";
  const uint64_t v = h.value();
  for (int i = 0; i < 16; ++i) name[4 + i] = kHex[(v >> (60 - 4 * i)) & 0xf];
  return name;
}

void validate(const std::vector<std::string>& texts, const TokenizerOptions& options,
              const std::filesystem::path& cache_dir) {
  require(!texts.empty(), kOp, "texts must not be empty, got 0 texts");
  // sentencepiece would fail with a bare "[!sentences_.empty()]".
  const auto blank = [](const std::string& text) {
    return text.find_first_not_of(" \t\n\r") == std::string::npos;
  };
  require(!std::all_of(texts.begin(), texts.end(), blank), kOp,
          "texts must not all be blank, got ", texts.size(), " blank texts");
  require(options.vocab_size >= 16, kOp, "vocab_size must be >= 16, got ", options.vocab_size);
  require(options.vocab_size <= std::numeric_limits<int32_t>::max(), kOp, "vocab_size must be <= ",
          std::numeric_limits<int32_t>::max(), ", got ", options.vocab_size);
  require(options.model_type == "unigram" || options.model_type == "bpe", kOp,
          "model_type must be \"unigram\" or \"bpe\", got \"", options.model_type, "\"");
  // Written so that NaN fails too.
  require(options.character_coverage > 0.0 && options.character_coverage <= 1.0, kOp,
          "character_coverage must be in (0, 1], got ", options.character_coverage);
  require(options.seed < kNoSeed, kOp, "seed must be < ", kNoSeed, " (sentencepiece's 'no seed'), got ",
          options.seed);
  require(!cache_dir.empty(), kOp, "cache_dir must not be empty");
}

std::string shortest_decimal(double x) {
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), x);
  return std::string(buffer, result.ptr);
}

// The serialized ModelProto of a model trained on texts.
std::string train_model(const std::vector<std::string>& texts, const TokenizerOptions& options) {
  size_t longest = 0;
  for (const std::string& text : texts) longest = std::max(longest, text.size());
  require(longest <= static_cast<size_t>(std::numeric_limits<int32_t>::max()), kOp,
          "every text must be shorter than 2 GiB, got one of ", longest, " bytes");
  // sentencepiece silently skips a sentence longer than this: make it fit them all.
  const int64_t max_sentence_length = std::max(kMaxSentenceLength, static_cast<int64_t>(longest));
  const std::unordered_map<std::string, std::string> spec = {
      {"model_type", options.model_type},
      {"vocab_size", std::to_string(options.vocab_size)},
      {"character_coverage", shortest_decimal(options.character_coverage)},
      {"pad_id", std::to_string(kPadId)},
      {"unk_id", std::to_string(kUnkId)},
      {"bos_id", std::to_string(kBosId)},
      {"eos_id", std::to_string(kEosId)},
      {"user_defined_symbols", "<mask>,<sep>"},  // ids 4 and 5, in this order
      {"input_sentence_size", "0"},              // all of them, no sampling
      {"shuffle_input_sentence", "false"},
      {"num_threads", "1"},  // the EM statistics are summed in thread order otherwise
      {"max_sentence_length", std::to_string(max_sentence_length)},
      {"hard_vocab_limit", "true"},
  };
  TextIterator iterator(texts);
  std::string model;
  sentencepiece::util::Status status;
  {
    SentencepieceSession session;
    sentencepiece::SetRandomGeneratorSeed(static_cast<unsigned int>(options.seed));
    status = sentencepiece::SentencePieceTrainer::Train(spec, &iterator, &model);
  }
  if (!status.ok()) {
    fail_runtime(kOp, "sentencepiece cannot train a ", options.model_type, " vocabulary of ", options.vocab_size,
                 " on ", texts.size(), " texts: ", sentencepiece_message(status));
  }
  return model;
}

}  // namespace

struct Tokenizer::Impl {
  sentencepiece::SentencePieceProcessor processor;
  std::filesystem::path model_file;
  bool loaded_from_cache = false;
};

namespace {

// Loads the serialized model read from `path` and checks posenc's fixed ids.
void load_model(sentencepiece::SentencePieceProcessor& processor, const std::string& path,
                const std::string& model) {
  {
    SentencepieceSession session;
    const sentencepiece::util::Status status = processor.LoadFromSerializedProto(model);
    if (!status.ok()) fail_runtime(kOp, path, ": not a sentencepiece model: ", sentencepiece_message(status));
  }
  const auto check_id = [&](std::string_view what, int id, int32_t expected) {
    if (id != expected) {
      fail_runtime(kOp, path, ": ", what, " must be ", expected, " (posenc's fixed special ids), got ", id);
    }
  };
  check_id("pad id", processor.pad_id(), kPadId);
  check_id("unk id", processor.unk_id(), kUnkId);
  check_id("bos id", processor.bos_id(), kBosId);
  check_id("eos id", processor.eos_id(), kEosId);
  // PieceToId answers the unk id for a piece the model lacks.
  check_id("id of \"<mask>\"", processor.PieceToId("<mask>"), kMaskId);
  check_id("id of \"<sep>\"", processor.PieceToId("<sep>"), kSepId);
}

}  // namespace

Tokenizer::Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

Tokenizer Tokenizer::train(const std::vector<std::string>& texts, const TokenizerOptions& options,
                           const std::filesystem::path& cache_dir) {
  validate(texts, options, cache_dir);
  std::error_code error;
  std::filesystem::create_directories(cache_dir, error);
  // Also an error (ENOTDIR) when cache_dir is an existing file.
  if (error) fail_runtime(kOp, cache_dir.string(), ": cannot create the cache directory: ", error.message());

  auto impl = std::make_shared<Impl>();
  impl->model_file = cache_dir / cache_file_name(texts, options);
  const std::string path = impl->model_file.string();
  std::string model;
  if (std::filesystem::exists(impl->model_file)) {
    model = io::read_regular_file(kOp, path);
    impl->loaded_from_cache = true;
  } else {
    model = train_model(texts, options);
    io::write_file_atomically(kOp, path, model);
  }
  load_model(impl->processor, path, model);
  return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::load(const std::filesystem::path& model_file) {
  auto impl = std::make_shared<Impl>();
  impl->model_file = model_file;
  const std::string path = model_file.string();
  load_model(impl->processor, path, io::read_regular_file(kOp, path));
  return Tokenizer(std::move(impl));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<int> ids;
  const sentencepiece::util::Status status = impl_->processor.Encode(text, &ids);
  if (!status.ok()) fail_runtime(kOp, "sentencepiece cannot encode the text: ", sentencepiece_message(status));
  return std::vector<int32_t>(ids.begin(), ids.end());
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  const int64_t n = vocab_size();
  for (size_t i = 0; i < ids.size(); ++i) {
    require(ids[i] >= 0 && ids[i] < n, kOp, "ids[", i, "] must be in [0, ", n, "), got ", ids[i]);
  }
  std::string text;
  const sentencepiece::util::Status status = impl_->processor.Decode(std::vector<int>(ids.begin(), ids.end()), &text);
  if (!status.ok()) fail_runtime(kOp, "sentencepiece cannot decode the ids: ", sentencepiece_message(status));
  return text;
}

int64_t Tokenizer::vocab_size() const { return impl_->processor.GetPieceSize(); }

const std::filesystem::path& Tokenizer::model_file() const { return impl_->model_file; }

bool Tokenizer::loaded_from_cache() const { return impl_->loaded_from_cache; }

}  // namespace posenc::text
