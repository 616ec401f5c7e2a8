// The trainable input encodings: LearnedEncoding (a table) and
// LearnableSinusoidalEncoding (the frequencies). Gradients reach the
// parameters through the ops' Autograd kernels.
#include <ATen/ATen.h>

#include <cmath>
#include <ostream>

#include "op_support.h"
#include "posenc/nn/learnable_sinusoidal_encoding.h"
#include "posenc/nn/learned_encoding.h"
#include "posenc/nn/ops.h"

namespace posenc::nn {

LearnedEncodingImpl::LearnedEncodingImpl(const LearnedEncodingOptions& options)
    : InputEncodingImpl("LearnedEncoding", options.dim(), options.mode()), options_(options) {
  TORCH_CHECK_VALUE(options.max_positions() >= 1, "[", name(), "] max_positions must be at least 1, got ",
                    options.max_positions());
  TORCH_CHECK_VALUE(options.dim() >= 1, "[", name(), "] dim must be positive, got ", options.dim());
  TORCH_CHECK_VALUE(std::isfinite(options.init_std()) && options.init_std() >= 0, "[", name(),
                    "] init_std must be finite and >= 0, got ", options.init_std());
  TORCH_CHECK_VALUE(options.max_positions() <= kernels::kMaxTableValues / options.dim(), "[", name(),
                    "] max_positions x dim must be at most ", kernels::kMaxTableValues, " values, got ",
                    options.max_positions(), " x ", options.dim());
  table_ = register_parameter("table", at::empty({options.max_positions(), options.dim()}));
  reset_parameters();
}

void LearnedEncodingImpl::reset_parameters() {
  at::NoGradGuard no_grad;
  table_.normal_(0.0, options_.init_std());
}

at::Tensor LearnedEncodingImpl::encode_range(int64_t start, int64_t count, at::ScalarType compute) {
  return encode(detail::range_positions("learned", start, count), compute);
}

at::Tensor LearnedEncodingImpl::encode(const at::Tensor& positions, at::ScalarType compute) {
  return ops::learned(table_, positions).to(compute);
}

void LearnedEncodingImpl::pretty_print(std::ostream& stream) const {
  stream << "posenc::nn::LearnedEncoding(max_positions=" << options_.max_positions() << ", dim=" << options_.dim()
         << ", init_std=" << options_.init_std() << ", mode=" << input_mode_name(options_.mode()) << ")";
}

LearnableSinusoidalEncodingImpl::LearnableSinusoidalEncodingImpl(const LearnableSinusoidalEncodingOptions& options)
    : InputEncodingImpl("LearnableSinusoidalEncoding", options.dim(), options.mode()), options_(options) {
  detail::translate_errors([&] {
    kernels::validate(kernels::SinusoidalParams{options.dim(), options.base(), options.scale(), options.layout()},
                      "learnable-sinusoidal");
  });
  omega_ = register_parameter("omega", at::empty({options.dim() / 2}));
  reset_parameters();
}

void LearnableSinusoidalEncodingImpl::reset_parameters() {
  at::NoGradGuard no_grad;
  omega_.copy_(ops::sinusoidal_frequencies(options_.dim(), options_.base()));
}

at::Tensor LearnableSinusoidalEncodingImpl::encode_range(int64_t start, int64_t count, at::ScalarType compute) {
  return encode(detail::range_positions("learnable-sinusoidal", start, count), compute);
}

at::Tensor LearnableSinusoidalEncodingImpl::encode(const at::Tensor& positions, at::ScalarType compute) {
  // omega in the compute dtype first: a float64 x gets a float64 table.
  return ops::learnable_sinusoidal(positions, omega_.to(compute), {options_.layout(), options_.scale()});
}

void LearnableSinusoidalEncodingImpl::pretty_print(std::ostream& stream) const {
  stream << "posenc::nn::LearnableSinusoidalEncoding(dim=" << options_.dim() << ", base=" << options_.base()
         << ", scale=" << options_.scale() << ", layout=" << kernels::layout_name(options_.layout())
         << ", mode=" << input_mode_name(options_.mode()) << ")";
}

}  // namespace posenc::nn
