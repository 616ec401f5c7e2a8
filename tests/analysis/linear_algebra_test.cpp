// The private Cholesky factorization and solve of posenc::analysis against
// plain long double references: L L^T = A, and A x = b by Gaussian
// elimination, for sizes that cross the blocks (32 rows in the factorization,
// 64 in the many-right-hand-side solve) and for both solve paths (m < 16:
// substitution loops; m >= 16: blocked products).
#include "linear_algebra.h"

#include "analysis_test_support.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace posenc::analysis::detail {
namespace {

// A = G G^T + n I: well conditioned, so float64 solves agree with the exact ones to ~1e-13.
std::vector<double> spd(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::vector<double> g(static_cast<size_t>(n * n)), a(static_cast<size_t>(n * n));
  for (double& v : g) v = normal(rng);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      long double sum = i == j ? n : 0;
      for (int64_t k = 0; k < n; ++k) sum += static_cast<long double>(g[i * n + k]) * g[j * n + k];
      a[i * n + j] = static_cast<double>(sum);
    }
  return a;
}

// x with A x = b (b [n, m]) by the shared long-double Gaussian elimination.
std::vector<long double> solve_reference(const std::vector<double>& a, const std::vector<double>& b, int64_t n,
                                         int64_t m) {
  return test::solve({a.begin(), a.end()}, {b.begin(), b.end()}, n, m);
}

TEST(LinearAlgebra, CholeskyFactorsAcrossBlocks) {
  for (int64_t n : {1, 31, 33, 100}) {
    const std::vector<double> a = spd(n, 3 + n);
    std::vector<double> l = a;
    ASSERT_TRUE(cholesky(l.data(), n));
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j <= i; ++j) {
        long double sum = 0;
        for (int64_t k = 0; k <= j; ++k) sum += static_cast<long double>(l[i * n + k]) * l[j * n + k];
        EXPECT_NEAR(static_cast<double>(sum), a[i * n + j], 1e-12 * n) << n << ": " << i << ", " << j;
      }
  }
  std::vector<double> not_spd = {1, 2, 2, 1};  // eigenvalues 3, -1
  EXPECT_FALSE(cholesky(not_spd.data(), 2));
}

TEST(LinearAlgebra, CholeskySolveMatchesGaussianElimination) {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> normal;
  for (int64_t n : {5, 64, 150}) {
    const std::vector<double> a = spd(n, n);
    std::vector<double> l = a;
    ASSERT_TRUE(cholesky(l.data(), n));
    for (int64_t m : {1, 15, 16, 70}) {
      std::vector<double> b(static_cast<size_t>(n * m));
      for (double& v : b) v = normal(rng);
      const std::vector<long double> want = solve_reference(a, b, n, m);
      cholesky_solve(l.data(), n, b.data(), m);
      // cond(A) ~ 5 and |x| ~ 1/n: float64 round-off over n-term sums, ~1e-15.
      for (int64_t k = 0; k < n * m; ++k)
        EXPECT_NEAR(b[k], static_cast<double>(want[k]), 1e-13) << "n " << n << ", m " << m << ", entry " << k;
    }
  }
}

}  // namespace
}  // namespace posenc::analysis::detail
