// The checks both attention paths share (detail::check_attention, declared in
// dispatch.h): q, k, v, the call's mask, scale and dropout, and every term's
// shape and dtype, each refusal naming the term and the value.
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "dispatch.h"
#include "op_support.h"
#include "ops/attention/checks.h"
#include "posenc/nn/attention_ops.h"
#include "posenc/nn/tile_kind.h"

namespace posenc::nn {
namespace {

constexpr const char* kOp = "attention";

using detail::check_finite_table;
using detail::check_term;
using detail::dtype_name;
using detail::list_of;
using detail::scale_of;
using detail::tuple_of;

void check_4d(const char* name, const char* shape, const at::Tensor& t) {
  detail::check_float_tensor(kOp, name, t);
  TORCH_CHECK_VALUE(t.dim() == 4, "[", kOp, "] ", name, " must be 4-D ", shape, ", got ", t.dim(), "-D");
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

}  // namespace

namespace detail {

std::string list_of(at::IntArrayRef sizes) {
  std::string s = tuple_of(sizes);
  s.front() = '[';
  s.back() = ']';
  return s;
}

// Modules hand over float32 terms for 16-bit activations.
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
  if (t.numel() == 0 || !detail::holds_data(t)) return;  // traced: the graph's kernel checks
  const at::Tensor bad = at::logical_not(at::isfinite(t.detach()));
  if (!bad.any().item<bool>()) return;
  const at::Tensor first = bad.nonzero().select(0, 0).contiguous();  // [dim] indices of the first bad entry
  const at::IntArrayRef index(first.data_ptr<int64_t>(), static_cast<size_t>(first.numel()));
  at::Tensor entry = t.detach();
  for (const int64_t i : index) entry = entry.select(0, i);
  TORCH_CHECK_VALUE(false, "[", kOp, "] ", name, " must be finite, got ", entry.item<double>(), " at ", list_of(index));
}

}  // namespace detail

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
      const bool read = detail::holds_data(index) && index.numel() > 0;
      const int64_t lo = read ? index.min().item<int64_t>() : 0, hi = read ? index.max().item<int64_t>() : 0;
      TORCH_CHECK_VALUE(!read || (lo >= 0 && hi < table_rows), "[", kOp, "] rel_index must hold rows in [0, ", table_rows,
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

}  // namespace posenc::nn
