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
//            + offset_bias[h, j - i' + Tk - 1] + grid_bias + bias + fire(i', j) + cope(q, k)_ij,  masks -> -inf
//   out    = softmax(logits) @ v + sum_j p_ij rel_v[clip(j - i', -K, K) + K]
// (+ scale * k_j . rel_q[..] in the logits; rel_k and rel_q rows through rel_index when given.)
// A row whose keys are all masked gives zeros (not NaN), on both paths.
// Inputs float32 / float64 / bfloat16 / float16 (all the same dtype); the math
// runs in float32 (float64 for float64) and the result is rounded once.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <string_view>
#include <tuple>

namespace posenc::nn {

// FIRE's parameters (posenc/kernels/fire.h, posenc/nn/fire_bias.h): a logit
// bias that depends on the query position as well as the offset, computed per
// tile by the fused kernel (no (Tq, Tk) tensor) and densely by the composed
// path; it needs causal attention. Undefined w1: absent.
struct FireTerm {
  at::Tensor w1, b1;    // [hidden]: the 1 -> hidden layer
  at::Tensor w2;        // [H, hidden]
  at::Tensor b2;        // [H]
  at::Tensor c;         // 0-d, > 0
  at::Tensor threshold; // 0-d L, > 0
  bool defined() const noexcept { return w1.defined(); }
};

// CoPE's table (posenc/kernels/cope.h, posenc/nn/cope_bias.h): a logit term
// counted by the content, b_ij = interpolation of q_i . e at the contextual
// position p_ij = sum_{t=j}^{i'} sigmoid(scale q_i . k_t) (clamped to
// npos - 1); the attention computes it from q and k, per query row in the
// fused kernel (no (Tq, Tk) tensor), densely (ops::cope_bias) in the composed
// path; it needs causal attention. Undefined e: absent.
struct CopeTerm {
  at::Tensor e;  // [npos, Dh], shared by the heads (the authors' pos_emb transposed)
  bool defined() const noexcept { return e.defined(); }
};

// The terms an encoding contributes inside attention, by point of DESIGN.md
// section 2 (the attention layer collects them from its encodings without
// knowing the families). Undefined tensors are absent terms.
struct AttentionTerms {
  // ---- logit bias
  at::Tensor offset_bias;  // [H, Tq + Tk - 1], element d + Tk - 1 for offset d = j - i' in [-(Tk-1), Tq-1] (ALiBi, T5)
  at::Tensor grid_bias;    // [H, 2*grid_height - 1, 2*grid_width - 1] by (dy, dx) (2D ALiBi, 2D T5)
  at::Tensor bias;         // dense, broadcastable to (B, H, Tq, Tk): [H, Tq, Tk] or (B, H, Tq, Tk)
  bool causal = false;     // a family may ask for the causal mask (e.g. causal ALiBi)
  FireTerm fire;           // computed per tile (FIRE); needs causal
  CopeTerm cope;           // from q and k per query row (CoPE); needs causal
  // ---- relative vectors
  at::Tensor rel_k;             // [2K+1, Dh] or [H, 2K+1, Dh]
  at::Tensor rel_v;             // [2K+1, Dv] or [H, 2K+1, Dv]
  at::Tensor rel_q;             // [2K+1, Dh] or [H, 2K+1, Dh]: k_j . rel_q[row(d)] added like rel_k (DeBERTa's p2c)
  at::Tensor rel_index;         // int64 [2K+1]: the row of rel_k / rel_q for clip(d, -K, K) + K (then the tables
                                // have any row count; rel_v must be absent). Undefined: that row itself
  int64_t max_distance = 0;     // K
  at::Tensor content_shift;     // u [H, Dh]: (q + u) . k (Transformer-XL)
  at::Tensor relative_shift;    // w [H, Dh]: (q + w) . rel_k (Transformer-XL's v)
  at::Tensor grid_h, grid_w;    // 2D relative: [2*grid_height-1, Dh] / [2*grid_width-1, Dh] (or [H, ., Dh])
  int64_t grid_height = 0, grid_width = 0;
  // ---- the layer's scale: 1/sqrt(Dh * scale_factor) (DeBERTa: 1 + its number of position terms)
  double scale_factor = 1.0;
};

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

// Offset-bias rows for the terms above, [H, q_len + k_len - 1] (element d + k_len - 1 for d = j - i' in [-(k_len-1), q_len-1]):
// ALiBi -m_h |d| from slopes [H] (differentiable wrt slopes); T5 table[bucket(d), h] from
// table [num_buckets, H] (differentiable wrt table).
at::Tensor alibi_offset_bias(const at::Tensor& slopes, int64_t q_len, int64_t k_len);
at::Tensor t5_offset_bias(const at::Tensor& table, int64_t q_len, int64_t k_len, bool bidirectional = true,
                          int64_t max_distance = 128);

}  // namespace ops
}  // namespace posenc::nn
