// Learned absolute encoding (BERT, GPT-2): a trainable table of
// max_positions x dim rows, pe[p] = table[p], initialised N(0, init_std^2)
// (BERT: 0.02) from torch's default generator (torch::manual_seed sets it).
// A position outside the table throws "[learned] position P is outside the
// table of R rows (valid 0..R-1)".
#pragma once

#include <torch/arg.h>

#include <cstdint>
#include <ostream>

#include "posenc/nn/family_module.h"

namespace posenc::nn {

struct LearnedEncodingOptions {
  LearnedEncodingOptions(int64_t max_positions, int64_t dim) : max_positions_(max_positions), dim_(dim) {}
  TORCH_ARG(int64_t, max_positions);  // rows of the table
  TORCH_ARG(int64_t, dim);
  TORCH_ARG(double, init_std) = 0.02;
  TORCH_ARG(InputMode, mode) = InputMode::kAdd;
};

// The front end of the LearnedEncoding contract (src/nn/families/learned.cpp); reset_parameters()
// draws the table again from N(0, init_std^2).
class LearnedEncodingImpl : public FamilyInputImpl {
 public:
  explicit LearnedEncodingImpl(const LearnedEncodingOptions& options);

  void pretty_print(std::ostream& stream) const override;

  const LearnedEncodingOptions& options() const noexcept { return options_; }
  // (max_positions, dim), a registered parameter named "table".
  const at::Tensor& table() const { return tensor("table"); }

 private:
  LearnedEncodingOptions options_;
};

TORCH_MODULE(LearnedEncoding);

}  // namespace posenc::nn
