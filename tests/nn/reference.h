// Plain float64 references for the nn tests, written from the formulas in the
// kernel headers and sharing no code with posenc: long double sin/cos of
// p * base^(-2i/D), placed by layout.
#pragma once

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "posenc/kernels/sinusoidal.h"

namespace posenc::nn::test {

// [N, dim] float64: PE[k] for positions[k], frequencies omega (dim/2 values).
inline at::Tensor reference_sinusoids(const std::vector<double>& positions, const std::vector<long double>& omega,
                                      kernels::SinusoidalLayout layout, double scale = 1.0) {
  const int64_t half = static_cast<int64_t>(omega.size());
  const int64_t dim = 2 * half;
  at::Tensor out = at::zeros({static_cast<int64_t>(positions.size()), dim}, at::kDouble);
  auto a = out.accessor<double, 2>();
  for (size_t k = 0; k < positions.size(); ++k) {
    for (int64_t i = 0; i < half; ++i) {
      const long double angle = static_cast<long double>(positions[k]) * omega[i];
      const double s = static_cast<double>(scale * std::sin(angle));
      const double c = static_cast<double>(scale * std::cos(angle));
      switch (layout) {
        case kernels::SinusoidalLayout::kInterleaved: a[k][2 * i] = s; a[k][2 * i + 1] = c; break;
        case kernels::SinusoidalLayout::kHalf: a[k][i] = s; a[k][i + half] = c; break;
        case kernels::SinusoidalLayout::kCosSin: a[k][2 * i] = c; a[k][2 * i + 1] = s; break;
      }
    }
  }
  return out;
}

inline std::vector<long double> reference_frequencies(int64_t dim, double base) {
  std::vector<long double> omega;
  for (int64_t i = 0; i < dim / 2; ++i) {
    omega.push_back(std::pow(static_cast<long double>(base), -2.0L * i / dim));
  }
  return omega;
}

inline at::Tensor reference_sinusoidal(int64_t start, int64_t count, int64_t dim, double base = 10000.0,
                                       kernels::SinusoidalLayout layout = kernels::SinusoidalLayout::kInterleaved,
                                       double scale = 1.0) {
  std::vector<double> positions;
  for (int64_t k = 0; k < count; ++k) positions.push_back(static_cast<double>(start + k));
  return reference_sinusoids(positions, reference_frequencies(dim, base), layout, scale);
}

inline double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

// Runs `body` and expects a c10 error of type Error with exactly `message`
// (the text Python shows, without the C++ backtrace).
template <class Error>
void expect_error(const std::function<void()>& body, const std::string& message) {
  try {
    body();
    ADD_FAILURE() << "no exception; expected: " << message;
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what_without_backtrace()), message);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what() << "; expected: " << message;
  }
}

inline void expect_value_error(const std::function<void()>& body, const std::string& message) {
  expect_error<c10::ValueError>(body, message);
}

// out is exact rounded once to out's dtype: within half an ulp of each value
// plus `slack` for the float32 work before that rounding. A second rounding
// (the bias to bfloat16 before the sum, say) shows up as up to a full ulp.
inline void expect_rounded_once(const at::Tensor& out, const at::Tensor& exact, double slack) {
  int bits = 0;  // explicit significand bits
  switch (out.scalar_type()) {
    case at::kDouble: bits = 52; break;
    case at::kFloat: bits = 23; break;
    case at::kBFloat16: bits = 7; break;
    case at::kHalf: bits = 10; break;
    default: FAIL() << "unexpected dtype " << out.scalar_type();
  }
  // float16 subnormals (below 2^-14) keep the ulp of 2^-14.
  const double smallest = out.scalar_type() == at::kHalf ? 0x1p-14 : 1e-300;
  const at::Tensor magnitude = exact.abs().clamp_min(smallest);
  const at::Tensor half_ulp = at::exp2(at::floor(at::log2(magnitude)) - bits) * 0.5;
  const at::Tensor excess = (out.to(at::kDouble) - exact).abs() - half_ulp - slack;
  EXPECT_LE(excess.max().item<double>(), 0.0)
      << "worst at " << exact.flatten()[excess.flatten().argmax()].item<double>();
}

}  // namespace posenc::nn::test
