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

}  // namespace posenc::nn
