// The logit-bias point's base (posenc/nn/attention_bias.h): checking the
// logits and adding the bias, the default dense term, and the offset rows of
// ALiBi and T5 the keyword sugar of posenc.attention builds
// (posenc/nn/bias_ops.h).
#include "posenc/nn/attention_bias.h"

#include <ATen/ATen.h>

#include <string>
#include <utility>

#include "op_support.h"
#include "posenc/kernels/t5.h"
#include "posenc/nn/bias_ops.h"

namespace posenc::nn {
namespace {

// Offsets d = j - i' of every (query, key) pair: -(k_len-1) .. q_len-1, as int64.
at::Tensor offsets(int64_t q_len, int64_t k_len) { return at::arange(-(k_len - 1), q_len, at::kLong); }

}  // namespace

// ---------------------------------------------------------------------------
// AttentionBiasImpl

AttentionBiasImpl::AttentionBiasImpl(std::string name, int64_t num_heads)
    : torch::nn::Module(std::move(name)), num_heads_(num_heads) {
  TORCH_CHECK_VALUE(num_heads >= 1, "[", this->name(), "] num_heads must be >= 1, got ", num_heads);
}

// logits: (B, H, Tq, Tk) -> (B, H, Tq, Tk)
at::Tensor AttentionBiasImpl::forward(const at::Tensor& logits) {
  TORCH_CHECK_VALUE(logits.defined(), "[", name(), "] logits must be a tensor, got None");
  TORCH_CHECK_TYPE(detail::is_float_dtype(logits.scalar_type()), "[", name(),
                   "] logits must be float32, float64, bfloat16 or float16, got ", logits.scalar_type());
  TORCH_CHECK_VALUE(logits.dim() == 4, "[", name(), "] logits must be 4-D (B, H, Tq, Tk), got ", logits.dim(), "-D");
  TORCH_CHECK_VALUE(logits.size(1) == num_heads_, "[", name(), "] logits must have num_heads = ", num_heads_,
                    " heads, got ", logits.size(1));
  const at::Tensor b = bias(logits.size(2), logits.size(3));
  TORCH_INTERNAL_ASSERT(b.dim() == 3 && b.size(0) == num_heads_ && b.size(1) == logits.size(2) &&
                        b.size(2) == logits.size(3));
  // One rounding to the logits' dtype, after the sum in the wider compute dtype.
  const at::ScalarType compute =
      logits.scalar_type() == at::kDouble || b.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  return (logits.to(compute) + b.to(compute)).to(logits.scalar_type());
}

void AttentionBiasImpl::add_terms(AttentionTerms& terms, int64_t q_len, int64_t k_len, at::ScalarType compute) {
  const at::Tensor dense = bias(q_len, k_len).to(compute);
  terms.bias = terms.bias.defined() ? terms.bias + dense : dense;
}

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
}  // namespace posenc::nn
