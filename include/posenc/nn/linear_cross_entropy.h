// The output head and its cross-entropy in one pass over row chunks:
//   loss = mean_n [ logsumexp_v(z_nv) - z_n,t_n ],   z = hidden · weightᵀ + bias
// over the rows whose target is not ignore_index, without ever holding the
// (N, V) logits. With V in the thousands (a language model's vocabulary) the
// logits and their gradient are the largest tensors of a training step and
// each elementwise pass over them goes to memory; chunk by chunk they stay in
// cache. When gradients are wanted they are computed in the same pass
// (dz = softmax(z) - onehot(t), scaled by 1/count for the mean), and the
// backward only scales them by the incoming gradient. Same values as
// cross_entropy(linear(hidden, weight, bias), targets, ignore_index, reduction).
//
// The op is torch.ops.posenc.linear_cross_entropy (Python:
// posenc.nn.functional.linear_cross_entropy).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace posenc::nn {

enum class LossReduction { kMean, kSum };

struct LinearCrossEntropyOptions {
  int64_t ignore_index = -100;  // rows with this target add nothing (PyTorch's default)
  LossReduction reduction = LossReduction::kMean;  // mean over the rows not ignored (NaN when none), or their sum
  int64_t chunk_rows = 0;       // rows per chunk; 0: max(256, 2^20 / V) (4 MB of float32 logits, >= 256 rows)
};

struct LinearCrossEntropy {
  at::Tensor loss;      // scalar, hidden's dtype; differentiable in hidden, weight and bias
  int64_t correct = 0;  // rows not ignored whose argmax_v z_nv (first of equals) is t_n
};

// hidden (..., D), weight (V, D), bias (V) or undefined, targets int64 of
// hidden's leading shape, each in [0, V) or ignore_index; float32 or float64,
// on the CPU. Gradients are computed only in grad mode for the inputs that
// require them; a double backward is refused. Throws c10::ValueError naming
// the argument: "[linear_cross_entropy] targets must be in [0, 8000) or
// ignore_index (-100), got 8000"; V is at most 2^24 ("vocab must be <= 16777216").
LinearCrossEntropy linear_cross_entropy(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& bias,
                                        const at::Tensor& targets, const LinearCrossEntropyOptions& options = {});

}  // namespace posenc::nn
