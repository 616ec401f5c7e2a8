// Attention with positional terms (posenc/nn/attention_ops.h): the checks
// both paths share, the composed (differentiable) path, the choice between
// it and the fused op (ops/attention/cpu_forward.cpp, autograd.cpp,
// through the dispatcher), and the public op posenc::attention that
// torch.ops / Python call (CompositeImplicitAutograd: it only turns its
// arguments into AttentionTerms; autograd sees the path it takes).
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
#include "ops/attention/term_spec_object.h"
#include "posenc/nn/tile_kind.h"
#include "posenc/nn/attention_ops.h"
#include "posenc/nn/bias_ops.h"
#include "posenc/nn/relative_ops.h"

namespace posenc::nn {
namespace {

constexpr const char* kOp = "attention";

using detail::dtype_name;
using detail::tuple_of;
using detail::given;

// "[8, 31]": a table's expected or actual shape.
std::string list_of(at::IntArrayRef sizes) {
  std::string s = tuple_of(sizes);
  s.front() = '[';
  s.back() = ']';
  return s;
}

void check_4d(const char* name, const char* shape, const at::Tensor& t) {
  detail::check_float_tensor(kOp, name, t);
  TORCH_CHECK_VALUE(t.dim() == 4, "[", kOp, "] ", name, " must be 4-D ", shape, ", got ", t.dim(), "-D");
}

// A term tensor: floating, on the CPU, in q's dtype or the compute dtype
// (modules hand over float32 terms for 16-bit activations).
void check_term(const char* name, const at::Tensor& t, const at::Tensor& q) {
  detail::check_float_tensor(kOp, name, t);
  const at::ScalarType qt = q.scalar_type(), compute = detail::compute_dtype(qt);
  TORCH_CHECK_TYPE(t.scalar_type() == qt || t.scalar_type() == compute, "[", kOp, "] ", name,
                   " must have q's dtype (", dtype_name(qt), ")", qt != compute ? " or float32" : "", ", got ",
                   dtype_name(t.scalar_type()));
}

// Tables and slopes hold parameters, never masks: a NaN or an infinity there is
// a bug upstream, refused with its first position (the dense bias may hold -inf).
void check_finite_table(const char* name, const at::Tensor& t) {
  if (t.numel() == 0) return;
  const at::Tensor bad = at::logical_not(at::isfinite(t.detach()));
  if (!bad.any().item<bool>()) return;
  const at::Tensor first = bad.nonzero().select(0, 0).contiguous();  // [dim] indices of the first bad entry
  const at::IntArrayRef index(first.data_ptr<int64_t>(), static_cast<size_t>(first.numel()));
  at::Tensor entry = t.detach();
  for (const int64_t i : index) entry = entry.select(0, i);
  TORCH_CHECK_VALUE(false, "[", kOp, "] ", name, " must be finite, got ", entry.item<double>(), " at ", list_of(index));
}

// A relative table [rows, dim] shared by the heads or [H, rows, dim].
void check_relative_table(const char* name, const char* rows_name, int64_t rows, const char* dim_name,
                          int64_t dim, const at::Tensor& t, const at::Tensor& q, const char* kind = "relative") {
  TORCH_CHECK_VALUE(t.dim() == 2 || t.dim() == 3, "[", kOp, "] ", name, " must be 2-D [", rows_name, ", ", dim_name,
                    "] or 3-D [H, ", rows_name, ", ", dim_name, "], got ", t.dim(), "-D");
  check_term(name, t, q);
  check_finite_table(name, t);
  TORCH_CHECK_VALUE(t.size(-2) == rows, "[", kOp, "] ", name, " must have ", rows_name, " = ", rows, " rows, got ",
                    t.size(-2));
  TORCH_CHECK_VALUE(t.size(-1) == dim, "[", kOp, "] ", name, " must have ", dim_name, " = ", dim, " columns, got ",
                    t.size(-1));
  const int64_t tables = t.dim() == 3 ? t.size(0) : 1, heads = q.size(1);
  TORCH_CHECK_VALUE(tables == 1 || tables == heads, "[", kOp, "] ", kind,
                    " tables must be shared (1) or one per head (", heads, "), got ", tables);
}

// [H, Dh] (Transformer-XL's u and v).
void check_shift(const char* name, const at::Tensor& t, const at::Tensor& q) {
  check_term(name, t, q);
  check_finite_table(name, t);
  TORCH_CHECK_VALUE(t.dim() == 2 && t.size(0) == q.size(1) && t.size(1) == q.size(3), "[", kOp, "] ", name,
                    " must be [H, Dh] = ", list_of({q.size(1), q.size(3)}), ", got ", list_of(t.sizes()));
}

double scale_of(const AttentionCall& call, int64_t head_dim) {
  if (call.scale) return *call.scale;
  return head_dim > 0 ? 1.0 / std::sqrt(static_cast<double>(head_dim)) : 1.0;
}

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

namespace detail {

void check_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionTerms& terms,
                     const AttentionCall& call) {
  check_4d("q", "(B, H, Tq, Dh)", q);
  check_4d("k", "(B, H, Tk, Dh)", k);
  check_4d("v", "(B, H, Tk, Dv)", v);
  for (const auto& [name, t] : {std::pair{"k", &k}, std::pair{"v", &v}}) {
    TORCH_CHECK_TYPE(t->scalar_type() == q.scalar_type(), "[", kOp, "] ", name, " must have q's dtype (",
                     dtype_name(q.scalar_type()), "), got ", dtype_name(t->scalar_type()));
  }
  const int64_t batch = q.size(0), heads = q.size(1), q_len = q.size(2), head_dim = q.size(3);
  const int64_t k_len = k.size(2), value_dim = v.size(3);
  TORCH_CHECK_VALUE(k.size(0) == batch && k.size(1) == heads && k.size(3) == head_dim, "[", kOp,
                    "] k must be (B, H, Tk, Dh) = ", tuple_of({batch, heads, -1, head_dim}), " like q, got ",
                    tuple_of(k.sizes()));
  TORCH_CHECK_VALUE(v.size(0) == batch && v.size(1) == heads && v.size(2) == k_len, "[", kOp,
                    "] v must have the keys' (B, H, Tk) = ", tuple_of({batch, heads, k_len}), ", got ",
                    tuple_of({v.size(0), v.size(1), v.size(2)}));

  const double scale = scale_of(call, head_dim);
  TORCH_CHECK_VALUE(std::isfinite(scale) && scale > 0, "[", kOp, "] scale must be finite and > 0, got ", scale);
  TORCH_CHECK_VALUE(call.dropout >= 0 && call.dropout < 1, "[", kOp, "] dropout must be in [0, 1), got ",
                    call.dropout);
  TORCH_CHECK_VALUE(!(call.causal || terms.causal) || q_len <= k_len, "[", kOp,
                    "] causal needs q_len <= k_len, got q_len ", q_len, " and k_len ", k_len);
  if (call.key_padding_mask && call.key_padding_mask->defined()) {
    const at::Tensor& mask = *call.key_padding_mask;
    TORCH_CHECK_TYPE(mask.scalar_type() == at::kBool, "[", kOp,
                     "] key_padding_mask must be a bool tensor (true = padding), got ", dtype_name(mask.scalar_type()));
    TORCH_CHECK_VALUE(mask.device().is_cpu(), "[", kOp, "] key_padding_mask must be on the CPU, got ", mask.device());
    TORCH_CHECK_VALUE(mask.dim() == 2 && mask.size(0) == batch && mask.size(1) == k_len, "[", kOp,
                      "] key_padding_mask must be (B, Tk) = ", tuple_of({batch, k_len}), ", got ",
                      tuple_of(mask.sizes()));
  }

  // ---- logit biases
  if (terms.offset_bias.defined()) {
    check_term("offset_bias", terms.offset_bias, q);
    const int64_t columns = std::max<int64_t>(q_len + k_len - 1, 0);
    TORCH_CHECK_VALUE(terms.offset_bias.dim() == 2 && terms.offset_bias.size(0) == heads &&
                          terms.offset_bias.size(1) == columns,
                      "[", kOp, "] offset_bias must be [H, Tq + Tk - 1] = ", list_of({heads, columns}), ", got ",
                      list_of(terms.offset_bias.sizes()));
  }
  if (terms.bias.defined()) {
    check_term("bias", terms.bias, q);
    const std::vector<int64_t> full{batch, heads, q_len, k_len};
    bool fits = terms.bias.dim() <= 4;
    for (int64_t d = 1; fits && d <= terms.bias.dim(); ++d) {
      const int64_t s = terms.bias.size(-d);
      fits = s == full[4 - d] || s == 1;
    }
    TORCH_CHECK_VALUE(fits, "[", kOp, "] bias must be broadcastable to (B, H, Tq, Tk) = ", tuple_of(full), ", got ",
                      tuple_of(terms.bias.sizes()));
  }

  // ---- tile terms (computed per tile on the fused path by their registered kinds)
  for (const TileTerm& tile : terms.tiles) {
    const TileKind& kind = tile_kind(tile.kind);
    const std::vector<std::string> names = kind.tensor_names();
    TORCH_CHECK_VALUE(tile.tensors.size() == names.size(), "[", kOp, "] the ", kind.display_name(), " term needs ",
                      names.size(), " tensors, got ", tile.tensors.size());
    kind.check(tile.tensors, q);
    for (size_t i = 0; i < names.size(); ++i) check_term(names[i].c_str(), tile.tensors[i], q);
    TORCH_CHECK_VALUE(!kind.needs_causal() || call.causal || terms.causal, "[", kOp, "] the ", kind.display_name(),
                      " term needs causal attention (", kind.display_name(),
                      " is defined for decoders), got causal false");
  }
  // The kernel takes one tile term.
  TORCH_CHECK_VALUE(terms.tiles.size() <= 1, "[", kOp, "] the ", tile_kind(terms.tiles[0].kind).display_name(),
                    " and ", tile_kind(terms.tiles[terms.tiles.size() - 1].kind).display_name(),
                    " terms cannot be combined, got both");

  // ---- relative vectors
  if (terms.rel_k.defined() || terms.rel_v.defined() || terms.rel_q.defined()) {
    const int64_t max_distance = terms.max_distance;
    TORCH_CHECK_VALUE(max_distance >= 0, "[", kOp, "] max_distance must be >= 0, got ", max_distance);
    // Longer than any offset is useless and 2K+1 must not overflow.
    const int64_t rows = max_distance < (int64_t{1} << 61) ? 2 * max_distance + 1 : -1;
    // With rel_index the tables have their own row count (rel_k's, else rel_q's) and each index names a row.
    const char* rows_name = terms.rel_index.defined() ? "the rows of rel_k" : "2*max_distance+1";
    int64_t table_rows = rows;
    if (terms.rel_index.defined()) {
      const at::Tensor& index = terms.rel_index;
      TORCH_CHECK_TYPE(index.scalar_type() == at::kLong, "[", kOp, "] rel_index must be int64, got ",
                       dtype_name(index.scalar_type()));
      TORCH_CHECK_VALUE(index.dim() == 1 && index.size(0) == rows, "[", kOp,
                        "] rel_index must be [2*max_distance+1] = ", list_of({rows}), ", got ", list_of(index.sizes()));
      TORCH_CHECK_VALUE(!terms.rel_v.defined(), "[", kOp, "] rel_index addresses rel_k and rel_q, not rel_v");
      const at::Tensor& table = terms.rel_k.defined() ? terms.rel_k : terms.rel_q;
      table_rows = table.dim() >= 2 ? table.size(-2) : 0;
      if (!terms.rel_k.defined()) rows_name = "the rows of rel_q";
      const int64_t lo = index.min().item<int64_t>(), hi = index.max().item<int64_t>();
      TORCH_CHECK_VALUE(lo >= 0 && hi < table_rows, "[", kOp, "] rel_index must hold rows in [0, ", table_rows,
                        "), got ", lo < 0 ? lo : hi);
    } else if (terms.rel_q.defined()) {
      rows_name = "2*max_distance+1";
    }
    if (terms.rel_k.defined()) {
      check_relative_table("rel_k", rows_name, table_rows, "Dh", head_dim, terms.rel_k, q);
    }
    if (terms.rel_q.defined()) {
      check_relative_table("rel_q", rows_name, table_rows, "Dh", head_dim, terms.rel_q, q);
    }
    if (terms.rel_v.defined()) {
      check_relative_table("rel_v", "2*max_distance+1", rows, "Dv", value_dim, terms.rel_v, q);
    }
  }
  if (terms.content_shift.defined()) check_shift("content_shift (xl_u)", terms.content_shift, q);
  if (terms.relative_shift.defined()) {
    check_shift("relative_shift (xl_v)", terms.relative_shift, q);
    TORCH_CHECK_VALUE(terms.rel_k.defined(), "[", kOp,
                      "] relative_shift (xl_v) shifts the queries of the rel_k term and needs rel_k, got None");
  }

  // ---- 2D terms
  const bool grid_tables = terms.grid_h.defined() || terms.grid_w.defined();
  if (grid_tables || terms.grid_bias.defined()) {
    const int64_t height = terms.grid_height, width = terms.grid_width;
    TORCH_CHECK_VALUE(height >= 1 && width >= 1, "[", kOp,
                      "] 2D terms need height >= 1 and width >= 1, got height ", height, " and width ", width);
    int64_t cells = 0;
    const bool overflow = __builtin_mul_overflow(height, width, &cells);
    TORCH_CHECK_VALUE(!overflow && q_len == cells && k_len == cells, "[", kOp,
                      "] 2D terms need q_len = k_len = height*width = ",
                      overflow ? std::to_string(height) + "*" + std::to_string(width) : std::to_string(cells),
                      ", got q_len ", q_len, " and k_len ", k_len);
    // height, width <= HW = q_len from here: 2*extent-1 cannot overflow.
    if (grid_tables) {
      TORCH_CHECK_VALUE(terms.grid_h.defined() && terms.grid_w.defined(), "[", kOp,
                        "] grid_h and grid_w (rel_2d table_h and table_w) come together, got only ",
                        terms.grid_h.defined() ? "grid_h" : "grid_w");
      check_relative_table("grid_h (rel_2d table_h)", "2*height-1", 2 * height - 1, "Dh", head_dim, terms.grid_h, q,
                           "2D");
      check_relative_table("grid_w (rel_2d table_w)", "2*width-1", 2 * width - 1, "Dh", head_dim, terms.grid_w, q,
                           "2D");
    }
    if (terms.grid_bias.defined()) {
      check_term("grid_bias", terms.grid_bias, q);
      const std::vector<int64_t> want{heads, 2 * height - 1, 2 * width - 1};
      TORCH_CHECK_VALUE(terms.grid_bias.sizes() == at::IntArrayRef(want), "[", kOp,
                        "] grid_bias must be [H, 2*height-1, 2*width-1] = ", list_of(want), ", got ",
                        list_of(terms.grid_bias.sizes()));
    }
  }
}

}  // namespace detail

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
    if (k_len > 0 && all_hidden.any().item<bool>()) {
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
  auto [out, weights] = dispatch::attention_fused(
      q, k, v, list.tensors, c10::make_intrusive<detail::TermSpecObject>(list.spec), call.causal || terms.causal,
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

namespace {

// torch.ops.posenc.attention: the Python arguments become AttentionTerms.
std::tuple<at::Tensor, at::Tensor> attention_op(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
    const c10::optional<at::Tensor>& key_padding_mask, c10::optional<double> scale,
    const c10::optional<at::Tensor>& alibi_slopes, const c10::optional<at::Tensor>& t5_table, int64_t t5_num_buckets,
    int64_t t5_max_distance, c10::optional<bool> t5_bidirectional, const c10::optional<at::Tensor>& rel_k,
    const c10::optional<at::Tensor>& rel_v, c10::optional<int64_t> max_distance,
    const c10::optional<at::Tensor>& rel_2d_h, const c10::optional<at::Tensor>& rel_2d_w, int64_t rel_2d_height,
    int64_t rel_2d_width, const c10::optional<at::Tensor>& xl_u, const c10::optional<at::Tensor>& xl_v,
    const c10::optional<at::Tensor>& bias, bool return_weights, c10::string_view path,
    const c10::optional<at::Tensor>& offset_bias, const c10::optional<at::Tensor>& grid_bias,
    const c10::optional<at::Tensor>& fire_w1, const c10::optional<at::Tensor>& fire_b1,
    const c10::optional<at::Tensor>& fire_w2, const c10::optional<at::Tensor>& fire_b2,
    const c10::optional<at::Tensor>& fire_c, const c10::optional<at::Tensor>& fire_threshold,
    const c10::optional<at::Tensor>& cope_e, const c10::optional<at::Tensor>& rel_q,
    const c10::optional<at::Tensor>& rel_index) {
  const AttentionPath route = parse_attention_path(detail::to_std(path));
  AttentionCall call;
  call.causal = causal;
  if (given(key_padding_mask)) call.key_padding_mask = *key_padding_mask;
  if (scale) call.scale = *scale;
  call.return_weights = return_weights;
  // q, k, v first: the sizes below come from them.
  detail::check_attention(q, k, v, AttentionTerms{}, call);
  const int64_t heads = q.size(1), q_len = q.size(2), k_len = k.size(2);
  const at::ScalarType compute = detail::compute_dtype(q.scalar_type());

  AttentionTerms terms;
  // Both offset-bias families land in one [H, Tq + Tk - 1] row per head (none when there are no pairs).
  const bool pairs = q_len > 0 && k_len > 0;
  if (given(alibi_slopes)) {
    check_term("alibi_slopes", *alibi_slopes, q);
    TORCH_CHECK_VALUE(alibi_slopes->dim() == 1 && alibi_slopes->size(0) == heads, "[", kOp,
                      "] alibi_slopes must be [H] = ", list_of({heads}), ", got ", list_of(alibi_slopes->sizes()));
    check_finite_table("alibi_slopes", *alibi_slopes);
    // From the slopes in the compute dtype: -m |d| is rounded once, not in bfloat16.
    if (pairs) terms.offset_bias = ops::alibi_offset_bias(alibi_slopes->to(compute), q_len, k_len);
  }
  if (given(t5_table)) {
    check_term("t5_table", *t5_table, q);
    TORCH_CHECK_VALUE(t5_table->dim() == 2 && t5_table->size(0) == t5_num_buckets && t5_table->size(1) == heads, "[",
                      kOp, "] t5_table must be [num_buckets, H] = ", list_of({t5_num_buckets, heads}), ", got ",
                      list_of(t5_table->sizes()));
    check_finite_table("t5_table", *t5_table);
    if (pairs) {
      const at::Tensor t5 = ops::t5_offset_bias(t5_table->to(compute), q_len, k_len,
                                                t5_bidirectional.value_or(!causal), t5_max_distance);
      terms.offset_bias = terms.offset_bias.defined() ? terms.offset_bias + t5 : t5;  // ALiBi and T5 together
    }
  }
  if (given(offset_bias)) {
    check_term("offset_bias", *offset_bias, q);
    // Without pairs there is nothing to read: rows of 0 columns (what the row ops give then) are fine too.
    TORCH_CHECK_VALUE(offset_bias->dim() == 2 && offset_bias->size(0) == heads &&
                          (offset_bias->size(1) == q_len + k_len - 1 || (!pairs && offset_bias->size(1) == 0)),
                      "[", kOp, "] offset_bias must be [H, Tq + Tk - 1] = ",
                      list_of({heads, q_len + k_len - 1}), ", got ",
                      list_of(offset_bias->sizes()));
    if (pairs) terms.offset_bias = terms.offset_bias.defined() ? terms.offset_bias + *offset_bias : *offset_bias;
  }
  if (given(grid_bias)) {
    check_term("grid_bias", *grid_bias, q);
    TORCH_CHECK_VALUE(grid_bias->dim() == 3 && grid_bias->size(0) == heads && grid_bias->size(1) % 2 == 1 &&
                          grid_bias->size(2) % 2 == 1,
                      "[", kOp, "] grid_bias must be [H, 2*height-1, 2*width-1] with H = ", heads, ", got ",
                      list_of(grid_bias->sizes()));
    terms.grid_bias = *grid_bias;
    terms.grid_height = (grid_bias->size(1) + 1) / 2;
    terms.grid_width = (grid_bias->size(2) + 1) / 2;
    TORCH_CHECK_VALUE(q_len == terms.grid_height * terms.grid_width && k_len == q_len, "[", kOp,
                      "] grid_bias needs q_len = k_len = height*width = ", terms.grid_height * terms.grid_width,
                      ", got q_len ", q_len, " and k_len ", k_len);
  }
  {
    const c10::optional<at::Tensor>* fire[] = {&fire_w1, &fire_b1, &fire_w2, &fire_b2, &fire_c, &fire_threshold};
    int count = 0;
    for (const auto* t : fire) count += given(*t) ? 1 : 0;
    TORCH_CHECK_VALUE(count == 0 || count == 6, "[", kOp,
                      "] FIRE needs all six of fire_w1, fire_b1, fire_w2, fire_b2, fire_c, fire_threshold, got ",
                      count);
    // Sugar for the tile kinds "fire" and "cope" (registered by their families).
    if (count == 6) terms.tiles.push_back({"fire", {*fire_w1, *fire_b1, *fire_w2, *fire_b2, *fire_c, *fire_threshold}});
  }
  if (given(cope_e)) terms.tiles.push_back({"cope", {*cope_e}});
  if (given(bias)) terms.bias = *bias;

  if (given(rel_k)) terms.rel_k = *rel_k;
  if (given(rel_v)) terms.rel_v = *rel_v;
  if (given(rel_q)) terms.rel_q = *rel_q;
  if (given(rel_index)) terms.rel_index = *rel_index;
  if (max_distance) {
    terms.max_distance = *max_distance;
  } else if (given(rel_index)) {
    // K read from rel_index's 2K+1 entries.
    const int64_t rows = rel_index->dim() == 1 ? rel_index->size(0) : 0;
    TORCH_CHECK_VALUE(rows % 2 == 1, "[", kOp,
                      "] rel_index must have 2*max_distance+1 entries (an odd count) when max_distance is None, got ",
                      rows);
    terms.max_distance = (rows - 1) / 2;
  } else if (given(rel_k) || given(rel_q)) {
    // K read from rel_k's (else rel_q's) 2K+1 rows.
    const at::Tensor& table = given(rel_k) ? *rel_k : *rel_q;
    const int64_t rows = table.dim() >= 2 ? table.size(-2) : 0;
    TORCH_CHECK_VALUE(rows % 2 == 1, "[", kOp, "] ", given(rel_k) ? "rel_k" : "rel_q",
                      " must have 2*max_distance+1 rows (an odd count) when max_distance is None, got ", rows);
    terms.max_distance = (rows - 1) / 2;
  } else {
    TORCH_CHECK_VALUE(!given(rel_v), "[", kOp, "] rel_v needs max_distance (or rel_k to read it from), got None");
  }
  if (given(xl_u)) terms.content_shift = *xl_u;
  if (given(xl_v)) terms.relative_shift = *xl_v;

  if (given(rel_2d_h) || given(rel_2d_w)) {
    TORCH_CHECK_VALUE(!given(grid_bias) || (rel_2d_height == terms.grid_height && rel_2d_width == terms.grid_width),
                      "[", kOp, "] rel_2d's grid (", rel_2d_height, " x ", rel_2d_width, ") must be grid_bias's (",
                      terms.grid_height, " x ", terms.grid_width, ")");
    TORCH_CHECK_VALUE(given(rel_2d_h) && given(rel_2d_w), "[", kOp,
                      "] rel_2d needs both tables (table_h, table_w), got only ",
                      given(rel_2d_h) ? "table_h" : "table_w");
    TORCH_CHECK_VALUE(rel_2d_height >= 1 && rel_2d_width >= 1, "[", kOp,
                      "] rel_2d needs height >= 1 and width >= 1, got height ", rel_2d_height, " and width ",
                      rel_2d_width);
    int64_t cells = 0;
    const bool overflow = __builtin_mul_overflow(rel_2d_height, rel_2d_width, &cells);
    TORCH_CHECK_VALUE(!overflow && q_len == cells && k_len == cells, "[", kOp,
                      "] rel_2d needs q_len = k_len = height*width = ",
                      overflow ? std::to_string(rel_2d_height) + "*" + std::to_string(rel_2d_width)
                               : std::to_string(cells),
                      ", got q_len ", q_len, " and k_len ", k_len);
    terms.grid_h = *rel_2d_h;
    terms.grid_w = *rel_2d_w;
    terms.grid_height = rel_2d_height;
    terms.grid_width = rel_2d_width;
  }

  call.path = route;
  std::tuple<at::Tensor, at::Tensor> result = ops::attention(q, k, v, terms, call);
  auto& [out, weights] = result;
  if (!weights.defined()) weights = at::empty({0}, q.options());
  return result;
}

}  // namespace

TORCH_LIBRARY_IMPL(posenc, CompositeImplicitAutograd, m) { m.impl("attention", attention_op); }

}  // namespace posenc::nn
