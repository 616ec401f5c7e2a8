// The softmax cross-entropy of rows of logits and, in the same pass, its
// gradient in place: the elementwise part of a vocabulary head fused into
// its loss (posenc/nn/linear_cross_entropy.h), three passes over a row where
// the composed form takes eight tensor ops.
//   row n: m = max_v z_nv,  s = sum_v e^(z_nv - m),  loss_n = m + log s - z_n,t_n
//   gradient (when asked): z_nv <- scale * (e^(z_nv - m) / s - [v = t_n])
// The exponential is the fused attention's (attention_simd.h: Cephes expf,
// 1 ulp); s is summed in float over at most 32 vectors, then in double.
// Rows are independent and the loss is summed in row order, so results do not
// depend on the thread count.
#pragma once

#include <cstdint>

namespace posenc::kernels {

struct CrossEntropyRows {
  double loss_sum = 0;  // sum over rows of loss_n
  int64_t correct = 0;  // rows whose first largest logit is at the target
};

// logits: rows x vocab, row-major and contiguous; targets: rows values in
// [0, vocab). With want_gradient the logits are overwritten by the gradient
// (times gradient_scale); otherwise they are left unchanged. T: float or
// double. Throws std::invalid_argument "[op] vocab must be >= 1, got 0",
// "[op] rows must be >= 0, got -1", "[op] targets must be in [0, 8), got 9 (row 3)".
template <class T>
CrossEntropyRows softmax_cross_entropy_rows(T* logits, int64_t rows, int64_t vocab, const int64_t* targets,
                                            bool want_gradient, T gradient_scale,
                                            const char* op = "softmax_cross_entropy");

}  // namespace posenc::kernels
