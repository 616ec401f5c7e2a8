// Learned absolute encoding (BERT, GPT-2): a trainable table of
// max_positions x dim rows, pe[p] = table[p], initialised N(0, init_std^2)
// (BERT: 0.02) from torch's default generator (torch::manual_seed sets it).
// A position outside the table throws "[learned] position P is outside the
// table of R rows (valid 0..R-1)".
#pragma once

#include <torch/arg.h>

#include <cstdint>
#include <ostream>

#include "posenc/nn/input_encoding.h"

namespace posenc::nn {

struct LearnedEncodingOptions {
  LearnedEncodingOptions(int64_t max_positions, int64_t dim) : max_positions_(max_positions), dim_(dim) {}
  TORCH_ARG(int64_t, max_positions);  // rows of the table
  TORCH_ARG(int64_t, dim);
  TORCH_ARG(double, init_std) = 0.02;
  TORCH_ARG(InputMode, mode) = InputMode::kAdd;
};

class LearnedEncodingImpl : public InputEncodingImpl {
 public:
  explicit LearnedEncodingImpl(const LearnedEncodingOptions& options);

  // Draws the table again from N(0, init_std^2).
  void reset_parameters();
  at::Tensor encode_range(int64_t start, int64_t count, at::ScalarType compute) override;
  at::Tensor encode(const at::Tensor& positions, at::ScalarType compute) override;
  void pretty_print(std::ostream& stream) const override;

  const LearnedEncodingOptions& options() const noexcept { return options_; }
  // (max_positions, dim), a registered parameter named "table".
  const at::Tensor& table() const noexcept { return table_; }

 private:
  LearnedEncodingOptions options_;
  at::Tensor table_;
};

TORCH_MODULE(LearnedEncoding);

}  // namespace posenc::nn
