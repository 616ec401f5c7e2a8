// Sinusoids with learnable frequencies (Wang et al., ICLR 2021, "On Position
// Embeddings in BERT"): the sinusoidal encoding with omega, dim/2 values, a
// trainable parameter initialised to the fixed frequencies base^(-2i/dim).
#pragma once

#include <torch/arg.h>

#include <cstdint>
#include <ostream>

#include "posenc/kernels/sinusoidal.h"
#include "posenc/nn/input_encoding.h"

namespace posenc::nn {

struct LearnableSinusoidalEncodingOptions {
  /* implicit */ LearnableSinusoidalEncodingOptions(int64_t dim) : dim_(dim) {}
  TORCH_ARG(int64_t, dim);  // even
  TORCH_ARG(double, base) = 10000.0;  // initial frequencies only
  TORCH_ARG(double, scale) = 1.0;     // amplitude
  TORCH_ARG(kernels::SinusoidalLayout, layout) = kernels::SinusoidalLayout::kInterleaved;
  TORCH_ARG(InputMode, mode) = InputMode::kAdd;
};

class LearnableSinusoidalEncodingImpl : public InputEncodingImpl {
 public:
  explicit LearnableSinusoidalEncodingImpl(const LearnableSinusoidalEncodingOptions& options);

  // Sets omega back to base^(-2i/dim).
  void reset_parameters();
  at::Tensor encode_range(int64_t start, int64_t count, at::ScalarType compute) override;
  at::Tensor encode(const at::Tensor& positions, at::ScalarType compute) override;
  void pretty_print(std::ostream& stream) const override;

  const LearnableSinusoidalEncodingOptions& options() const noexcept { return options_; }
  // (dim/2), float32, a registered parameter named "omega".
  const at::Tensor& omega() const noexcept { return omega_; }

 private:
  LearnableSinusoidalEncodingOptions options_;
  at::Tensor omega_;
};

TORCH_MODULE(LearnableSinusoidalEncoding);

}  // namespace posenc::nn
