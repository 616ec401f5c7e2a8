// A SentencePiece subword tokenizer (Kudo & Richardson 2018,
// arXiv:1808.06226; unigram LM or BPE) for the experiments on real text,
// trained in process from the corpus texts and cached on disk by content, so
// that a rerun with the same corpus and options reuses the same model file.
//
// Every model has the same special ids (kPadId ...), so batching, masking and
// span tasks never look pieces up by name. Training is deterministic for
// given texts and options (one thread, no shuffling, a fixed seed): the cache
// key is a hash of exactly those.
//
// Errors throw std::invalid_argument (bad options, an id out of range) or
// std::runtime_error (files, sentencepiece failures) "[tokenizer] ...", e.g.
//   "[tokenizer] vocab_size must be >= 16, got 3"
//   "[tokenizer] m.model: not a sentencepiece model: ..."
// The sentencepiece headers stay out of this one (pimpl).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace posenc::text {

struct TokenizerOptions {
  int64_t vocab_size = 8000;           // >= 16; a corpus too small for it is an error, not a smaller vocab
  std::string model_type = "unigram";  // "unigram" or "bpe"
  double character_coverage = 1.0;     // (0, 1]: the rarest characters beyond it become <unk>
  uint64_t seed = 0;                   // sentencepiece's random seed, for determinism; < 2^32 - 1
};

// Fixed ids every model has: pad 0, unk 1, bos 2, eos 3, then user-defined
// symbols "<mask>" (4) and "<sep>" (5) used by masked-LM pretraining and span
// tasks. Pad, bos and eos are control symbols: encode never produces them and
// decode drops them.
inline constexpr int32_t kPadId = 0, kUnkId = 1, kBosId = 2, kEosId = 3, kMaskId = 4, kSepId = 5;

class Tokenizer {
 public:
  // Trains on texts (each one document/sentence; newlines inside a text are
  // treated as spaces), or loads the cached model when cache_dir already holds
  // one for the same texts and options. The cache file is
  // cache_dir/"spm-<16 hex digits>.model", the hex a 64-bit FNV-1a hash of
  // (every text with its length, the options, a format version); it is written
  // atomically, never half-written, so concurrent runs at worst train twice.
  // cache_dir is created if missing. Throws on empty texts, bad options, an
  // unwritable cache_dir, or a corpus sentencepiece cannot train on.
  static Tokenizer train(const std::vector<std::string>& texts, const TokenizerOptions& options,
                         const std::filesystem::path& cache_dir);

  // Loads a model file (a serialized sentencepiece ModelProto, as train()
  // writes or spm_train makes); throws "[tokenizer] PATH: ..." if it is missing
  // or is not a model.
  static Tokenizer load(const std::filesystem::path& model_file);

  // Subword ids of text, without bos/eos (the caller frames sequences).
  std::vector<int32_t> encode(std::string_view text) const;
  // Text of ids; throws on an id outside [0, vocab_size()).
  std::string decode(std::span<const int32_t> ids) const;

  int64_t vocab_size() const;
  const std::filesystem::path& model_file() const;  // where the model lives (cache or loaded path)
  bool loaded_from_cache() const;                    // true when train() found the model already cached

 private:
  struct Impl;
  explicit Tokenizer(std::shared_ptr<const Impl> impl);
  // Shared and immutable: copies are cheap and encode/decode are thread-safe.
  std::shared_ptr<const Impl> impl_;
};

}  // namespace posenc::text
