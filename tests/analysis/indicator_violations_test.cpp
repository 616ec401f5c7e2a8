// The violation-style indicators (indicators.h): monotonicity_violation_rate
// and within_diagonal_variance_share, against plain long-double references
// written from the header's definitions, and their properties.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "analysis_test_support.h"
#include "posenc/analysis/indicators.h"
#include "posenc/analysis/proximity.h"

namespace posenc::analysis {
namespace {

using Real = long double;

// ---- independent references ---------------------------------------------------

// Every pair m < m' of offsets first .. W in each row and direction, compared
// directly: O(n W^2). first = 0 also ranks the diagonal (a deliberately wrong
// variant, to show the random-table check can fail).
Real reference_violation_rate(const Matrix& s, int64_t w, int64_t first = 1) {
  const int64_t n = s.rows;
  Real violated = 0;
  int64_t pairs = 0;
  for (int64_t x = 0; x < n; ++x) {
    for (int64_t sign : {1, -1}) {
      std::vector<Real> v;
      for (int64_t m = first; m <= w && x + sign * m >= 0 && x + sign * m < n; ++m) v.push_back(s(x, x + sign * m));
      for (size_t a = 0; a < v.size(); ++a)
        for (size_t b = a + 1; b < v.size(); ++b) {
          violated += v[b] > v[a] ? 1 : v[b] == v[a] ? Real(0.5) : 0;
          ++pairs;
        }
    }
  }
  return pairs == 0 ? Real(0.5) : violated / pairs;  // no pair: 0.5 by the header's rule
}

// sum over offsets of the within-diagonal sum of squares / total sum of squares over the band.
Real reference_variance_share(const Matrix& s, int64_t w) {
  const int64_t n = s.rows;
  Real grand = 0, within = 0, total = 0;
  int64_t count = 0;
  std::vector<std::vector<Real>> diagonals;
  for (int64_t d = -w; d <= w; ++d) {
    if (d == 0) continue;
    std::vector<Real> values;
    for (int64_t x = 0; x < n; ++x)
      if (x + d >= 0 && x + d < n) values.push_back(s(x, x + d));
    for (Real v : values) grand += v, ++count;
    diagonals.push_back(std::move(values));
  }
  grand /= count;
  for (const std::vector<Real>& values : diagonals) {
    Real mean = 0;
    for (Real v : values) mean += v;
    mean /= static_cast<Real>(values.size());
    for (Real v : values) within += (v - mean) * (v - mean), total += (v - grand) * (v - grand);
  }
  return within / total;
}

std::pair<double, double> mean_and_standard_error(const std::vector<double>& v) {
  double mean = 0, var = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  for (double x : v) var += (x - mean) * (x - mean);
  var /= static_cast<double>(v.size() - 1);  // sample variance of one table's value
  return {mean, std::sqrt(var / static_cast<double>(v.size()))};
}

// ---- against the references ------------------------------------------------

TEST(IndicatorViolations, MatchThePlainReference) {
  std::mt19937_64 rng(23);
  for (int64_t n : {2, 3, 5, 17, 40}) {
    Matrix grid(n, n);
    std::uniform_int_distribution<int> level(-3, 3);  // a coarse grid: many ties
    for (double& v : grid.values) v = 0.5 * level(rng);
    const Matrix gaussian = test::random_table(n, n, 300 + n);
    for (const Matrix* s : {static_cast<const Matrix*>(&grid), &gaussian}) {
      for (int64_t w : {int64_t{1}, int64_t{2}, (n + 1) / 2, n - 1}) {
        if (w < 1 || w > n - 1 || constant_on_band(*s, w)) continue;
        const Indicators got = indicators(*s, w);
        // Both count the same integers; the rate is one quotient (float64 vs long double: 1 ulp).
        EXPECT_NEAR(got.monotonicity_violation_rate, static_cast<double>(reference_violation_rate(*s, w)), 1e-15)
            << "n=" << n << " W=" << w;
        // float64 sums of <= 1600 squares against long double: ~1e-15 relative.
        EXPECT_NEAR(got.within_diagonal_variance_share, static_cast<double>(reference_variance_share(*s, w)), 1e-12)
            << "n=" << n << " W=" << w;
      }
    }
  }
}

TEST(IndicatorViolations, HandCountedRows) {
  // n = 4, W = 3. Forward rows: x = 0 sees (S01, S02, S03) = (3, 1, 2): pairs (3,1) ok, (3,2) ok, (1,2) rises;
  // x = 1 sees (S12, S13) = (2, 2): a tie. Backward: x = 3 sees (S32, S31, S30) = (1, 1, 4): tie, rise, rise;
  // x = 2 sees (S21, S20) = (5, 0): ok. Violations 1 + 0.5 + 2.5 + 0 = 4 of 3 + 1 + 3 + 1 = 8 pairs.
  Matrix s(4, 4);
  s(0, 1) = 3, s(0, 2) = 1, s(0, 3) = 2, s(1, 2) = 2, s(1, 3) = 2;
  s(3, 2) = 1, s(3, 1) = 1, s(3, 0) = 4, s(2, 1) = 5, s(2, 0) = 0;
  EXPECT_EQ(indicators(s).monotonicity_violation_rate, 0.5);
  s(3, 0) = 0;  // x = 3 backward now (1, 1, 0): tie, ok, ok: 1 + 0.5 + 0.5 = 2 of 8
  EXPECT_EQ(indicators(s).monotonicity_violation_rate, 0.25);
  // W = 1 (or n = 2): one offset per sequence, no pair: 0.5, as monotonicity reads 0.
  EXPECT_EQ(indicators(s, 1).monotonicity_violation_rate, 0.5);
  EXPECT_EQ(indicators(s, 1).monotonicity, 0.0);
}

// ---- properties ----------------------------------------------------------------

TEST(IndicatorViolations, ToeplitzMatrices) {
  // Falls strictly with |m|: no pair inverted; constant diagonals: no within-diagonal spread.
  const Matrix falling = test::toeplitz(50, [](int64_t m) { return std::exp(-0.2 * std::abs(static_cast<double>(m))); });
  const Indicators f = indicators(falling);
  EXPECT_EQ(f.monotonicity_violation_rate, 0.0);
  EXPECT_EQ(f.within_diagonal_variance_share, 0.0);  // every diagonal is one value: sums shifted by it are 0
  EXPECT_EQ(f.translation_invariance, 1.0);
  // Rises strictly with |m|: every pair inverted. Still Toeplitz, and any window keeps it so.
  const Matrix rising = test::toeplitz(50, [](int64_t m) { return std::sqrt(std::abs(static_cast<double>(m))); });
  for (int64_t w : {2, 7, 49}) {
    EXPECT_EQ(indicators(rising, w).monotonicity_violation_rate, 1.0) << w;
    EXPECT_EQ(indicators(rising, w).within_diagonal_variance_share, 0.0) << w;
  }
}

TEST(IndicatorViolations, EqualDiagonalMeansGiveShareOne) {
  // A random matrix with each diagonal's mean replaced by the same constant:
  // the offset explains nothing, all the band's variance lies within diagonals.
  const int64_t n = 30;
  Matrix s = test::random_table(n, n, 8);
  for (int64_t d = -(n - 1); d <= n - 1; ++d) {
    double mean = 0;
    int64_t count = 0;
    for (int64_t x = std::max<int64_t>(0, -d); x < std::min(n, n - d); ++x) mean += s(x, x + d), ++count;
    mean /= static_cast<double>(count);
    for (int64_t x = std::max<int64_t>(0, -d); x < std::min(n, n - d); ++x) s(x, x + d) += 2.0 - mean;
  }
  const Indicators got = indicators(s);
  // Diagonal means equal 2 up to float64 round-off (~1e-16 each) against a spread of ~1.
  EXPECT_NEAR(got.within_diagonal_variance_share, 1.0, 1e-12);
  EXPECT_NEAR(got.translation_invariance, 0.0, 1e-12);
}

TEST(IndicatorViolations, ShareIsOneMinusTranslationInvariance) {
  for (uint64_t seed : {1, 2, 3}) {
    const Matrix s = proximity(test::random_table(60, 16, seed), ProximityKind::kDot);
    for (int64_t w : {3, 20, 59}) {
      const Indicators got = indicators(s, w);
      EXPECT_NEAR(got.within_diagonal_variance_share, 1.0 - got.translation_invariance, 1e-15) << seed << " " << w;
    }
  }
}

TEST(IndicatorViolations, SinusoidHasFewViolationsAndNoWithinDiagonalVariance) {
  // S[i, j] = sum_k cos((i - j) w_k) falls with |i - j|, with ripples at far
  // offsets: some pairs invert. Measured here: dot and cosine 0.1314 (256 x 128),
  // 0.0291 (512 x 768); a random table reads 0.5. Its diagonals are constant up
  // to float64 round-off: measured share ~3e-30, which 1 - TI would print as 0.
  for (auto [n, d] : {std::pair<int64_t, int64_t>{256, 128}, {512, 768}}) {
    const Matrix table = test::sinusoidal_table(n, d);
    for (ProximityKind kind : {ProximityKind::kDot, ProximityKind::kCosine}) {
      const Indicators got = indicators(proximity(table, kind));
      EXPECT_LT(got.monotonicity_violation_rate, n == 256 ? 0.15 : 0.04)
          << n << " x " << d << " " << proximity_kind_name(kind);
      EXPECT_LT(got.within_diagonal_variance_share, 1e-20) << n << " x " << d << " " << proximity_kind_name(kind);
    }
  }
}

TEST(IndicatorViolations, RandomTablesReadOneHalf) {
  // i.i.d. N(0, 1) tables, N = 128, D = 64: the entries S[x, x + s m], m >= 1, of
  // a row are exchangeable, so each pair is inverted with probability 1/2. Over
  // 20 tables the mean must lie within 3 standard errors (of the 20 values) of 0.5.
  // Measured: dot and cosine 0.5008 +- 0.0007 (mean +- SE). Ranking the diagonal
  // too (m = 0 tops its row: never inverted) reads 0.4892 +- 0.0007, ~15 SE off:
  // the check can fail.
  constexpr int kTables = 20;
  for (ProximityKind kind : {ProximityKind::kDot, ProximityKind::kCosine}) {
    std::vector<double> now, with_diagonal;
    for (int seed = 0; seed < kTables; ++seed) {
      const Matrix s = proximity(test::random_table(128, 64, 500 + seed), kind);
      now.push_back(indicators(s).monotonicity_violation_rate);
      with_diagonal.push_back(static_cast<double>(reference_violation_rate(s, 127, 0)));
    }
    const auto [mean, se] = mean_and_standard_error(now);
    const auto [wrong_mean, wrong_se] = mean_and_standard_error(with_diagonal);
    EXPECT_LT(std::abs(mean - 0.5), 3 * se) << proximity_kind_name(kind) << ": " << mean << " +- " << se;
    EXPECT_GT(std::abs(wrong_mean - 0.5), 3 * wrong_se)
        << proximity_kind_name(kind) << ": " << wrong_mean << " +- " << wrong_se;
  }
}

TEST(IndicatorViolations, DoNotDependOnScaleOrThreads) {
  const Matrix base = proximity(test::random_table(40, 8, 21), ProximityKind::kDot);
  const Indicators want = indicators(base, 20);
  for (double scale : {1e160, 1e-200, 0x1p-900}) {
    Matrix s = base;
    for (double& v : s.values) v *= scale;
    const Indicators got = indicators(s, 20);
    // Comparisons only: scaling (1 ulp per value) keeps every order unless two values were within 1 ulp.
    EXPECT_EQ(got.monotonicity_violation_rate, want.monotonicity_violation_rate) << scale;
    EXPECT_NEAR(got.within_diagonal_variance_share, want.within_diagonal_variance_share, 1e-12) << scale;
  }
  const Matrix s = test::random_table(200, 200, 12);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const Indicators one = indicators(s, 50);
  omp_set_num_threads(3);
  const Indicators three = indicators(s, 50);
  omp_set_num_threads(saved);
  EXPECT_EQ(one.monotonicity_violation_rate, three.monotonicity_violation_rate);
  EXPECT_EQ(one.within_diagonal_variance_share, three.within_diagonal_variance_share);
}

}  // namespace
}  // namespace posenc::analysis
