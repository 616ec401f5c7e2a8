// Multi-head attention into which any encoding plugs, through the points of
// DESIGN.md section 2 only: the query/key transform (a RotaryEmbedding), a
// logit bias (an AttentionBias) and relative vectors (a RelativeEncoding).
// The input point (an InputEncoding) is the model's, before the first layer.
// The layer never names a family: each encoding writes its AttentionTerms
// (posenc/nn/attention_ops.h) and the layer passes them to ops::attention.
//
//   x (B, T, D) -> (B, T, D); cross: query (B, Tq, D), memory (B, Tk, D)
//   q = x W_q, k = m W_k, v = m W_v split into H heads of Dh = D / H, then
//   rotary(q, k) at positions Tk-Tq .. Tk-1 (queries) and 0 .. Tk-1 (keys),
//   attention with the terms, heads merged, out = o W_o.
// Paths (options.path): by default the fused streaming kernel, forward and
// backward, and the composed differentiable path when dropout on the weights
// is on (training()) or weights are asked for with a gradient.
#pragma once

#include <ATen/ATen.h>
#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <optional>
#include <ostream>
#include <tuple>

#include "posenc/nn/attention_biases.h"
#include "posenc/nn/attention_ops.h"
#include "posenc/nn/relative_encodings.h"
#include "posenc/nn/rotary_embedding.h"

namespace posenc::nn {

// What plugs into one attention layer; any may be null.
struct AttentionEncodings {
  RotaryEmbedding rotary{nullptr};
  AttentionBias bias{nullptr};
  RelativeEncoding relative{nullptr};
};

struct MultiheadAttentionOptions {
  MultiheadAttentionOptions(int64_t dim, int64_t num_heads) : dim_(dim), num_heads_(num_heads) {}
  TORCH_ARG(int64_t, dim);        // D, divisible by num_heads
  TORCH_ARG(int64_t, num_heads);  // H
  TORCH_ARG(double, dropout) = 0.0;  // on the attention weights, in training() only
  TORCH_ARG(bool, bias) = true;      // biases of the four projections
  TORCH_ARG(bool, causal) = false;   // key j hidden from query i when j > i + Tk - Tq
  TORCH_ARG(AttentionPath, path) = AttentionPath::kAuto;  // ops::attention's choice, or one forced
};

class MultiheadAttentionImpl : public torch::nn::Module {
 public:
  // Throws c10::ValueError "[MultiheadAttention] dim must be divisible by num_heads, got dim 10 and num_heads 4",
  // "[MultiheadAttention] rotary head_dim must be 16 (dim / num_heads), got 8", "... relative head_dim ...",
  // "[MultiheadAttention] bias must have num_heads = 4 heads, got 8" (likewise relative when not shared).
  MultiheadAttentionImpl(const MultiheadAttentionOptions& options, AttentionEncodings encodings = {});

  void reset_parameters();
  // Self-attention. key_padding_mask (B, T) bool, true = padding. positions
  // (T) int64, increasing: the rotary encoding's positions (undefined: 0..T-1;
  // randomized positions, Ruoss et al. 2023, pass a sorted random subset).
  at::Tensor forward(const at::Tensor& x, const at::Tensor& key_padding_mask = {}, const at::Tensor& positions = {});
  // Cross / cached attention with the weights on request: (out (B, Tq, D), weights (B, H, Tq, Tk) or undefined).
  // positions (Tk) are the keys'; the queries take the last Tq of them.
  std::tuple<at::Tensor, at::Tensor> attend(const at::Tensor& query, const at::Tensor& memory,
                                            const at::Tensor& key_padding_mask = {}, bool return_weights = false,
                                            const at::Tensor& positions = {});
  void pretty_print(std::ostream& stream) const override;

  const MultiheadAttentionOptions& options() const noexcept { return options_; }
  const AttentionEncodings& encodings() const noexcept { return encodings_; }
  int64_t head_dim() const noexcept { return options_.dim() / options_.num_heads(); }
  // Submodules "q_proj", "k_proj", "v_proj", "out_proj" (torch::nn::Linear D -> D) and the
  // encodings as "rotary", "bias", "relative" when present.
  torch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, out_proj{nullptr};

 private:
  MultiheadAttentionOptions options_;
  AttentionEncodings encodings_;
};

TORCH_MODULE(MultiheadAttention);

}  // namespace posenc::nn
