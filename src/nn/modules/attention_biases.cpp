// The logit-bias modules: options checked once at construction (by the
// kernels' validators, under the module's name), then per call one bias from
// the ops, whose Autograd kernels carry the T5 tables' gradients.
#include "posenc/nn/attention_biases.h"

#include <ATen/ATen.h>

#include <cmath>
#include <ostream>
#include <string>
#include <utility>

#include "op_support.h"
#include "posenc/kernels/t5.h"
#include "posenc/nn/bias_ops.h"

namespace posenc::nn {
namespace {

const char* bool_name(bool value) noexcept { return value ? "true" : "false"; }

void check_init_std(const std::string& op, double init_std) {
  TORCH_CHECK_VALUE(std::isfinite(init_std) && init_std >= 0, "[", op, "] init_std must be finite and >= 0, got ",
                    init_std);
}

// The 2D biases live on one grid: both lengths must be its cell count.
void check_grid_lengths(const std::string& op, int64_t height, int64_t width, int64_t q_len, int64_t k_len) {
  TORCH_CHECK_VALUE(q_len == height * width && k_len == height * width, "[", op,
                    "] q_len and k_len must both be height*width = ", height * width, ", got ", q_len, " and ",
                    k_len);
}

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

// ---------------------------------------------------------------------------
// AlibiBias

AlibiBiasImpl::AlibiBiasImpl(const AlibiBiasOptions& options)
    : AttentionBiasImpl("AlibiBias", options.num_heads()), options_(options) {
  slopes_ = register_buffer("slopes", ops::alibi_slopes(options.num_heads()));
}

at::Tensor AlibiBiasImpl::bias(int64_t q_len, int64_t k_len) {
  // The op forms -m_h |i' - j| in double from the exact slopes and rounds once,
  // which a product with the rounded buffer would not.
  return ops::alibi_bias(num_heads(), q_len, k_len, options_.causal(), slopes_.scalar_type());
}

void AlibiBiasImpl::pretty_print(std::ostream& stream) const {
  stream << "posenc::nn::AlibiBias(num_heads=" << num_heads() << ", causal=" << bool_name(options_.causal()) << ")";
}

// ---------------------------------------------------------------------------
// T5Bias

T5BiasImpl::T5BiasImpl(const T5BiasOptions& options)
    : AttentionBiasImpl("T5Bias", options.num_heads()), options_(options) {
  detail::translate_errors([&] {
    kernels::validate(kernels::T5BucketParams{options.bidirectional(), options.num_buckets(), options.max_distance()},
                      "T5Bias");
  });
  check_init_std(name(), options.init_std());
  table_ = register_parameter("table", at::empty({options.num_buckets(), options.num_heads()}));
  reset_parameters();
}

void T5BiasImpl::reset_parameters() {
  at::NoGradGuard no_grad;
  table_.normal_(0.0, options_.init_std());
}

at::Tensor T5BiasImpl::bias(int64_t q_len, int64_t k_len) {
  return ops::t5_bias(table_, q_len, k_len, options_.bidirectional(), options_.max_distance());
}

void T5BiasImpl::pretty_print(std::ostream& stream) const {
  stream << "posenc::nn::T5Bias(num_heads=" << num_heads() << ", num_buckets=" << options_.num_buckets()
         << ", max_distance=" << options_.max_distance() << ", bidirectional=" << bool_name(options_.bidirectional())
         << ")";
}

// ---------------------------------------------------------------------------
// AlibiBias2d

AlibiBias2dImpl::AlibiBias2dImpl(const AlibiBias2dOptions& options)
    : AttentionBiasImpl("AlibiBias2d", options.num_heads()), options_(options) {
  detail::translate_errors([&] {
    kernels::validate(
        kernels::Alibi2dParams{options.num_heads(), options.height(), options.width(), options.distance()},
        "AlibiBias2d");
  });
  slopes_ = register_buffer("slopes", ops::alibi_slopes(options.num_heads()));
}

at::Tensor AlibiBias2dImpl::bias(int64_t q_len, int64_t k_len) {
  check_grid_lengths(name(), options_.height(), options_.width(), q_len, k_len);
  return ops::alibi_bias_2d(
      kernels::Alibi2dParams{num_heads(), options_.height(), options_.width(), options_.distance()},
      slopes_.scalar_type());
}

void AlibiBias2dImpl::pretty_print(std::ostream& stream) const {
  stream << "posenc::nn::AlibiBias2d(num_heads=" << num_heads() << ", height=" << options_.height()
         << ", width=" << options_.width() << ", distance=" << kernels::grid_distance_name(options_.distance())
         << ")";
}

// ---------------------------------------------------------------------------
// T5Bias2d

T5Bias2dImpl::T5Bias2dImpl(const T5Bias2dOptions& options)
    : AttentionBiasImpl("T5Bias2d", options.num_heads()), options_(options) {
  detail::translate_errors([&] {
    kernels::validate(kernels::T5BucketParams{options.bidirectional(), options.num_buckets(), options.max_distance()},
                      kernels::T5Bias2dShape{options.num_heads(), options.height(), options.width()}, "T5Bias2d");
  });
  check_init_std(name(), options.init_std());
  table_h_ = register_parameter("table_h", at::empty({options.num_buckets(), options.num_heads()}));
  table_w_ = register_parameter("table_w", at::empty({options.num_buckets(), options.num_heads()}));
  reset_parameters();
}

void T5Bias2dImpl::reset_parameters() {
  at::NoGradGuard no_grad;
  table_h_.normal_(0.0, options_.init_std());
  table_w_.normal_(0.0, options_.init_std());
}

at::Tensor T5Bias2dImpl::bias(int64_t q_len, int64_t k_len) {
  check_grid_lengths(name(), options_.height(), options_.width(), q_len, k_len);
  return ops::t5_bias_2d(table_h_, table_w_, options_.height(), options_.width(), options_.bidirectional(),
                         options_.max_distance());
}

void T5Bias2dImpl::pretty_print(std::ostream& stream) const {
  stream << "posenc::nn::T5Bias2d(num_heads=" << num_heads() << ", height=" << options_.height()
         << ", width=" << options_.width() << ", num_buckets=" << options_.num_buckets()
         << ", max_distance=" << options_.max_distance() << ", bidirectional=" << bool_name(options_.bidirectional())
         << ")";
}

// ---------------------------------------------------------------------------
// The attention terms (posenc/nn/attention_terms.h): offset and grid rows, O(H*T).

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

}  // namespace posenc::nn
