// Attention with positional terms from C++ (torch.ops.posenc.attention*,
// docs/attention.md). One function, two paths that agree:
//   * fused (posenc/kernels/attention.h, attention_backward.h): streaming
//     softmax over key tiles, every term applied on the fly, forward and
//     backward (FlashAttention-2 style: the probabilities recomputed per tile
//     from the saved row log-sum-exp), no (Tq, Tk) buffer unless the weights
//     are asked for; the default;
//   * composed: the same formula from differentiable ops (matmul,
//     relative_logits / relative_values, index, softmax), taken for dropout
//     and for weights that need a gradient, and differentiable twice.
// Shapes: q (B, H, Tq, Dh), k (B, H, Tk, Dh), v (B, H, Tk, Dv) -> out (B, H, Tq, Dv)
// [and weights (B, H, Tq, Tk)]. Query i sits at key position i + Tk - Tq.
//   logits = scale * ((q + u) . k + (q + w) . rel_k[clip(j - i', -K, K) + K] + 2D relative)
//            + offset_bias[h, j - i' + Tk - 1] + grid_bias + bias + tile(b, h, i', j),  masks -> -inf
//   out    = softmax(logits) @ v + sum_j p_ij rel_v[clip(j - i', -K, K) + K]
// (+ scale * k_j . rel_q[..] in the logits; rel_k and rel_q rows through rel_index when given;
// tile: a kind registered by its family, FIRE's MLP of the offset, CoPE's contextual positions.)
// A row whose keys are all masked gives zeros (not NaN), on both paths.
// Inputs float32 / float64 / bfloat16 / float16 (all the same dtype); the math
// runs in float32 (float64 for float64) and the result is rounded once.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <string_view>
#include <tuple>

#include "posenc/nn/attention_terms.h"

namespace posenc::nn {

// Which implementation computes the attention (see above).
enum class AttentionPath { kAuto, kFused, kComposed };

// "auto" | "fused" | "composed"; throws c10::ValueError
// "[OP] path must be 'auto', 'composed' or 'fused', got 'x'".
AttentionPath parse_attention_path(std::string_view name, std::string_view op = "attention");
const char* attention_path_name(AttentionPath path) noexcept;

struct AttentionCall {
  bool causal = false;
  std::optional<at::Tensor> key_padding_mask;  // (B, Tk) bool, true = padding (ignored)
  std::optional<double> scale;                 // unset: 1/sqrt(Dh)
  bool return_weights = false;
  double dropout = 0.0;  // on the weights, in [0, 1); > 0 takes the composed path
  // kAuto: fused, composed for dropout or weights that need a gradient. kFused
  // refuses dropout ("[attention] dropout needs the composed path, got path 'fused'").
  AttentionPath path = AttentionPath::kAuto;
};

namespace ops {

// Returns (out, weights); weights is an undefined tensor unless call.return_weights.
// Takes call.path; kAuto picks the fused path unless dropout or weights with a gradient need the composed one.
std::tuple<at::Tensor, at::Tensor> attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                             const AttentionTerms& terms, const AttentionCall& call = {});
// The composed (differentiable) path, always.
std::tuple<at::Tensor, at::Tensor> attention_composed(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                      const AttentionTerms& terms, const AttentionCall& call = {});
// The fused path, always (its weights carry no gradient; no double backward).
std::tuple<at::Tensor, at::Tensor> attention_fused(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                   const AttentionTerms& terms, const AttentionCall& call = {});

}  // namespace ops
}  // namespace posenc::nn
