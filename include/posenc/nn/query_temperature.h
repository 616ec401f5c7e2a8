// Query temperature by position, at the query/key point: Llama 4's NoPE
// layers (attn_temperature_tuning), after Nakanishi 2025's scalable softmax.
// forward(q, positions) multiplies the query at absolute position p (from 0)
// by s(p) = log(floor((p + 1) / floor_scale) + 1) * attn_scale + 1: 1 for
// p < floor_scale - 1, then growing with the log of the position, so that
// attention over a longer context does not flatten. Scales are formed in
// float64 (exact below 2^53), the product in q's compute dtype. A typed front
// end of the family on the contract (src/nn/families/query_temperature.cpp).
#pragma once

#include <ATen/ATen.h>
#include <torch/arg.h>
#include <torch/nn/pimpl.h>

#include "posenc/nn/family_module.h"

namespace posenc::nn {

struct QueryTemperatureOptions {
  TORCH_ARG(double, floor_scale) = 8192.0;  // > 0
  TORCH_ARG(double, attn_scale) = 0.1;      // finite
};

class QueryTemperatureImpl : public FamilyTransformImpl {
 public:
  explicit QueryTemperatureImpl(const QueryTemperatureOptions& options = {});
  // q (..., T, D); positions integer (T), or (B, T) when q is (B, H, T, D), each >= 0.
  at::Tensor forward(const at::Tensor& q, const at::Tensor& positions);
  // s(p) for every position: positions' shape, float64 (or `dtype`).
  at::Tensor scales(const at::Tensor& positions, at::ScalarType dtype = at::kDouble) const;
  const QueryTemperatureOptions& options() const noexcept { return options_; }

 private:
  QueryTemperatureOptions options_;
};

TORCH_MODULE(QueryTemperature);

}  // namespace posenc::nn
