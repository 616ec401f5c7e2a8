#include "posenc/analysis/proximity.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <vector>

#include "analysis_test_support.h"

namespace posenc::analysis {
namespace {

using test::expect_error;

// Plain reference: every entry a long double sum.
std::vector<long double> reference_dot(const Matrix& t) {
  std::vector<long double> s(static_cast<size_t>(t.rows * t.rows));
  for (int64_t i = 0; i < t.rows; ++i)
    for (int64_t j = 0; j < t.rows; ++j) {
      long double sum = 0;
      for (int64_t k = 0; k < t.cols; ++k) sum += static_cast<long double>(t(i, k)) * t(j, k);
      s[i * t.rows + j] = sum;
    }
  return s;
}

long double row_norm(const Matrix& t, int64_t i) {
  long double sum = 0;
  for (int64_t k = 0; k < t.cols; ++k) sum += static_cast<long double>(t(i, k)) * t(i, k);
  return std::sqrt(sum);
}

TEST(Proximity, DotMatchesAPlainLongDoubleSum) {
  // Odd shapes leave partial register tiles on both sides; 130 x 70 spans several tiles and threads.
  for (auto [n, d] : {std::pair<int64_t, int64_t>{1, 1}, {37, 19}, {130, 70}, {9, 300}}) {
    const Matrix t = test::random_table(n, d, 11 + n);
    const Matrix s = proximity(t, ProximityKind::kDot);
    ASSERT_EQ(s.rows, n);
    ASSERT_EQ(s.cols, n);
    const auto ref = reference_dot(t);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        // d products in float64: each within d * 2^-53 |PE[i]| |PE[j]| of the exact sum.
        const double bound = 1e-15 * static_cast<double>(d) * static_cast<double>(row_norm(t, i) * row_norm(t, j));
        EXPECT_NEAR(s(i, j), static_cast<double>(ref[i * n + j]), bound) << n << "x" << d << " at " << i << "," << j;
      }
  }
}

TEST(Proximity, IsExactlySymmetric) {
  const Matrix t = test::random_table(77, 45, 3);
  for (ProximityKind kind : {ProximityKind::kDot, ProximityKind::kCosine}) {
    const Matrix s = proximity(t, kind);
    for (int64_t i = 0; i < s.rows; ++i)
      for (int64_t j = 0; j < i; ++j) ASSERT_EQ(s(i, j), s(j, i)) << i << "," << j;
  }
}

TEST(Proximity, CosineNormalizesAndZeroRowsGiveZero) {
  Matrix t = test::random_table(20, 7, 5);
  for (int64_t k = 0; k < t.cols; ++k) t(4, k) = 0.0;
  const Matrix s = proximity(t, ProximityKind::kCosine);
  const auto dot = reference_dot(t);
  for (int64_t i = 0; i < t.rows; ++i)
    for (int64_t j = 0; j < t.rows; ++j) {
      const long double denom = row_norm(t, i) * row_norm(t, j);
      const double want = denom == 0 ? 0.0 : static_cast<double>(dot[i * t.rows + j] / denom);
      EXPECT_NEAR(s(i, j), want, 1e-15) << i << "," << j;  // a few float64 roundings of a value in [-1, 1]
    }
  EXPECT_EQ(s(4, 4), 0.0);
}

TEST(Proximity, CosineDoesNotDependOnScaleEvenNearOverflow) {
  const Matrix t = test::random_table(16, 12, 8);
  const Matrix base = proximity(t, ProximityKind::kCosine);
  for (double scale : {1e200, 1e-200, 3.0}) {
    Matrix scaled = t;
    for (double& v : scaled.values) v *= scale;
    const Matrix s = proximity(scaled, ProximityKind::kCosine);
    for (size_t k = 0; k < s.values.size(); ++k) {
      ASSERT_TRUE(std::isfinite(s.values[k]));
      EXPECT_NEAR(s.values[k], base.values[k], 1e-15) << scale;  // scaling rounds each value once
    }
  }
}

TEST(Proximity, DotAtExtremeScalesIsTheScaledDot) {
  // Products of 1e-100s are 1e-200: each one used to be rounded where it was
  // formed; now the sums run on the table scaled by a power of two and S is
  // scaled back once, so S(c PE) = c^2 S(PE) up to the rounding of c PE itself.
  const Matrix t = test::random_table(12, 9, 6);
  const auto dot = reference_dot(t);
  for (double scale : {1e-100, 1e80, 1e150}) {
    Matrix scaled = t;
    for (double& v : scaled.values) v *= scale;
    const Matrix s = proximity(scaled, ProximityKind::kDot);
    for (int64_t k = 0; k < t.rows * t.rows; ++k) {
      const long double want = dot[k] * static_cast<long double>(scale) * static_cast<long double>(scale);
      // 9 terms of ~1 with 1-ulp inputs: ~1e-15 of the largest |S| (~20).
      EXPECT_NEAR(s.values[k] / (scale * scale), static_cast<double>(want / scale / scale), 1e-13) << scale;
    }
  }
  Matrix huge = t;
  for (double& v : huge.values) v *= 1e300;
  std::ostringstream largest;
  largest.precision(17);
  double biggest = 0.0;
  for (double v : huge.values) biggest = std::max(biggest, std::abs(v));
  largest << biggest;
  expect_error([&] { proximity(huge, ProximityKind::kDot); },
               "[proximity] dot proximity must fit in float64, got products beyond 1.8e308 for a table whose largest "
               "|value| is " + largest.str() + " (use cosine proximity, which does not depend on scale)");
  EXPECT_NO_THROW(proximity(huge, ProximityKind::kCosine));
}

TEST(Proximity, SameBitsForAnyNumberOfThreads) {
  const Matrix t = test::random_table(150, 90, 21);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const Matrix one = proximity(t, ProximityKind::kDot);
  omp_set_num_threads(3);
  const Matrix three = proximity(t, ProximityKind::kDot);
  omp_set_num_threads(saved);
  EXPECT_EQ(one.values, three.values);
}

TEST(Proximity, KindNamesAndErrors) {
  EXPECT_EQ(parse_proximity_kind("dot"), ProximityKind::kDot);
  EXPECT_EQ(parse_proximity_kind("cosine"), ProximityKind::kCosine);
  EXPECT_EQ(proximity_kind_name(ProximityKind::kDot), "dot");
  EXPECT_EQ(proximity_kind_name(ProximityKind::kCosine), "cosine");
  expect_error([] { parse_proximity_kind("x"); }, "[proximity] kind must be dot or cosine, got 'x'");
  expect_error([] { proximity(Matrix(0, 4), ProximityKind::kDot); },
               "[proximity] table must have at least 1 row and 1 column, got 0 x 4");
  Matrix bad(4, 8);
  bad(3, 7) = std::nan("");
  expect_error([&] { proximity(bad, ProximityKind::kCosine); },
               "[proximity] table has a non-finite value at (3, 7): nan");
  Matrix short_values(3, 4);
  short_values.values.resize(11);
  expect_error([&] { proximity(short_values, ProximityKind::kDot); },
               "[proximity] table holds 11 values, rows * cols = 12");
}

}  // namespace
}  // namespace posenc::analysis
