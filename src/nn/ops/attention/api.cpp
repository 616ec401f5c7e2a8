// Attention with positional terms (posenc/nn/attention_ops.h): the composed
// (differentiable) path, and the choice between it and the fused op
// (ops/attention/cpu_forward.cpp, autograd.cpp, through the dispatcher). The
// checks both paths share are in checks.cpp, the public keyword op
// posenc::attention in keywords.cpp.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/grad_mode.h>
#include <torch/library.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "dispatch.h"
#include "posenc/nn/dropout.h"
#include "op_support.h"
#include "ops/attention/checks.h"
#include "ops/attention/term_spec_object.h"
#include "posenc/nn/tile_kind.h"
#include "posenc/nn/attention_ops.h"
#include "posenc/nn/bias_ops.h"
#include "posenc/nn/relative_ops.h"

namespace posenc::nn {
namespace {

constexpr const char* kOp = "attention";

using detail::scale_of;

// [Tq, Tk] int64: column of offset_bias for (i, j), d + Tk - 1 = j - i + Tq - 1 with d = j - i'.
at::Tensor offset_index(int64_t q_len, int64_t k_len) {
  const at::Tensor i = at::arange(q_len, at::kLong).unsqueeze(1);
  const at::Tensor j = at::arange(k_len, at::kLong).unsqueeze(0);
  return j - i + (q_len - 1);
}

// [HW, HW] int64: flat index of (y_j - y_i + Hg - 1, x_j - x_i + Wg - 1) in a [2Hg-1, 2Wg-1] grid.
at::Tensor grid_index(int64_t height, int64_t width) {
  const at::Tensor cell = at::arange(height * width, at::kLong);
  const at::Tensor y = at::floor_divide(cell, width), x = at::remainder(cell, width);
  const at::Tensor dy = y.unsqueeze(0) - y.unsqueeze(1) + (height - 1);
  const at::Tensor dx = x.unsqueeze(0) - x.unsqueeze(1) + (width - 1);
  return dy * (2 * width - 1) + dx;
}

// Whether any input requires grad under grad mode.
bool needs_grad(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const TermList& list) {
  if (!at::GradMode::is_enabled()) return false;
  if (q.requires_grad() || k.requires_grad() || v.requires_grad()) return true;
  for (const at::Tensor& t : list.tensors) {
    if (t.defined() && t.requires_grad()) return true;
  }
  return false;
}

c10::optional<at::Tensor> opt(const at::Tensor& t) { return t.defined() ? c10::optional<at::Tensor>(t) : c10::nullopt; }

}  // namespace

namespace dispatch {

std::tuple<at::Tensor, at::Tensor> attention_fused(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                   at::TensorList terms, const detail::TermSpecArg& spec,
                                                   bool causal, const c10::optional<at::Tensor>& key_padding_mask,
                                                   c10::optional<double> scale, bool return_weights) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("posenc::attention_fused", "")
                             .typed<decltype(attention_fused)>();
  return op.call(q, k, v, terms, spec, causal, key_padding_mask, scale, return_weights);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> attention_streamed(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, at::TensorList terms, c10::string_view spec,
    bool causal, const c10::optional<at::Tensor>& key_padding_mask, c10::optional<double> scale,
    bool return_weights) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("posenc::attention_streamed", "")
                             .typed<decltype(attention_streamed)>();
  return op.call(q, k, v, terms, spec, causal, key_padding_mask, scale, return_weights);
}

std::vector<at::Tensor> attention_streamed_backward(const at::Tensor& grad_out, const at::Tensor& q,
                                                    const at::Tensor& k, const at::Tensor& v, at::TensorList terms,
                                                    c10::string_view spec, bool causal,
                                                    const c10::optional<at::Tensor>& key_padding_mask, double scale,
                                                    const at::Tensor& out, const at::Tensor& logsumexp,
                                                    const c10::List<bool>& needs) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("posenc::attention_streamed_backward", "")
                             .typed<decltype(attention_streamed_backward)>();
  return op.call(grad_out, q, k, v, terms, spec, causal, key_padding_mask, scale, out, logsumexp, needs);
}

}  // namespace dispatch

