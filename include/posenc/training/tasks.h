// Synthetic tasks for the training experiments, generated from a seed (no
// files). Batch n of a run is a pure function of (task, options, seed, stream,
// n, batch size, seq_len): every row draws from its own counter-based
// generator (splitmix64 of seed, stream, batch index and row), never torch's,
// so the data cursor of a run is just the batch index and any length can be
// generated for evaluation.
//
//   order     encoder, classification. [CLS] at 0, filler tokens, markers A and
//             B at two distinct random positions; label 1 if A comes before B.
//   span      encoder, extraction (SQuAD-like). [CLS] at 0, fillers, a query
//             token at q followed by L in 1..max_span answer tokens (drawn like
//             the fillers) and a terminator; targets start = q+1, end = q+L.
//   lookback  decoder, causal LM. x[i] = x[i-k] for i >= k (k = lookback): the
//             next token is the one k positions back, a purely relative rule.
//             Scored where the target position is >= k.
//   copy      decoder. With h = (T+1)/2 over the T+1 generated tokens,
//             x[i] = x[i-h] for i >= h: the second half repeats the first.
//             Scored on the second half (target position >= h).
//   text      decoder, causal LM on real text: windows of T + 1 consecutive
//             token ids at a random start of a split written by `posenc corpus
//             --out DIR` (DIR/{train,validation,test}.ids.npy, corpus.json);
//             training reads the train split, evaluation eval_split. Every
//             position is scored; loss is the mean cross-entropy (perplexity
//             exp(loss)).
//   mlm       encoder, masked language modelling (Devlin et al. 2019) on the
//             same data: a row is [CLS] (bos, id 2) and T-1 consecutive ids;
//             each later position is chosen with probability 0.15 (at least
//             one per row), a chosen token becomes <mask> (id 4) 80 % of the
//             time, a random piece (ids 6..V-1) 10 %, itself 10 %; scored at
//             the chosen positions (loss: cross-entropy; perplexity exp(loss)).
//   text-classify, text-span
//             encoder, fine-tuning on a labelled set that posenc corpus --out
//             writes (DIR/tasks/NAME: {split}.tokens.npy [N, T] rows padded
//             with 0, {split}.labels.npy [N] classes or [N, 2] inclusive
//             spans, task.json). Training samples rows uniformly (with
//             replacement) per batch; evaluation reads the eval split's rows
//             in order, each exactly once (eval_examples()).
// Synthetic encoder rows have a random length n in [max(ceil(T/2), minimum), T] and are
// padded with token 0 (key_padding_mask true there). Decoder rows generate T+1
// tokens: tokens = x[0..T), labels = x[1..T].
// Accuracy: order and text-classify, the class; span and text-span, start
// AND end both right; lookback, copy and text, the next token at the scored
// positions; mlm, the masked token.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace posenc::nn {

enum class TaskKind { kOrder, kSpan, kLookback, kCopy, kText, kMaskedLm, kTextClassify, kTextSpan };
enum class ModelKind { kEncoder, kDecoder };
// Training and evaluation draw from different streams of the same seed.
enum class DataStream : uint64_t { kTrain = 0, kEval = 1 };

struct TaskOptions {
  int64_t vocab_size = 32;  // every token id lies in [0, vocab_size); text: 0 takes the data's
  int64_t lookback = 3;     // lookback: k >= 1
  int64_t max_span = 4;     // span: answer lengths 1..max_span
  std::string data = {};                   // text, mlm: the directory of posenc corpus --out;
                                           // text-classify, text-span: its tasks/NAME directory
  std::string eval_split = "validation";   // text: the split evaluation reads, "validation" or "test"
  // text-classify, text-span: evaluate an evenly spread sample of this many rows of the eval split
  // (row floor(k N / n) for k < n), not all N; 0: every row. Not part of a run's training.
  int64_t eval_rows = 0;
};

// The vocabulary of a text data directory (its corpus.json); throws as Task does.
int64_t text_data_vocab_size(const std::string& data_dir);

// The fixed ids of posenc::text::Tokenizer that the text tasks rely on.
inline constexpr int64_t kTextPadId = 0, kTextClsId = 2, kTextMaskId = 4, kTextFirstPiece = 6;

// Token ids of the encoder tasks; fillers are kFirstFiller .. vocab_size-1.
// The decoder tasks use every id in [0, vocab_size) as a symbol.
inline constexpr int64_t kPadToken = 0;
inline constexpr int64_t kClsToken = 1;
inline constexpr int64_t kMarkerA = 2;
inline constexpr int64_t kMarkerB = 3;
inline constexpr int64_t kQueryToken = 4;
inline constexpr int64_t kTerminatorToken = 5;
inline constexpr int64_t kFirstFiller = 6;

