// estimate_evaluation (trainer.h): what `posenc eval` will cost, from the
// run's config alone, so that the command can refuse or show progress
// before the first batch. Napkin math of the model in models.h.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "posenc/training/tasks.h"
#include "posenc/training/trainer.h"

namespace posenc::nn {

std::vector<int64_t> eval_lengths(const TrainConfig& config, const std::vector<int64_t>& lengths) {
  if (lengths.empty() && Task::parse(config.task, config.task_options).fixed_seq_len() > 0) return {config.seq_len};
  return lengths.empty() ? std::vector<int64_t>{config.seq_len, 2 * config.seq_len, 4 * config.seq_len} : lengths;
}

EvalCost estimate_evaluation(const TrainConfig& config, const std::vector<int64_t>& lengths, int64_t batches) {
  const Task task = Task::parse(config.task, config.task_options);
  const bool decoder = task.model() == ModelKind::kDecoder;
  const auto d = static_cast<double>(config.dim), ffn = 4 * d, vocab = static_cast<double>(task.vocab_size());
  const auto layers = static_cast<double>(config.layers), batch = static_cast<double>(config.batch);
  // A labelled set is evaluated whole, whatever `batches` says.
  if (task.eval_examples() > 0) batches = (task.eval_examples() + config.batch - 1) / config.batch;
  // Decoder and masked LM score tokens over the vocabulary; the other heads are narrow.
  const bool token_head = decoder || task.kind() == TaskKind::kMaskedLm;
  const double head = token_head ? vocab : std::max<int64_t>(2, task.num_classes());
  const double parameters = vocab * d + layers * (4 * d * d + 2 * d * ffn) + d * head;
  EvalCost cost;
  double peak_tokens = 0;
  for (const int64_t length : lengths) {
    const auto t = static_cast<double>(length);
    const double tokens = batch * t;
    // q.k and p.v: d multiply-adds each per (query, visible key) pair, over all heads together.
    const double pairs = decoder ? t * (t + 1) / 2 : t * t;
    const double per_layer = tokens * (4 * d * d + 2 * d * ffn) + batch * 2 * d * pairs;
    cost.multiply_adds += static_cast<double>(batches) * (layers * per_layer + tokens * d * head);
    peak_tokens = std::max(peak_tokens, tokens);
  }
  // Without gradients one layer's activations live at a time: x, its norm, q, k, v, the
  // attention output (6 d per token) and the FFN's hidden units; then the logits.
  const double per_token = std::max(6 * d + ffn, token_head ? vocab : 2.0);
  cost.bytes = 4 * (peak_tokens * per_token + parameters);
  const int64_t longest = lengths.empty() ? 0 : *std::max_element(lengths.begin(), lengths.end());
  cost.largest = "one batch of " + std::to_string(config.batch) + " sequences at seq_len " + std::to_string(longest);
  return cost;
}

}  // namespace posenc::nn
