// Shared helpers for the posenc::analysis tests: tables, exact-message checks,
// and the documented fold rule re-implemented plainly (docs/analysis.md).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "check.h"  // tests/kernels
#include "posenc/analysis/matrix.h"
#include "posenc/kernels/sinusoidal.h"

namespace posenc::analysis::test {

using posenc::test::expect_error;  // tests/kernels/check.h

// N(0, sigma^2) entries (a learned table at its initialisation).
inline Matrix random_table(int64_t rows, int64_t cols, uint64_t seed, double sigma = 1.0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, sigma);
  Matrix m(rows, cols);
  for (double& v : m.values) v = normal(rng);
  return m;
}

// The float64 sinusoidal table of posenc::kernels.
inline Matrix sinusoidal_table(int64_t rows, int64_t dim,
                               kernels::SinusoidalLayout layout = kernels::SinusoidalLayout::kInterleaved) {
  kernels::SinusoidalParams params;
  params.dim = dim;
  params.layout = layout;
  Matrix m(rows, dim);
  kernels::sinusoidal_table<double>(params, kernels::Positions::range(0, rows), m.values);
  return m;
}

// S[x, y] = t(y - x), t given on offsets -(n-1) .. n-1.
inline Matrix toeplitz(int64_t n, const std::function<double(int64_t)>& t) {
  Matrix m(n, n);
  for (int64_t x = 0; x < n; ++x)
    for (int64_t y = 0; y < n; ++y) m(x, y) = t(y - x);
  return m;
}

// The fold rule of docs/analysis.md, written out again: Fisher-Yates over
// 0 .. count-1 with mt19937_64(seed), j drawn by rejection of r < 2^64 mod
// bound; the t-th shuffled item goes to fold t mod folds.
inline std::vector<int64_t> documented_folds(int64_t count, int64_t folds, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto below = [&rng](uint64_t bound) {
    const uint64_t reject_under = (~bound + 1) % bound;  // 2^64 mod bound
    uint64_t r = rng();
    while (r < reject_under) r = rng();
    return r % bound;
  };
  std::vector<int64_t> items;
  for (int64_t i = 0; i < count; ++i) items.push_back(i);
  for (int64_t i = count - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(below(static_cast<uint64_t>(i) + 1));
    const int64_t keep = items[i];
    items[i] = items[j];
    items[j] = keep;
  }
  std::vector<int64_t> fold(static_cast<size_t>(count));
  for (int64_t t = 0; t < count; ++t) fold[items[t]] = t % folds;
  return fold;
}

// Solves a x = b (a [n, n], b [n, m]) by Gaussian elimination with partial pivoting.
inline std::vector<long double> solve(std::vector<long double> a, std::vector<long double> b, int64_t n, int64_t m) {
  for (int64_t c = 0; c < n; ++c) {
    int64_t pivot = c;
    for (int64_t r = c + 1; r < n; ++r)
      if (std::abs(a[r * n + c]) > std::abs(a[pivot * n + c])) pivot = r;
    for (int64_t k = 0; k < n; ++k) std::swap(a[c * n + k], a[pivot * n + k]);
    for (int64_t k = 0; k < m; ++k) std::swap(b[c * m + k], b[pivot * m + k]);
    for (int64_t r = c + 1; r < n; ++r) {
      const long double f = a[r * n + c] / a[c * n + c];
      for (int64_t k = c; k < n; ++k) a[r * n + k] -= f * a[c * n + k];
      for (int64_t k = 0; k < m; ++k) b[r * m + k] -= f * b[c * m + k];
    }
  }
  for (int64_t c = n - 1; c >= 0; --c) {
    for (int64_t k = 0; k < m; ++k) {
      long double v = b[c * m + k];
      for (int64_t j = c + 1; j < n; ++j) v -= a[c * n + j] * b[j * m + k];
      b[c * m + k] = v / a[c * n + c];
    }
  }
  return b;
}

}  // namespace posenc::analysis::test
