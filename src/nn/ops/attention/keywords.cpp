// The public op posenc::attention that torch.ops / Python call, the
// documented keyword sugar of posenc.attention (CompositeImplicitAutograd:
// it turns ALiBi slopes, T5 tables, Shaw / Transformer-XL / 2D tables and the
// fire / cope tensors into AttentionTerms, then calls ops::attention; autograd
// sees the path it takes). The terms' own checks are check_attention's.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <cstdint>
#include <string>
#include <tuple>

#include "dispatch.h"
#include "op_support.h"
#include "ops/attention/checks.h"
#include "posenc/nn/attention_ops.h"
#include "posenc/nn/bias_ops.h"

namespace posenc::nn {
namespace {

constexpr const char* kOp = "attention";

using detail::check_finite_table;
using detail::check_term;
using detail::given;
using detail::list_of;

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