AttentionPath parse_attention_path(std::string_view name, std::string_view op) {
  if (name == "auto") return AttentionPath::kAuto;
  if (name == "fused") return AttentionPath::kFused;
  if (name == "composed") return AttentionPath::kComposed;
  TORCH_CHECK_VALUE(false, "[", op, "] path must be 'auto', 'composed' or 'fused', got '", name, "'");
}

const char* attention_path_name(AttentionPath path) noexcept {
  switch (path) {
    case AttentionPath::kFused: return "fused";
    case AttentionPath::kComposed: return "composed";
    case AttentionPath::kAuto: break;
  }
  return "auto";
}

namespace ops {

// q (B, H, Tq, Dh), k (B, H, Tk, Dh), v (B, H, Tk, Dv) -> out (B, H, Tq, Dv), weights (B, H, Tq, Tk)
std::tuple<at::Tensor, at::Tensor> attention_composed(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                      const AttentionTerms& terms, const AttentionCall& call) {
  detail::check_attention(q, k, v, terms, call);
  const int64_t batch = q.size(0), heads = q.size(1), q_len = q.size(2), k_len = k.size(2), head_dim = q.size(3);
  // Every term converted once to the compute dtype; 16-bit results rounded once at the end.
  const at::ScalarType compute = detail::compute_dtype(q.scalar_type());
  const auto in = [compute](const at::Tensor& t) { return t.to(compute); };
  const auto per_head = [&](const at::Tensor& shift) { return in(shift).view({1, heads, 1, head_dim}); };
  const at::Tensor qc = in(q), kc = in(k), vc = in(v);
  const kernels::RelativeParams relative{terms.max_distance, k_len - q_len};

  // (B, H, Tq, Tk): the scaled dot products ...
  const at::Tensor content_q = terms.content_shift.defined() ? qc + per_head(terms.content_shift) : qc;
  at::Tensor logits = at::matmul(content_q, kc.transpose(-1, -2));
  // rel_index: the tables' rows by offset, [.., 2K+1, Dh] (differentiable: index_select).
  const auto by_offset = [&](const at::Tensor& table) {
    return terms.rel_index.defined() ? in(table).index_select(-2, terms.rel_index) : in(table);
  };
  if (terms.rel_k.defined()) {
    const at::Tensor relative_q = terms.relative_shift.defined() ? qc + per_head(terms.relative_shift) : qc;
    logits = logits + ops::relative_logits(relative_q, by_offset(terms.rel_k), relative, k_len);
  }
  if (terms.rel_q.defined() && q_len > 0 && k_len > 0) {
    // k_j . rel_q[clip(j - i') + K]: (B, H, Tk, 2K+1) products gathered per pair (HF's p2c, O(B H Tk K)).
    const at::Tensor products = at::matmul(kc, by_offset(terms.rel_q).transpose(-1, -2));
    const int64_t kd = terms.max_distance;
    const at::Tensor index = (offset_index(q_len, k_len) - (k_len - 1)).clamp(-kd, kd).add(kd).t().contiguous();
    logits = logits + products.gather(-1, index.expand({batch, heads, k_len, q_len})).transpose(-1, -2);
  }
  if (terms.grid_h.defined()) {
    logits = logits + ops::relative_logits_2d(qc, in(terms.grid_h), in(terms.grid_w),
                                              {terms.grid_height, terms.grid_width});
  }
  logits = logits * scale_of(call, head_dim);
  // ... plus the biases, unscaled; O(H*T) rows expanded by index (differentiable).
  if (terms.offset_bias.defined() && q_len > 0 && k_len > 0) {
    const at::Tensor index = offset_index(q_len, k_len).flatten();
    logits = logits + in(terms.offset_bias).index_select(1, index).view({heads, q_len, k_len});
  }
  if (terms.grid_bias.defined()) {
    const at::Tensor index = grid_index(terms.grid_height, terms.grid_width).flatten();
    logits = logits + in(terms.grid_bias).flatten(1).index_select(1, index).view({heads, q_len, k_len});
  }
  if (terms.bias.defined()) logits = logits + in(terms.bias);
  if (q_len > 0 && k_len > 0) {
    // The gates of a term that reads the content see the padding (a padded key counts 0), as the fused term.
    std::optional<at::Tensor> padding;
    if (call.key_padding_mask && call.key_padding_mask->defined()) padding = *call.key_padding_mask;
    for (const TileTerm& tile : terms.tiles) {
      std::vector<at::Tensor> tensors;
      for (const at::Tensor& t : tile.tensors) tensors.push_back(in(t));
      logits = logits + tile_kind(tile.kind).dense(tensors, qc, kc, scale_of(call, head_dim), padding);
    }
  }

  // Masks: (1 | B, 1, Tq, Tk) bool, true = hidden.
  at::Tensor mask;
  if (call.causal || terms.causal) {
    mask = at::ones({q_len, k_len}, at::kBool).triu(k_len - q_len + 1).view({1, 1, q_len, k_len});
  }
  if (call.key_padding_mask && call.key_padding_mask->defined()) {
    const at::Tensor padding = call.key_padding_mask->view({batch, 1, 1, k_len});
    mask = mask.defined() ? at::logical_or(mask, padding) : padding;
  }
  at::Tensor dead;  // rows with every key hidden: probabilities 0, not NaN
  if (mask.defined()) {
    logits = logits.masked_fill(mask, -std::numeric_limits<double>::infinity());
    const at::Tensor all_hidden = mask.all(-1, /*keepdim=*/true);
    if (k_len > 0 && (!detail::holds_data(all_hidden) || all_hidden.any().item<bool>())) {
      dead = all_hidden;
      logits = logits.masked_fill(dead, 0.0);  // finite softmax (and gradient) on those rows
    }
  }
  at::Tensor probs = at::softmax(logits, -1);
  if (dead.defined()) probs = probs.masked_fill(dead, 0.0);
  if (call.dropout > 0) probs = detail::dropout(probs, call.dropout, /*train=*/true);

  at::Tensor out = at::matmul(probs, vc);
  if (terms.rel_v.defined()) out = out + ops::relative_values(probs, in(terms.rel_v), relative);
  return {out.to(q.scalar_type()), call.return_weights ? probs.to(q.scalar_type()) : at::Tensor()};
}

std::tuple<at::Tensor, at::Tensor> attention_fused(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                   const AttentionTerms& terms, const AttentionCall& call) {
  // The op checks everything (it is public as torch.ops.posenc.attention_fused), the gradient refusal included;
  // only a tile term missing a tensor is reported here, by its kind, since the list cannot hold the gap.
  for (const TileTerm& tile : terms.tiles) {
    for (const at::Tensor& t : tile.tensors) {
      if (!t.defined()) tile_kind(tile.kind).check(tile.tensors, q);
    }
  }
  const TermList list = pack_terms(terms);
  auto [out, weights, logsumexp] = dispatch::attention_streamed(
      q, k, v, list.tensors, list.spec.describe(), call.causal || terms.causal,
      call.key_padding_mask ? opt(*call.key_padding_mask) : c10::nullopt,
      call.scale ? c10::optional<double>(*call.scale) : c10::nullopt, call.return_weights);
  return {out, call.return_weights ? weights : at::Tensor()};
}

std::tuple<at::Tensor, at::Tensor> attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                             const AttentionTerms& terms, const AttentionCall& call) {
  switch (call.path) {
    case AttentionPath::kComposed: return attention_composed(q, k, v, terms, call);
    case AttentionPath::kFused:
      TORCH_CHECK_VALUE(call.dropout == 0, "[", kOp, "] dropout needs the composed path, got path 'fused'");
      return attention_fused(q, k, v, terms, call);
    case AttentionPath::kAuto: break;
  }
  // Dropout, and weights that need a gradient, take the composed path; everything else streams.
  const bool weights_grad = call.return_weights && needs_grad(q, k, v, pack_terms(terms));
  if (call.dropout > 0 || weights_grad) return attention_composed(q, k, v, terms, call);
  return attention_fused(q, k, v, terms, call);
}

}  // namespace ops

}  // namespace posenc::nn
