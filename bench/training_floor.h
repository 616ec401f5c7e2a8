// The part of a training step's floor that is not GEMM flops: the operations
// of the encoder between its GEMMs, timed alone as libtorch runs them.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace posenc::bench {

// Per layer, forward: two layer norms over (tokens, dim), two residual adds,
// GELU over (tokens, ffn); backward: the layer norms' and GELU's gradients,
// the residual branches' sums and the four linear biases' row sums
// (3 dim, dim, ffn, dim wide); then one AdamW step over tensors shaped like
// `parameters`. Fastest of `rounds` after one warm-up, in seconds, on
// libtorch's threads; the tensors stay warm in cache from round to round, so
// this is a lower bound on what these operations cost inside a step.
double between_gemms_seconds(int64_t tokens, int64_t dim, int64_t ffn, int64_t layers,
                             const std::vector<at::Tensor>& parameters, int rounds);

}  // namespace posenc::bench
