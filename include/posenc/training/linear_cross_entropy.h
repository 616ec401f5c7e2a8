// The output head and its cross-entropy in one pass over row chunks:
//   loss = mean_n [ logsumexp_v(z_nv) - z_n,t_n ],   z = hidden · weightᵀ + bias
// without ever holding the (N, V) logits. With V in the thousands (a
// language model's vocabulary) the logits and their gradient are the largest
// tensors of a training step and each elementwise pass over them goes to
// memory; chunk by chunk they stay in cache. When gradients are wanted they
// are computed in the same pass (dz = softmax(z) - onehot(t), over N), and the
// backward only scales them by the incoming gradient.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace posenc::nn {

struct LinearCrossEntropy {
  at::Tensor loss;      // scalar, hidden's dtype; differentiable in hidden, weight and bias
  int64_t correct = 0;  // rows whose argmax_v z_nv (first of equals) is t_n
};

// hidden (N, D), weight (V, D), bias (V) or undefined, targets int64 (N) in
// [0, V); float32 or float64; N >= 1. chunk_rows: rows per chunk, 0 for
// about 4 MB of float32 logits per chunk. Gradients are computed only in grad
// mode for the inputs that require them; a double backward is refused.
// Throws std::invalid_argument naming the argument:
// "[linear_cross_entropy] targets must be in [0, 8000), got 8000".
LinearCrossEntropy linear_cross_entropy(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& bias,
                                        const at::Tensor& targets, int64_t chunk_rows = 0);

}  // namespace posenc::nn
