#include "posenc/analysis/indicators.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "analysis_test_support.h"
#include "posenc/analysis/proximity.h"

namespace posenc::analysis {
namespace {

using test::expect_error;
using Real = long double;

// ---- independent references, written from the header's definitions --------

// Spearman's rho by explicit ranks: rank = 1 + #smaller + (#equal - 1) / 2.
Real spearman(const std::vector<Real>& v) {
  const auto n = static_cast<int64_t>(v.size());
  std::vector<Real> rank(v.size());
  for (int64_t i = 0; i < n; ++i) {
    int64_t smaller = 0, equal = 0;
    for (int64_t j = 0; j < n; ++j) {
      smaller += v[j] < v[i];
      equal += v[j] == v[i];
    }
    rank[i] = 1 + smaller + (equal - 1) / Real(2);
  }
  Real mean_m = 0, mean_r = 0;
  for (int64_t i = 0; i < n; ++i) mean_m += i, mean_r += rank[i];
  mean_m /= n, mean_r /= n;
  Real cov = 0, var_m = 0, var_r = 0;
  for (int64_t i = 0; i < n; ++i) {
    cov += (i - mean_m) * (rank[i] - mean_r);
    var_m += (i - mean_m) * (i - mean_m);
    var_r += (rank[i] - mean_r) * (rank[i] - mean_r);
  }
  return var_r == 0 ? 0 : cov / std::sqrt(var_m * var_r);
}

// Offsets m = first .. W; first = 0 is the old definition, which ranked the diagonal too.
Real reference_monotonicity(const Matrix& s, int64_t w, int64_t first = 1) {
  const int64_t n = s.rows;
  Real sum = 0;
  int64_t count = 0;
  for (int64_t x = 0; x < n; ++x) {
    for (int64_t sign : {1, -1}) {
      std::vector<Real> v;
      for (int64_t m = first; m <= w && x + sign * m >= 0 && x + sign * m < n; ++m) v.push_back(s(x, x + sign * m));
      if (v.size() < 2) continue;
      sum += spearman(v);
      ++count;
    }
  }
  return count == 0 ? 0 : -sum / count;  // no sequence of two offsets: 0 by the header's rule
}

Real reference_translation_invariance(const Matrix& s, int64_t w) {
  const int64_t n = s.rows;
  Real grand = 0;
  int64_t count = 0;
  std::vector<Real> diagonal_mean(2 * n, 0);
  for (int64_t d = -w; d <= w; ++d) {
    if (d == 0) continue;
    int64_t len = 0;
    for (int64_t x = 0; x < n; ++x)
      if (x + d >= 0 && x + d < n) diagonal_mean[d + n] += s(x, x + d), grand += s(x, x + d), ++len, ++count;
    diagonal_mean[d + n] /= len;
  }
  grand /= count;
  Real within = 0, total = 0;
  for (int64_t x = 0; x < n; ++x)
    for (int64_t y = 0; y < n; ++y) {
      const int64_t d = y - x;
      if (d == 0 || std::abs(d) > w) continue;
      within += (s(x, y) - diagonal_mean[d + n]) * (s(x, y) - diagonal_mean[d + n]);
      total += (s(x, y) - grand) * (s(x, y) - grand);
    }
  return total == 0 ? 1 : 1 - within / total;
}

// Lin's concordance of paired samples (population moments).
Real concordance(const std::vector<Real>& a, const std::vector<Real>& b) {
  const auto n = static_cast<Real>(a.size());
  Real ma = 0, mb = 0;
  for (size_t i = 0; i < a.size(); ++i) ma += a[i], mb += b[i];
  ma /= n, mb /= n;
  Real va = 0, vb = 0, c = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    va += (a[i] - ma) * (a[i] - ma);
    vb += (b[i] - mb) * (b[i] - mb);
    c += (a[i] - ma) * (b[i] - mb);
  }
  va /= n, vb /= n, c /= n;
  const Real denom = va + vb + (ma - mb) * (ma - mb);
  return denom == 0 ? 1 : 2 * c / denom;
}

Real reference_symmetry(const Matrix& s, int64_t w) {
  std::vector<Real> a, b;
  for (int64_t x = 0; x < s.rows; ++x)
    for (int64_t m = 1; m <= w; ++m)
      if (x - m >= 0 && x + m < s.rows) a.push_back(s(x, x + m)), b.push_back(s(x, x - m));
  return a.empty() ? 1 : concordance(a, b);  // no pair (n = 2): 1 by the header's rule
}

void expect_matches_reference(const Matrix& s, int64_t w, const char* what) {
  const Indicators got = indicators(s, w);
  EXPECT_EQ(got.window, w);
  // The fast path sums in float64 what the reference sums in long double: ~1e-15 relative per term.
  EXPECT_NEAR(got.monotonicity, static_cast<double>(reference_monotonicity(s, w)), 1e-12) << what << " W=" << w;
  EXPECT_NEAR(got.translation_invariance, static_cast<double>(reference_translation_invariance(s, w)), 1e-12)
      << what << " W=" << w;
  EXPECT_NEAR(got.symmetry, static_cast<double>(reference_symmetry(s, w)), 1e-12) << what << " W=" << w;
}

// ---- constructed matrices with known values --------------------------------

TEST(Indicators, SymmetricToeplitzDecreasingIsOneOneOne) {
  // t(|m|) = 1 / (1 + |m|): falls strictly, constant diagonals, t(m) = t(-m).
  const Matrix s = test::toeplitz(40, [](int64_t m) { return 1.0 / (1.0 + std::abs(static_cast<double>(m))); });
  const Indicators got = indicators(s);
  EXPECT_EQ(got.window, 39);
  EXPECT_EQ(got.monotonicity, 1.0);            // every rho is exactly -1 (ranks are exact)
  EXPECT_EQ(got.translation_invariance, 1.0);  // every diagonal is constant: within = 0
  EXPECT_EQ(got.symmetry, 1.0);                // a == b bitwise
}

TEST(Indicators, NonSymmetricToeplitzHasTheConcordanceOfItsTwoSides) {
  // Forward t(m) = exp(-0.3 m), backward t(-m) = 0.6 exp(-0.1 m) + 0.1: both fall, but differ.
  auto t = [](int64_t m) {
    return m >= 0 ? std::exp(-0.3 * static_cast<double>(m)) : 0.6 * std::exp(0.1 * static_cast<double>(m)) + 0.1;
  };
  const int64_t n = 30;
  const Matrix s = test::toeplitz(n, t);
  for (int64_t w : {int64_t{1}, int64_t{6}, n - 1}) {
    // By hand: the pair (t(m), t(-m)) occurs once per x with m <= x <= n-1-m, i.e. n - 2m times.
    std::vector<Real> a, b;
    for (int64_t m = 1; m <= w && 2 * m <= n - 1; ++m)
      for (int64_t copy = 0; copy < n - 2 * m; ++copy) a.push_back(t(m)), b.push_back(t(-m));
    const Indicators got = indicators(s, w);
    EXPECT_NEAR(got.symmetry, static_cast<double>(concordance(a, b)), 1e-13) << w;  // float64 sums of <= 900 terms
    EXPECT_LT(got.symmetry, 0.99);
    EXPECT_NEAR(got.translation_invariance, 1.0, 1e-15) << w;  // Toeplitz: within-diagonal spread is exactly 0
    EXPECT_EQ(got.monotonicity, w == 1 ? 0.0 : 1.0) << w;      // both sides fall strictly; W = 1: nothing to rank
  }
}

TEST(Indicators, AntisymmetricRowsGiveMinusOne) {
  // S[x, y] = (y - x)(x - c), c = (n - 1) / 2: b = -a, and the pairs' x are symmetric about c so mean a = 0.
  const int64_t n = 21;
  Matrix s(n, n);
  const double c = (n - 1) / 2.0;
  for (int64_t x = 0; x < n; ++x)
    for (int64_t y = 0; y < n; ++y) s(x, y) = static_cast<double>(y - x) * (static_cast<double>(x) - c);
  EXPECT_NEAR(indicators(s).symmetry, -1.0, 1e-12);  // the means are 0 up to float64 round-off
  expect_matches_reference(s, n - 1, "antisymmetric");
  // An antisymmetric Toeplitz matrix whose forward side sums to 0: t(-m) = -t(m).
  const Matrix toe = test::toeplitz(n, [](int64_t m) { return static_cast<double>(m) * std::cos(0.7 * m); });
  expect_matches_reference(toe, n - 1, "antisymmetric toeplitz");
}

TEST(Indicators, RandomMatricesMatchTheBruteForceReference) {
  std::mt19937_64 rng(17);
  for (int64_t n : {2, 3, 9, 24}) {
    Matrix s(n, n);
    // Values on a coarse grid so that ties occur in the rank statistics.
    std::uniform_int_distribution<int> level(-4, 4);
    for (double& v : s.values) v = 0.25 * level(rng);
    for (int64_t w : {int64_t{1}, (n + 1) / 2, n - 1})
      if (w >= 1 && w <= n - 1) expect_matches_reference(s, w, "grid");
    const Matrix g = test::random_table(n, n, 100 + n);
    for (int64_t w : {int64_t{1}, (n + 1) / 2, n - 1})
      if (w >= 1 && w <= n - 1) expect_matches_reference(g, w, "gaussian");
  }
}

TEST(Indicators, WindowLimitsTheOffsets) {
  // t(|m|) falls for |m| <= 3, then rises: monotone inside W = 3, not over the whole row.
  const Matrix s = test::toeplitz(16, [](int64_t m) {
    const double a = std::abs(static_cast<double>(m));
    return a <= 3 ? 10.0 - a : 4.0 + a;
  });
  EXPECT_EQ(indicators(s, 3).monotonicity, 1.0);
  const Indicators full = indicators(s);
  EXPECT_LT(full.monotonicity, 0.5);
  expect_matches_reference(s, 15, "v-shape");
  expect_matches_reference(s, 5, "v-shape");
  // A matrix that is Toeplitz only near its diagonal: TI is 1 inside the band, less over all of it.
  Matrix near = test::random_table(12, 12, 4);
  for (int64_t x = 0; x < 12; ++x)
    for (int64_t y = 0; y < 12; ++y)
      if (std::abs(x - y) <= 2) near(x, y) = static_cast<double>(std::abs(x - y));
  EXPECT_EQ(indicators(near, 2).translation_invariance, 1.0);
  EXPECT_LT(indicators(near).translation_invariance, 0.9);
  expect_matches_reference(near, 11, "band");
}

TEST(Indicators, ConstantBandIsRefused) {
  // The proximity of an all-zero or constant table: translation invariance is
  // 0 / 0. It once read 1 (and symmetry 1), a "perfect" sinusoid.
  Matrix s(6, 6);
  for (double& v : s.values) v = 0.1;
  EXPECT_TRUE(constant_on_band(s, 5));
  expect_error([&] { indicators(s); },
               "[indicators] matrix must vary over the offsets 1 .. 5 (1 <= |y - x| <= 5), got S[x, y] = "
               "0.10000000000000001 there to within 1e-12 (relative): the indicators are undefined");
  expect_error([&] { indicators(Matrix(3, 3)); },
               "[indicators] matrix must vary over the offsets 1 .. 2 (1 <= |y - x| <= 2), got S[x, y] = 0 there "
               "to within 1e-12 (relative): the indicators are undefined");
  // The diagonal is not part of the band: a different diagonal does not help.
  for (int64_t x = 0; x < 6; ++x) s(x, x) = 7.0;
  expect_error([&] { indicators(s, 2); },
               "[indicators] matrix must vary over the offsets 1 .. 2 (1 <= |y - x| <= 2), got S[x, y] = "
               "0.10000000000000001 there to within 1e-12 (relative): the indicators are undefined");
  // Round-off is not variation: a band of 0.1 +- 1 ulp is constant.
  s(2, 3) = std::nextafter(0.1, 1.0);
  EXPECT_TRUE(constant_on_band(s, 5));
  s(2, 3) = 0.1 + 1e-9;
  EXPECT_FALSE(constant_on_band(s, 5));
  s(2, 3) = 0.1;
  // Varying only outside the window still leaves the window's band constant.
  s(0, 5) = 1.0;
  EXPECT_FALSE(constant_on_band(s, 5));
  EXPECT_TRUE(constant_on_band(s, 4));
  EXPECT_NO_THROW(indicators(s));
  EXPECT_THROW(indicators(s, 4), std::invalid_argument);
}

TEST(Indicators, DoNotDependOnScale) {
  // The indicators are scale-free: S times 1e160 (the dot proximity of a table
  // times 1e80) or 1e-200 must give the numbers of S. Its squared deviations
  // overflowed (null in JSON) or underflowed (read as constant) before.
  const Matrix base = proximity(test::random_table(40, 8, 21), ProximityKind::kDot);
  const Indicators want = indicators(base, 20);
  for (double scale : {1e160, 1e-200, 1e300, 0x1p-900}) {
    Matrix s = base;
    for (double& v : s.values) v *= scale;
    const Indicators got = indicators(s, 20);
    // Monotonicity is rank-based: exact. The others: each value rounded once by
    // the scaling (1 ulp), sums over ~1000 terms: well within 1e-12.
    EXPECT_EQ(got.monotonicity, want.monotonicity) << scale;
    EXPECT_NEAR(got.translation_invariance, want.translation_invariance, 1e-12) << scale;
    EXPECT_NEAR(got.symmetry, want.symmetry, 1e-12) << scale;
  }
}

// ---- encodings ---------------------------------------------------------------

TEST(Indicators, SinusoidIsTranslationInvariantAndSymmetric) {
  // S[i, j] = sum_k cos((i - j) w_k): a function of i - j, even in it.
  const Matrix table = test::sinusoidal_table(256, 128);
  for (ProximityKind kind : {ProximityKind::kDot, ProximityKind::kCosine}) {
    const Indicators got = indicators(proximity(table, kind));
    // Entries of one diagonal differ only by float64 round-off (~1e-14 of values ~64).
    EXPECT_NEAR(got.translation_invariance, 1.0, 1e-12) << proximity_kind_name(kind);
    EXPECT_NEAR(got.symmetry, 1.0, 1e-12) << proximity_kind_name(kind);
    EXPECT_GT(got.monotonicity, 0.2) << proximity_kind_name(kind);  // decays, with ripples
  }
}

TEST(Indicators, RandomTableIsNotTranslationInvariant) {
  // Learned-like N(0, 0.02) rows: off-diagonal dots are independent noise, so the
  // offset explains only chance variance, ~ (2n - 2) / (n (n - 1)) ~ 0.008 here.
  const Matrix table = test::random_table(256, 128, 99, 0.02);
  const Indicators got = indicators(proximity(table, ProximityKind::kDot));
  EXPECT_LT(got.translation_invariance, 0.05);
  EXPECT_LT(std::abs(got.symmetry), 0.1);
  EXPECT_LT(std::abs(got.monotonicity), 0.1);
}

TEST(Indicators, RandomTablesReadNoMonotoneTrend) {
  // i.i.d. N(0, 1) tables, N = 128, D = 64: within a row the entries S[x, x + s m],
  // m >= 1, are exchangeable, so each rho has mean 0 and so does the statistic.
  // Over 20 seeds its mean must lie within 3 standard errors (of the 20 values)
  // of 0. Measured here: dot -0.0040 +- 0.0034 (mean +- SE), cosine -0.0041 +- 0.0034.
  // The old definition, which ranked m = 0 as well (S[x, x] = |PE[x]|^2, or 1, tops
  // its row), read dot +0.0909 +- 0.0024 and cosine +0.0907 +- 0.0024 on the same
  // tables, ~38 SE off; it is recomputed below to show the check has the power to fail.
  constexpr int kSeeds = 20;
  for (ProximityKind kind : {ProximityKind::kDot, ProximityKind::kCosine}) {
    std::vector<double> now, old;
    for (int seed = 0; seed < kSeeds; ++seed) {
      const Matrix s = proximity(test::random_table(128, 64, 500 + seed), kind);
      now.push_back(indicators(s).monotonicity);
      old.push_back(static_cast<double>(reference_monotonicity(s, 127, 0)));
    }
    auto mean_and_se = [](const std::vector<double>& v) {
      double mean = 0, var = 0;
      for (double x : v) mean += x;
      mean /= static_cast<double>(v.size());
      for (double x : v) var += (x - mean) * (x - mean);
      var /= static_cast<double>(v.size() - 1);  // sample variance of one seed's value
      return std::pair{mean, std::sqrt(var / static_cast<double>(v.size()))};
    };
    const auto [mean, se] = mean_and_se(now);
    const auto [old_mean, old_se] = mean_and_se(old);
    EXPECT_LT(std::abs(mean), 3 * se) << proximity_kind_name(kind) << ": " << mean << " +- " << se;
    EXPECT_GT(old_mean, 3 * old_se) << proximity_kind_name(kind) << ": " << old_mean << " +- " << old_se;
  }
}

TEST(Indicators, MonotonicityDoesNotSeeTheDiagonal) {
  // S[x, x] is |PE[x]|^2 (or 1), not an offset: any diagonal gives the same number.
  Matrix s = proximity(test::random_table(30, 8, 7), ProximityKind::kDot);
  const double want = indicators(s).monotonicity;
  for (double d : {-1e6, 0.0, 1e6}) {
    for (int64_t x = 0; x < s.rows; ++x) s(x, x) = d;
    EXPECT_EQ(indicators(s).monotonicity, want) << d;
  }
  // W = 1 leaves one offset per sequence: nothing to rank, 0 (the old definition read 1 for any dot proximity
  // whose diagonal tops its row). n = 2 has only W = 1.
  EXPECT_EQ(indicators(s, 1).monotonicity, 0.0);
  Matrix two(2, 2);
  two(0, 0) = two(1, 1) = 3, two(0, 1) = 1, two(1, 0) = 2;
  EXPECT_EQ(indicators(two).monotonicity, 0.0);
  // Two offsets, one row each way at n = 3: S[0, 1] > S[0, 2] falls, S[2, 1] < S[2, 0] rises: rho = -1, +1.
  Matrix three(3, 3);
  three(0, 1) = 2, three(0, 2) = 1, three(2, 1) = 1, three(2, 0) = 2, three(1, 0) = 5, three(1, 2) = 3;
  EXPECT_EQ(indicators(three).monotonicity, 0.0);
  three(2, 1) = 3;  // now both fall
  EXPECT_EQ(indicators(three).monotonicity, 1.0);
}

TEST(Indicators, SameResultForAnyNumberOfThreads) {
  const Matrix s = test::random_table(200, 200, 12);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const Indicators one = indicators(s, 50);
  omp_set_num_threads(3);
  const Indicators three = indicators(s, 50);
  omp_set_num_threads(saved);
  EXPECT_EQ(one.monotonicity, three.monotonicity);
  EXPECT_EQ(one.translation_invariance, three.translation_invariance);
  EXPECT_EQ(one.symmetry, three.symmetry);
}

TEST(Indicators, Errors) {
  expect_error([] { indicators(Matrix(8, 8), 9); }, "[indicators] window must be in [1, 7] for an 8 x 8 matrix, got 9");
  expect_error([] { indicators(Matrix(8, 8), 0); }, "[indicators] window must be in [1, 7] for an 8 x 8 matrix, got 0");
  expect_error([] { indicators(Matrix(16, 16), -1); },
               "[indicators] window must be in [1, 15] for a 16 x 16 matrix, got -1");
  expect_error([] { indicators(Matrix(11, 11), 11); },
               "[indicators] window must be in [1, 10] for an 11 x 11 matrix, got 11");
  expect_error([] { indicators(Matrix(1, 1)); }, "[indicators] matrix must be at least 2 x 2, got 1 x 1");
  expect_error([] { indicators(Matrix(3, 4)); }, "[indicators] matrix must be square, got 3 x 4");
  Matrix bad(3, 3);
  bad(1, 2) = std::nan("");
  expect_error([&] { indicators(bad); }, "[indicators] matrix has a non-finite value at (1, 2): nan");
}

}  // namespace
}  // namespace posenc::analysis
