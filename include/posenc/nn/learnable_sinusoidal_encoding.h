// Sinusoids with learnable frequencies (Wang et al., ICLR 2021, "On Position
// Embeddings in BERT"): the sinusoidal encoding with omega, dim/2 values, a
// trainable parameter initialised to the fixed frequencies base^(-2i/dim).
#pragma once

#include <torch/arg.h>

#include <cstdint>
#include <ostream>

#include "posenc/kernels/sinusoidal.h"
#include "posenc/nn/family_module.h"

namespace posenc::nn {

struct LearnableSinusoidalEncodingOptions {
  /* implicit */ LearnableSinusoidalEncodingOptions(int64_t dim) : dim_(dim) {}
  TORCH_ARG(int64_t, dim);  // even
  TORCH_ARG(double, base) = 10000.0;  // initial frequencies only
  TORCH_ARG(double, scale) = 1.0;     // amplitude
  TORCH_ARG(kernels::SinusoidalLayout, layout) = kernels::SinusoidalLayout::kInterleaved;
  TORCH_ARG(InputMode, mode) = InputMode::kAdd;
};

// The front end of the LearnableSinusoidalEncoding contract (src/nn/families/learned.cpp);
// reset_parameters() sets omega back to base^(-2i/dim).
class LearnableSinusoidalEncodingImpl : public FamilyInputImpl {
 public:
  explicit LearnableSinusoidalEncodingImpl(const LearnableSinusoidalEncodingOptions& options);

  void pretty_print(std::ostream& stream) const override;

  const LearnableSinusoidalEncodingOptions& options() const noexcept { return options_; }
  // (dim/2), float32, a registered parameter named "omega".
  const at::Tensor& omega() const { return tensor("omega"); }

 private:
  LearnableSinusoidalEncodingOptions options_;
};

TORCH_MODULE(LearnableSinusoidalEncoding);

}  // namespace posenc::nn
