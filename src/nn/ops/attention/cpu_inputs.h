// Private: the inputs of the fused attention kernels (kernels/attention.h,
// attention_backward.h) made from posenc::nn::AttentionTerms once, for the
// forward op (attention.cpp) and the autograd function's backward
// (attention_backward.cpp). Everything is in the compute dtype (float32,
// float64 for float64); q, k, v and a dense bias keep their strides when the
// last dimension has unit stride (a transposed (B, T, H, D) projection needs
// no copy); the small tables are contiguous.
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "posenc/kernels/attention.h"
#include "posenc/kernels/batched_matrix.h"
#include "posenc/nn/tile_kind.h"
#include "posenc/nn/attention_ops.h"

namespace posenc::nn::detail {

struct FusedInputs {
  at::ScalarType compute = at::kFloat;
  at::Tensor q, k, v;
  at::Tensor rel_k, rel_v, grid_h, grid_w;  // shared tables repeated per head when their pair partner is per head
  bool rel_k_repeated = false, rel_v_repeated = false, grid_h_repeated = false, grid_w_repeated = false;
  at::Tensor content_shift, relative_shift, offset_bias, grid_bias;
  at::Tensor bias;     // (B, H, Tq, Tk) strides (broadcast dimensions stride 0)
  std::vector<int64_t> bias_sizes;  // the bias as given (its gradient's shape)
  at::Tensor padding;  // (B, Tk) bytes, non-zero = padding
  at::Tensor rel_q, rel_index;  // rel_q as rel_k (repeated alike); rel_index int64 contiguous
  bool rel_q_repeated = false;
  int64_t rel_rows = 0;         // rows of rel_k / rel_q when rel_index is given
  // The tile term (at most one): its kind, its tensors contiguous in the compute dtype, and the
  // kernel's term over them (one per dtype; it may read q and k through the views above).
  const TileKind* tile_kind = nullptr;
  std::vector<at::Tensor> tile_tensors;
  std::shared_ptr<const kernels::TileBias<float>> tile_bias_f;
  std::shared_ptr<const kernels::TileBias<double>> tile_bias_d;
  int64_t max_distance = 0, grid_height = 0, grid_width = 0;
  kernels::AttentionParams params;

  template <class T>
  kernels::AttentionTerms<T> terms() const;
};

// The call of the fused op's arguments (posenc::attention_fused's schema).
AttentionCall fused_call(bool causal, const at::Tensor& key_padding_mask, c10::optional<double> scale,
                         bool return_weights);

// Converts and lays out; the arguments must have passed check_attention.
FusedInputs fused_inputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionTerms& terms,
                         const AttentionCall& call);

template <class T>
kernels::BatchedMatrix<T> matrix_of(const at::Tensor& t) {
  using U = std::remove_const_t<T>;
  return {t.data_ptr<U>(), t.size(0), t.size(1), t.size(2), t.size(3), t.stride(0), t.stride(1), t.stride(2)};
}

// The forward in the compute dtype: out (B, H, Tq, Dv), weights (B, H, Tq, Tk) when asked
// (else undefined), logsumexp (B, H, Tq) when asked (else undefined).
struct FusedForward {
  at::Tensor out, weights, logsumexp;
};
FusedForward fused_forward(const FusedInputs& in, bool weights, bool logsumexp);

// The gradients of the fused attention's inputs, each in the shape the caller
// gave it (a shared table's gradient summed over the heads, a broadcast
// bias's summed to its shape), in the compute dtype; undefined where not asked.
struct FusedGradients {
  at::Tensor q, k, v;
  AttentionTerms terms;  // by the terms' fields (term_slots reads them in list order)
};

// The backward (kernels/attention_backward.h) from the forward's out and
// logsumexp (compute dtype). `wanted` holds the terms whose gradient is asked
// for (the others undefined), as fused_inputs' terms; want_q/k/v for q, k, v.
FusedGradients fused_backward(const FusedInputs& in, const at::Tensor& out, const at::Tensor& logsumexp,
                              const at::Tensor& grad_out, bool want_q, bool want_k, bool want_v,
                              const AttentionTerms& wanted);

}  // namespace posenc::nn::detail
