// Identical-word probing (analysis/identical_word.h) and its op.
//
// Inputs: for each of `words` word ids w, the sequence (w, w, ..., w) of
// length T, every position the same ordinary token. For an encoder task no
// [CLS] is put in front although the model was trained with one at 0: a
// [CLS] would be a second kind of token that attention tells apart by
// content, so position 0 would stand out even in a model without positions;
// with identical tokens everywhere, whatever structure the map has comes from
// the positions alone (a model without positional information gives exactly
// uniform rows). Decoder models attend causally: row i spreads over 0..i.
//
// Word ids are spread evenly over the task's ordinary tokens: the fillers
// kFirstFiller..vocab-1 of the encoder tasks (markers, query, terminator,
// [CLS] and padding skipped), every id of the decoder tasks; all of them when
// `words` exceeds their number.
#include "posenc/analysis/identical_word.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/library.h>
#include <torch/utils.h>

#include <algorithm>
#include <cstdint>

#include "op_support.h"
#include "posenc/error.h"
#include "posenc/training/tasks.h"
#include "posenc/training/trainer.h"

namespace posenc::analysis {
namespace {

constexpr const char* kOp = "identical word";
// Attention weights held at once: B x H x T x T float32 values.
constexpr int64_t kMaxWeightBytes = int64_t{64} << 20;

struct OrdinaryTokens {
  int64_t first = 0;
  int64_t count = 0;
};

OrdinaryTokens ordinary_tokens(const nn::Task& task) {
  if (task.model() == nn::ModelKind::kEncoder) return {nn::kFirstFiller, task.vocab_size() - nn::kFirstFiller};
  return {0, task.vocab_size()};
}

}  // namespace

IdenticalWordResult identical_word_attention(const std::filesystem::path& run_dir,
                                             const IdenticalWordOptions& options) {
  require(options.length >= 0, kOp, "length must be >= 1, got ", options.length);
  require(options.words >= 1, kOp, "words must be >= 1, got ", options.words);
  nn::LoadedRun run;
  nn::TaskModel model = nn::load_task_model(run_dir, &run);
  const OrdinaryTokens ordinary = ordinary_tokens(model.task());
  // The default 64 exceeds the 26 fillers of a default `order` run: every ordinary token is then used once.
  const int64_t words = std::min(options.words, ordinary.count);
  const int64_t length = options.length == 0 ? run.config.seq_len : options.length;

  IdenticalWordResult result;
  result.model.encoding = run.config.encoding;
  result.model.task = run.config.task;
  result.model.step = run.step;
  result.model.seq_len = run.config.seq_len;
  result.model.checkpoint = run.checkpoint;
  result.words = words;

  // Word ids spread evenly: first + floor(k * count / words), k = 0 .. words-1 (distinct as words <= count).
  at::Tensor ids = at::empty({words}, at::kLong);
  for (int64_t k = 0; k < words; ++k) ids.data_ptr<int64_t>()[k] = ordinary.first + k * ordinary.count / words;
  const int64_t per_word = run.config.heads * length * length * 4;
  const int64_t chunk = std::clamp<int64_t>(kMaxWeightBytes / std::max<int64_t>(per_word, 1), 1, words);

  torch::NoGradGuard no_grad;
  at::Tensor sum = at::zeros({length, length}, at::kDouble);
  int64_t heads = 0;
  for (int64_t begin = 0; begin < words; begin += chunk) {
    const int64_t n = std::min(chunk, words - begin);
    const at::Tensor tokens = ids.narrow(0, begin, n).unsqueeze(1).expand({n, length}).contiguous();
    const at::Tensor weights = model.first_layer_attention(tokens);  // (n, H, T, T)
    heads = weights.size(1);
    sum += weights.to(at::kDouble).sum(at::IntArrayRef{0, 1});
  }
  result.attention = Matrix(length, length);
  const at::Tensor mean = (sum / static_cast<double>(words * heads)).contiguous();
  std::copy(mean.data_ptr<double>(), mean.data_ptr<double>() + mean.numel(), result.attention.values.begin());
  return result;
}

}  // namespace posenc::analysis

namespace posenc::analysis_torch {
namespace {

at::Tensor identical_word_attention(c10::string_view run_dir, int64_t length, int64_t words) {
  return translate_errors([&] {
    analysis::IdenticalWordOptions options;
    options.length = length;
    options.words = words;
    return tensor_of(analysis::identical_word_attention(std::string(to_std(run_dir)), options).attention);
  });
}

}  // namespace

TORCH_LIBRARY_IMPL(posenc, CompositeExplicitAutograd, m) { m.impl("identical_word_attention", identical_word_attention); }

}  // namespace posenc::analysis_torch