// One batch of B rows of length T.
struct Batch {
  at::Tensor tokens;            // (B, T) int64
  at::Tensor key_padding_mask;  // (B, T) bool, true = padding (encoder tasks); undefined for decoder tasks
  at::Tensor labels;            // order (B) int64 in {0, 1}; span (B, 2) start, end; decoder (B, T) next tokens
  at::Tensor loss_mask;         // decoder (B, T) bool, true where scored; undefined otherwise

  // Rows [begin, begin + count) of every tensor (views).
  Batch rows(int64_t begin, int64_t count) const;
};

// Loss (a differentiable scalar, mean over the scored items) and the count of
// right answers among `count` scored items (examples or tokens).
struct TaskScore {
  at::Tensor loss;
  int64_t correct = 0;
  int64_t count = 0;
};

class Task {
 public:
  // Throws std::invalid_argument "[task] vocab_size must be >= 8 for 'order', got 4" (span likewise;
  // decoder tasks need >= 2), "[task] lookback must be >= 1, got 0", "[task] max_span must be >= 1, got 0".
  Task(TaskKind kind, TaskOptions options = {});
  // "[task] unknown task 'foo'; known: order, span, lookback, copy, text, mlm, text-classify, text-span"
  static Task parse(std::string_view name, TaskOptions options = {});
  static const std::vector<std::string>& names();

  TaskKind kind() const noexcept { return kind_; }
  std::string_view name() const noexcept;
  ModelKind model() const noexcept;
  std::string_view metric() const noexcept;  // what accuracy means, one line
  int64_t vocab_size() const noexcept { return options_.vocab_size; }
  const TaskOptions& options() const noexcept { return options_; }
  // The shortest seq_len a row can be built at: order 3, span max_span + 3, lookback k + 1, copy 2, text 1.
  int64_t min_seq_len() const noexcept;
  // The row width of a labelled set (text-classify, text-span: seq_len must equal it); 0 for the others.
  int64_t fixed_seq_len() const noexcept;
  // Classes of the classification head: order 2, text-classify the set's; 0 for the others.
  int64_t num_classes() const noexcept;
  const std::vector<std::string>& class_names() const;  // text-classify; empty otherwise
  // Rows of the eval split of a labelled set that evaluation covers, each once, in
  // order: batch i of DataStream::kEval holds rows [i B, min(n, (i+1) B)) of the
  // split, or of its eval_rows sample; 0 for generated data.
  int64_t eval_examples() const noexcept;

  // Throws "[task] seq_len must be >= 7 for 'span', got 4" and "[task] batch_size must be >= 1, got 0".
  Batch batch(uint64_t seed, DataStream stream, int64_t index, int64_t batch_size, int64_t seq_len) const;

  // Scores the model's outputs for `batch` (shapes as in models.h):
  // order, text-classify: logits (B, num_classes()); span, text-span: start and end logits (B, T)
  // each; decoder and mlm: logits (B, T, vocab).
  TaskScore score_classification(const at::Tensor& logits, const Batch& batch) const;
  TaskScore score_span(const at::Tensor& start_logits, const at::Tensor& end_logits, const Batch& batch) const;
  TaskScore score_language_model(const at::Tensor& logits, const Batch& batch) const;
  // The flattened (B * T) indices of the positions a language-model loss scores (batch.loss_mask), in order.
  static at::Tensor scored_rows(const Batch& batch);
  // As score_language_model, from the logits at scored_rows(batch) only: (rows, vocab). Masked-LM pretraining
  // scores 15 % of the positions, and the vocabulary head is most of a small model's cost.
  TaskScore score_scored_rows(const at::Tensor& logits, const Batch& batch) const;
  // As score_scored_rows, from the hidden states (B, T, D) (read at scored_rows(batch)) and the head that would
  // make their logits (weight (vocab, D), bias (vocab) or undefined), fused with the loss
  // (posenc/nn/linear_cross_entropy.h): the language-model and masked-LM tasks train and evaluate this way.
  TaskScore score_head(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& bias,
                       const Batch& batch) const;

 private:
  Batch text_batch(uint64_t seed, DataStream stream, int64_t index, int64_t batch_size, int64_t seq_len) const;
  Batch masked_batch(uint64_t seed, DataStream stream, int64_t index, int64_t batch_size, int64_t seq_len) const;
  Batch labelled_batch(uint64_t seed, DataStream stream, int64_t index, int64_t batch_size, int64_t seq_len) const;
  friend int64_t text_data_vocab_size(const std::string& data_dir);

  struct TextData;
  struct LabelledData;
  std::shared_ptr<const LabelledData> labelled_;  // text-classify, text-span
  TaskKind kind_;
  TaskOptions options_;
  std::shared_ptr<const TextData> text_;  // text: the loaded splits, shared by every copy
};

}  // namespace posenc::nn
