#include "posenc/analysis/monotone_range.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "analysis_test_support.h"
#include "posenc/analysis/proximity.h"

namespace posenc::analysis {
namespace {

using test::expect_error;

// Brute force from the definition: the largest m whose every step k <= m falls strictly.
MonotoneRange brute_force(const Matrix& s) {
  const int64_t n = s.rows;
  MonotoneRange want;
  std::vector<int64_t> uncensored;
  for (int64_t x = 0; x < n; ++x) {
    int64_t best = 0;
    for (int64_t m = n - 1 - x; m >= 0; --m) {
      bool falls = true;
      for (int64_t k = 1; k <= m; ++k) falls = falls && s(x, x + k) < s(x, x + k - 1);
      if (falls) {
        best = m;
        break;
      }
    }
    want.per_row.push_back(best);
    if (best != n - 1 - x) uncensored.push_back(best);
  }
  want.uncensored_rows = static_cast<int64_t>(uncensored.size());
  want.all_censored = uncensored.empty();
  std::vector<int64_t> pool = want.all_censored ? want.per_row : uncensored;
  std::sort(pool.begin(), pool.end());
  want.min = pool.front();
  want.max = pool.back();
  double sum = 0;
  for (int64_t r : pool) sum += static_cast<double>(r);
  want.mean = sum / static_cast<double>(pool.size());
  want.range = want.all_censored ? n - 1 : pool[(pool.size() - 1) / 2];
  return want;
}

void expect_same(const MonotoneRange& got, const MonotoneRange& want, const char* what) {
  EXPECT_EQ(got.per_row, want.per_row) << what;
  EXPECT_EQ(got.range, want.range) << what;
  EXPECT_EQ(got.all_censored, want.all_censored) << what;
  EXPECT_EQ(got.min, want.min) << what;
  EXPECT_EQ(got.max, want.max) << what;
  EXPECT_DOUBLE_EQ(got.mean, want.mean) << what;
  EXPECT_EQ(got.uncensored_rows, want.uncensored_rows) << what;
}

TEST(MonotoneRange, MatchesBruteForceOnRandomMatrices) {
  std::mt19937_64 rng(5);
  for (int64_t n : {2, 3, 7, 30}) {
    for (int trial = 0; trial < 4; ++trial) {
      Matrix s(n, n);
      // Rows that mostly fall, with coarse steps so that ties (which stop a range) occur.
      std::uniform_int_distribution<int> step(-1, 3);
      for (int64_t x = 0; x < n; ++x) {
        double v = 100.0;
        for (int64_t y = 0; y < n; ++y) s(x, y) = v -= step(rng);
      }
      expect_same(monotone_range(s), brute_force(s), "random rows");
      const Matrix g = test::random_table(n, n, 40 + trial);
      expect_same(monotone_range(g), brute_force(g), "gaussian");
    }
  }
}

TEST(MonotoneRange, ConstructedRanges) {
  // Row x falls for exactly r(x) = x % 4 steps, then rises (n = 12).
  const int64_t n = 12;
  Matrix s(n, n);
  for (int64_t x = 0; x < n; ++x)
    for (int64_t y = x; y < n; ++y) s(x, y) = y - x <= x % 4 ? -static_cast<double>(y - x) : static_cast<double>(y);
  const MonotoneRange got = monotone_range(s);
  expect_same(got, brute_force(s), "constructed");
  for (int64_t x = 0; x < 9; ++x) EXPECT_EQ(got.per_row[x], x % 4) << x;
  EXPECT_EQ(got.per_row[11], 0);  // the last row is always censored (nothing after it)
  EXPECT_FALSE(got.all_censored);
}

TEST(MonotoneRange, EveryRowFallingIsCensoredAtTheEnd) {
  const Matrix s = test::toeplitz(10, [](int64_t m) { return -std::abs(static_cast<double>(m)); });
  const MonotoneRange got = monotone_range(s);
  EXPECT_TRUE(got.all_censored);
  EXPECT_EQ(got.range, 9);
  EXPECT_EQ(got.uncensored_rows, 0);
  EXPECT_EQ(got.min, 0);
  EXPECT_EQ(got.max, 9);
  EXPECT_DOUBLE_EQ(got.mean, 4.5);
  expect_same(got, brute_force(s), "falling");
}

TEST(MonotoneRange, SinusoidRangeIsWhereTheCosineSumStopsFalling) {
  // S[x, x + m] = sum_k cos(m w_k), w_k = 10000^(-2k/D): the range is the first m with f(m + 1) >= f(m).
  const int64_t dim = 128, n = 256;
  auto f = [&](int64_t m) {
    long double sum = 0;
    for (int64_t k = 0; k < dim / 2; ++k)
      sum += std::cos(static_cast<long double>(m) * std::pow(10000.0L, -2.0L * k / dim));
    return sum;
  };
  int64_t expected = 0;
  while (f(expected + 1) < f(expected)) ++expected;
  ASSERT_GT(expected, 0);
  const MonotoneRange got = monotone_range(proximity(test::sinusoidal_table(n, dim), ProximityKind::kDot));
  EXPECT_EQ(got.range, expected);
  EXPECT_FALSE(got.all_censored);
  // Translation invariant: every row that reaches past the turn has the same range.
  for (int64_t x = 0; x + expected + 1 < n; ++x) EXPECT_EQ(got.per_row[x], expected) << x;
  EXPECT_EQ(got.min, expected);
  EXPECT_EQ(got.max, expected);
}

TEST(MonotoneRange, Errors) {
  expect_error([] { monotone_range(Matrix(1, 1)); }, "[monotone range] matrix must be at least 2 x 2, got 1 x 1");
  expect_error([] { monotone_range(Matrix(2, 3)); }, "[monotone range] matrix must be square, got 2 x 3");
  Matrix bad(2, 2);
  bad(1, 0) = std::nan("");
  expect_error([&] { monotone_range(bad); }, "[monotone range] matrix has a non-finite value at (1, 0): nan");
}

}  // namespace
}  // namespace posenc::analysis
