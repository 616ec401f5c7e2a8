#include <gtest/gtest.h>

#include <vector>

#include "check.h"
#include "posenc/kernels/reference.h"
#include "posenc/kernels/translation.h"

namespace posenc::kernels {
namespace {

std::vector<double> matmul(const std::vector<double>& a, const std::vector<double>& b, int64_t n, int64_t m) {
  // a: n x n, b: n x m
  std::vector<double> c(static_cast<size_t>(n * m), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < n; ++k)
      for (int64_t j = 0; j < m; ++j) c[i * m + j] += a[i * n + k] * b[k * m + j];
  return c;
}

std::vector<double> transpose(const std::vector<double>& a, int64_t rows, int64_t cols) {
  std::vector<double> t(a.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) t[c * rows + r] = a[r * cols + c];
  return t;
}

TEST(Translation, MovesEveryPositionByDelta) {
  const int64_t dim = 64;
  for (auto layout : {SinusoidalLayout::kInterleaved, SinusoidalLayout::kHalf, SinusoidalLayout::kCosSin}) {
    for (double delta : {1.0, -5.0, 37.0, 1000.0}) {
      const SinusoidalParams params{dim, 10000.0, 1.0, layout, Precision::kExact};
      std::vector<double> t(dim * dim);
      translation_matrix(params, delta, t);
      std::vector<double> p = {0, 3, 100, 4096}, shifted;
      for (double v : p) shifted.push_back(v + delta);
      // columns are positions: PE^T is dim x 4
      const auto pe = transpose(reference::sinusoidal(p, dim, 10000.0, 1.0, layout), 4, dim);
      const auto want = transpose(reference::sinusoidal(shifted, dim, 10000.0, 1.0, layout), 4, dim);
      EXPECT_LE(test::max_abs_diff(matmul(t, pe, dim, 4), want), 1e-12) << layout_name(layout) << " " << delta;
    }
  }
}

TEST(Translation, ComposesAdditively) {
  const int64_t dim = 32;
  const SinusoidalParams params{dim, 10000.0, 1.0, SinusoidalLayout::kHalf, Precision::kExact};
  std::vector<double> ta(dim * dim), tb(dim * dim), tab(dim * dim), t0(dim * dim);
  translation_matrix(params, 7.0, ta);
  translation_matrix(params, -19.5, tb);
  translation_matrix(params, 7.0 - 19.5, tab);
  EXPECT_LE(test::max_abs_diff(matmul(ta, tb, dim, dim), tab), 1e-14);
  // T(0) is the identity and T(-a) the inverse (transpose) of T(a).
  translation_matrix(params, 0.0, t0);
  for (int64_t i = 0; i < dim; ++i)
    for (int64_t j = 0; j < dim; ++j) EXPECT_EQ(t0[i * dim + j], i == j ? 1.0 : 0.0);
  std::vector<double> tneg(dim * dim);
  translation_matrix(params, -7.0, tneg);
  EXPECT_LE(test::max_abs_diff(tneg, transpose(ta, dim, dim)), 1e-15);
}

TEST(Translation, Errors) {
  std::vector<double> t(9);
  test::expect_error([&] { translation_matrix({3}, 1.0, t); }, "[translation] dim must be even, got 3");
  test::expect_error([&] { translation_matrix({4}, 1.0, t); },
                     "[translation] out must hold dim x dim = 16 values, got 9");
  test::expect_error([&] { translation_matrix({46342}, 1.0, t); },
                     "[translation] dim must be at most 46340 (a dense dim x dim matrix), got 46342");
}

}  // namespace
}  // namespace posenc::kernels
