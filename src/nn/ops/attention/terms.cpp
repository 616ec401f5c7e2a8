// What each encoding family contributes to one attention call
// (posenc/nn/attention_ops.h): biases that depend on the offset only become
// O(H*T) offset or grid rows, relative families hand over their tables, so
// the fused kernel never sees a (Tq, Tk) tensor. Differentiable wrt the
// modules' parameters, for the composed (training) path.
#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>

#include "posenc/nn/attention_biases.h"
#include "posenc/nn/attention_ops.h"
#include "posenc/nn/relative_encodings.h"
#include "posenc/nn/bias_ops.h"

namespace posenc::nn {
namespace {

// Offsets d = j - i' of every (query, key) pair: -(k_len-1) .. q_len-1, as int64.
at::Tensor offsets(int64_t q_len, int64_t k_len) { return at::arange(-(k_len - 1), q_len, at::kLong); }

// Offsets -(n-1) .. n-1 along one grid axis.
at::Tensor axis_offsets(int64_t n) { return at::arange(-(n - 1), n, at::kLong); }

// Sums two optional terms (a family may add to what another wrote).
void accumulate(at::Tensor& slot, const at::Tensor& value) { slot = slot.defined() ? slot + value : value; }

}  // namespace

namespace ops {

// slopes [H] -> [H, q_len + k_len - 1]: -m_h |d|
at::Tensor alibi_offset_bias(const at::Tensor& slopes, int64_t q_len, int64_t k_len) {
  TORCH_CHECK_VALUE(slopes.defined() && slopes.dim() == 1, "[attention] alibi_slopes must be 1-D [H], got ",
                    slopes.defined() ? slopes.dim() : 0, "-D");
  const at::Tensor distance = offsets(q_len, k_len).abs().to(slopes.scalar_type());
  return -slopes.unsqueeze(1) * distance.unsqueeze(0);
}

// table [num_buckets, H] -> [H, q_len + k_len - 1]: table[bucket(d), h]
at::Tensor t5_offset_bias(const at::Tensor& table, int64_t q_len, int64_t k_len, bool bidirectional,
                          int64_t max_distance) {
  TORCH_CHECK_VALUE(table.defined() && table.dim() == 2, "[attention] t5_table must be 2-D [num_buckets, H], got ",
                    table.defined() ? table.dim() : 0, "-D");
  const at::Tensor buckets =
      t5_bucket(offsets(q_len, k_len), kernels::T5BucketParams{bidirectional, table.size(0), max_distance});
  return table.index_select(0, buckets).t().contiguous();
}

}  // namespace ops

// ---------------------------------------------------------------------------
// Logit biases

void AttentionBiasImpl::add_terms(AttentionTerms& terms, int64_t q_len, int64_t k_len, at::ScalarType compute) {
  accumulate(terms.bias, bias(q_len, k_len).to(compute));
}

void AlibiBiasImpl::add_terms(AttentionTerms& terms, int64_t q_len, int64_t k_len, at::ScalarType compute) {
  // From the exact slopes in double, rounded once (as bias() does).
  const at::Tensor slopes = ops::alibi_slopes(num_heads(), at::kDouble);
  accumulate(terms.offset_bias, ops::alibi_offset_bias(slopes, q_len, k_len).to(compute));
  if (options_.causal()) terms.causal = true;
}

void T5BiasImpl::add_terms(AttentionTerms& terms, int64_t q_len, int64_t k_len, at::ScalarType compute) {
  accumulate(terms.offset_bias,
             ops::t5_offset_bias(table_.to(compute), q_len, k_len, options_.bidirectional(), options_.max_distance()));
}

void AlibiBias2dImpl::add_terms(AttentionTerms& terms, int64_t q_len, int64_t k_len, at::ScalarType compute) {
  bias(q_len, k_len);  // the grid-length check, with this module's message
  const at::Tensor dy = axis_offsets(options_.height()).to(at::kDouble).unsqueeze(1);
  const at::Tensor dx = axis_offsets(options_.width()).to(at::kDouble).unsqueeze(0);
  const at::Tensor distance = options_.distance() == kernels::GridDistance::kManhattan
                                  ? dy.abs() + dx.abs()
                                  : (dy * dy + dx * dx).sqrt();
  const at::Tensor slopes = ops::alibi_slopes(num_heads(), at::kDouble).view({num_heads(), 1, 1});
  accumulate(terms.grid_bias, (-slopes * distance.unsqueeze(0)).to(compute));
  terms.grid_height = options_.height();
  terms.grid_width = options_.width();
}

void T5Bias2dImpl::add_terms(AttentionTerms& terms, int64_t q_len, int64_t k_len, at::ScalarType compute) {
  bias(q_len, k_len);
  const kernels::T5BucketParams params{options_.bidirectional(), options_.num_buckets(), options_.max_distance()};
  // [H, 2*height-1] and [H, 2*width-1], summed into [H, 2*height-1, 2*width-1]
  const at::Tensor rows = table_h_.to(compute).index_select(0, ops::t5_bucket(axis_offsets(options_.height()), params)).t();
  const at::Tensor cols = table_w_.to(compute).index_select(0, ops::t5_bucket(axis_offsets(options_.width()), params)).t();
  accumulate(terms.grid_bias, rows.unsqueeze(2) + cols.unsqueeze(1));
  terms.grid_height = options_.height();
  terms.grid_width = options_.width();
}

// ---------------------------------------------------------------------------
// Relative vectors

void ShawRelativeImpl::add_terms(AttentionTerms& terms, int64_t /*q_len*/, int64_t /*k_len*/,
                                 at::ScalarType compute) {
  terms.rel_k = key_table_.to(compute);
  if (options_.values()) terms.rel_v = value_table_.to(compute);
  terms.max_distance = options_.max_distance();
}

void SinusoidalRelativeImpl::add_terms(AttentionTerms& terms, int64_t /*q_len*/, int64_t /*k_len*/,
                                       at::ScalarType compute) {
  const at::Tensor t = table(compute);  // one table for keys and values (NEZHA)
  terms.rel_k = t;
  if (options_.values()) terms.rel_v = t;
  terms.max_distance = options_.max_distance();
}

void TransformerXLRelativeImpl::add_terms(AttentionTerms& terms, int64_t q_len, int64_t k_len,
                                          at::ScalarType compute) {
  // Every offset has its own vector: K reaches -(Tk-1) .. Tq-1.
  const int64_t max_distance = std::max<int64_t>(std::max(q_len, k_len) - 1, 0);
  terms.rel_k = table(max_distance, compute);
  terms.max_distance = max_distance;
  terms.content_shift = u_.to(compute);
  terms.relative_shift = v_.to(compute);
}

void Relative2dImpl::add_terms(AttentionTerms& terms, int64_t q_len, int64_t k_len, at::ScalarType compute) {
  const int64_t cells = options_.height() * options_.width();
  TORCH_CHECK_VALUE(q_len == cells && k_len == cells, "[", name(), "] q and k must both have height*width = ", cells,
                    " positions, got ", q_len, " and ", k_len);
  terms.grid_h = table_h_.to(compute);
  terms.grid_w = table_w_.to(compute);
  terms.grid_height = options_.height();
  terms.grid_width = options_.width();
}

}  // namespace posenc::nn
