// Power-of-two normalisation (private to posenc::analysis). Every statistic
// here is scale-free, but its intermediate sums are not: squares of 1e200
// overflow and squares of 1e-200 underflow. Multiplying by 2^-e is exact in
// float64 (barring subnormals), so a result computed on the scaled values is
// the result for the original ones, bit for bit when no intermediate over- or
// underflowed.
#pragma once

#include <algorithm>
#include <cmath>
#include <optional>
#include <span>

#include "posenc/analysis/matrix.h"

namespace posenc::analysis::detail {

// Tables whose largest |value| has a binary exponent within +-kSafeExponent
// are used as they are: their products and sums of squares over up to 2^60
// terms stay far from overflow, and their largest terms far from underflow.
constexpr int kSafeExponent = 200;

// e with max |v| in [2^(e-1), 2^e) (std::frexp); 0 when every v is 0.
inline int largest_exponent(std::span<const double> values) noexcept {
  double largest = 0.0;
  for (double v : values) largest = std::max(largest, std::abs(v));
  int exponent = 0;
  if (largest > 0.0) std::frexp(largest, &exponent);
  return exponent;
}

// 2^-e, e = largest_exponent(values): brings the largest |value| into [0.5, 1).
inline double normalising_factor(std::span<const double> values) noexcept {
  return std::ldexp(1.0, -largest_exponent(values));
}

// A copy of m scaled into [0.5, 1) when its largest |value| lies outside
// 2^+-kSafeExponent; nullopt (use m itself) otherwise. Callers write
// `const Matrix& t = scaled ? *scaled : m;`.
inline std::optional<Matrix> normalised_if_extreme(const Matrix& m) {
  const int exponent = largest_exponent(m.values);
  if (std::abs(exponent) <= kSafeExponent) return std::nullopt;
  Matrix scaled = m;
  for (double& v : scaled.values) v = std::ldexp(v, -exponent);
  return scaled;
}

}  // namespace posenc::analysis::detail
