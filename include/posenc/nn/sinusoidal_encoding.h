// Fixed sinusoidal encoding at the input (Vaswani et al. 2017):
// pe[p] = the row p of posenc::kernels::sinusoidal_table (kernels/sinusoidal.h),
// added to or concatenated with the token embeddings (input_encoding.h).
#pragma once

#include <torch/arg.h>

#include <cstdint>
#include <ostream>

#include "posenc/kernels/sinusoidal.h"
#include "posenc/nn/family_module.h"

namespace posenc::nn {

struct SinusoidalEncodingOptions {
  /* implicit */ SinusoidalEncodingOptions(int64_t dim) : dim_(dim) {}
  TORCH_ARG(int64_t, dim);  // even
  TORCH_ARG(double, base) = 10000.0;
  TORCH_ARG(double, scale) = 1.0;  // amplitude
  TORCH_ARG(kernels::SinusoidalLayout, layout) = kernels::SinusoidalLayout::kInterleaved;
  TORCH_ARG(kernels::Precision, precision) = kernels::Precision::kExact;
  TORCH_ARG(InputMode, mode) = InputMode::kAdd;
};

// The front end of the SinusoidalEncoding contract (src/nn/families/sinusoidal.cpp).
class SinusoidalEncodingImpl : public FamilyInputImpl {
 public:
  // Throws c10::ValueError on bad options ("[sinusoidal] dim must be even, got 7").
  explicit SinusoidalEncodingImpl(const SinusoidalEncodingOptions& options);

  void pretty_print(std::ostream& stream) const override;

  const SinusoidalEncodingOptions& options() const noexcept { return options_; }

 private:
  SinusoidalEncodingOptions options_;
};

TORCH_MODULE(SinusoidalEncoding);

}  // namespace posenc::nn
