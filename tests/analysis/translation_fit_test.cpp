#include "posenc/analysis/translation_fit.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <vector>

#include "analysis_test_support.h"
#include "posenc/kernels/sinusoidal.h"
#include "posenc/kernels/translation.h"

namespace posenc::analysis {
namespace {

using test::expect_error;
using Real = long double;
using kernels::SinusoidalLayout;

Matrix sinusoid_operator(int64_t dim, SinusoidalLayout layout, int64_t delta) {
  kernels::SinusoidalParams params;
  params.dim = dim;
  params.layout = layout;
  Matrix t(dim, dim);
  kernels::translation_matrix(params, static_cast<double>(delta), t.values);
  return t;
}

// The header's fitted residual, written plainly: primal ridge normal equations in
// long double on the documented folds, whatever the shape (the library switches to
// the dual form when D exceeds the training pairs; both give the same T).
Real reference_fitted(const Matrix& t, int64_t delta, int64_t folds, uint64_t seed) {
  const int64_t n = t.rows, d = t.cols, count = n - delta;
  const std::vector<int64_t> fold = test::documented_folds(count, folds, seed);
  Real error = 0, target = 0;
  for (int64_t p = 0; p < count; ++p)
    for (int64_t k = 0; k < d; ++k) target += static_cast<Real>(t(p + delta, k)) * t(p + delta, k);
  for (int64_t f = 0; f < folds; ++f) {
    std::vector<Real> a(static_cast<size_t>(d * d), 0), b(static_cast<size_t>(d * d), 0);
    for (int64_t p = 0; p < count; ++p) {
      if (fold[p] == f) continue;
      for (int64_t i = 0; i < d; ++i)
        for (int64_t j = 0; j < d; ++j) {
          a[i * d + j] += static_cast<Real>(t(p, i)) * t(p, j);
          b[i * d + j] += static_cast<Real>(t(p, i)) * t(p + delta, j);
        }
    }
    Real trace = 0;
    for (int64_t i = 0; i < d; ++i) trace += a[i * d + i];
    for (int64_t i = 0; i < d; ++i) a[i * d + i] += 1e-10L * trace / d;
    const std::vector<Real> w = test::solve(a, b, d, d);  // w = T^T
    for (int64_t p = 0; p < count; ++p) {
      if (fold[p] != f) continue;
      for (int64_t j = 0; j < d; ++j) {
        Real predicted = 0;
        for (int64_t i = 0; i < d; ++i) predicted += static_cast<Real>(t(p, i)) * w[i * d + j];
        error += (t(p + delta, j) - predicted) * (t(p + delta, j) - predicted);
      }
    }
  }
  return std::sqrt(error / target);
}

TEST(TranslationFit, DefaultDeltasArePowersOfTwoUpToAQuarter) {
  EXPECT_EQ(default_deltas(256), (std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64}));
  EXPECT_EQ(default_deltas(512), (std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64, 128}));
  EXPECT_EQ(default_deltas(8), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(default_deltas(7), (std::vector<int64_t>{1}));
  EXPECT_EQ(default_deltas(2), (std::vector<int64_t>{1}));
}

TEST(TranslationFit, ExactOperatorTranslatesTheSinusoid) {
  const int64_t n = 256, dim = 128;
  const std::vector<int64_t> deltas = default_deltas(n);
  for (auto layout : {SinusoidalLayout::kInterleaved, SinusoidalLayout::kHalf, SinusoidalLayout::kCosSin}) {
    const Matrix table = test::sinusoidal_table(n, dim, layout);
    const TranslationResidual r =
        translation_residual_exact(table, deltas, [&](int64_t delta) { return sinusoid_operator(dim, layout, delta); });
    EXPECT_EQ(r.method, "exact");
    EXPECT_EQ(r.deltas, deltas);
    ASSERT_EQ(r.residuals.size(), deltas.size());
    // Table and operator are float64 to ~1e-16 each; 128-term sums: ~1e-15 relative.
    EXPECT_LT(r.max_residual, 1e-13) << kernels::layout_name(layout);
    // The same operator does nothing useful for a random table: ~sqrt(2) (two unrelated unit-size rows).
    const TranslationResidual random = translation_residual_exact(
        test::random_table(n, dim, 3), deltas, [&](int64_t delta) { return sinusoid_operator(dim, layout, delta); });
    EXPECT_GT(random.max_residual, 0.5);
  }
}

TEST(TranslationFit, RotationOperatorEqualsTheKernelsSinusoidOperator) {
  const int64_t dim = 32;
  const std::vector<double> omega = kernels::sinusoidal_frequencies(dim, 10000.0);
  for (auto layout : {SinusoidalLayout::kInterleaved, SinusoidalLayout::kHalf, SinusoidalLayout::kCosSin}) {
    std::vector<RotationPair> pairs;
    for (int64_t i = 0; i < dim / 2; ++i) {
      const kernels::PairColumns c = kernels::pair_columns(layout, dim, i);
      pairs.push_back({c.sin_col, c.cos_col, omega[i]});
    }
    for (int64_t delta : {1, 7, -3, 1000}) {
      // Two independent formulations of the same rotation: equal to the bit.
      EXPECT_EQ(rotation_operator(dim, pairs, delta).values, sinusoid_operator(dim, layout, delta).values);
    }
  }
}

TEST(TranslationFit, RotationOperatorTranslatesARopeLikeTable) {
  // Columns: (cos, sin) pairs of arbitrary frequencies, amplitudes and phases, plus two constant columns.
  const int64_t n = 100, dim = 9;
  const std::vector<RotationPair> pairs = {{1, 0, 0.9}, {4, 2, 0.05}, {3, 7, 2.5}};
  const double amplitude[] = {1.0, 0.3, 2.0}, phase[] = {0.0, 1.1, -0.4};
  Matrix table(n, dim);
  for (int64_t p = 0; p < n; ++p) {
    for (size_t k = 0; k < pairs.size(); ++k) {
      table(p, pairs[k].sin_col) = amplitude[k] * std::sin(static_cast<double>(p) * pairs[k].omega + phase[k]);
      table(p, pairs[k].cos_col) = amplitude[k] * std::cos(static_cast<double>(p) * pairs[k].omega + phase[k]);
    }
    table(p, 5) = 0.5;
    table(p, 6) = -1.0;
  }
  const TranslationResidual r = translation_residual_exact(
      table, default_deltas(n), [&](int64_t delta) { return rotation_operator(dim, pairs, delta); });
  EXPECT_LT(r.max_residual, 1e-13);  // float64 sin/cos of p w + phase: ~1e-16 each
  // T(a) T(b) = T(a + b) and T(-a) = T(a)^T.
  const Matrix ta = rotation_operator(dim, pairs, 5), tb = rotation_operator(dim, pairs, 12);
  const Matrix tab = rotation_operator(dim, pairs, 17), tneg = rotation_operator(dim, pairs, -5);
  for (int64_t i = 0; i < dim; ++i)
    for (int64_t j = 0; j < dim; ++j) {
      double sum = 0;
      for (int64_t k = 0; k < dim; ++k) sum += ta(i, k) * tb(k, j);
      EXPECT_NEAR(sum, tab(i, j), 1e-14) << i << "," << j;  // two-term products of cos/sin values
      EXPECT_EQ(tneg(i, j), ta(j, i));
    }
  EXPECT_EQ(ta(5, 5), 1.0);  // unpaired columns carried unchanged
  EXPECT_EQ(ta(5, 6), 0.0);
}

TEST(TranslationFit, FittedMatchesAPlainLongDoubleRidge) {
  // Primal (D <= training pairs) and dual (D > training pairs) forms against the same reference;
  // primal solving for T (held-out pairs >= D: 40 x 6) or for A^-1 X_test^T (fewer: 80 x 30, and
  // 300 x 100 where the solve runs in blocks of 64 rows).
  for (auto [n, d] : {std::pair<int64_t, int64_t>{40, 6}, {14, 20}, {30, 23}, {80, 30}, {300, 100}}) {
    const Matrix table = test::random_table(n, d, 7 + n);
    const std::vector<int64_t> deltas = {1, 3};
    for (uint64_t seed : {0u, 5u}) {
      const TranslationResidual r = translation_residual_fitted(table, deltas, 4, seed);
      EXPECT_EQ(r.method, "least-squares");
      for (size_t k = 0; k < deltas.size(); ++k) {
        const double want = static_cast<double>(reference_fitted(table, deltas[k], 4, seed));
        // Ridge with lambda = 1e-10 tr / D: condition <= ~1e11, so float64 keeps ~1e-5 relative at worst.
        EXPECT_NEAR(r.residuals[k], want, 1e-6 * want) << n << "x" << d << " delta " << deltas[k] << " seed " << seed;
      }
    }
  }
}

TEST(TranslationFit, FittedSinusoidIsNearlyExact) {
  const Matrix table = test::sinusoidal_table(256, 128);
  const TranslationResidual r = translation_residual_fitted(table, default_deltas(256));
  // The ridge term (1e-10 of the mean eigenvalue) shrinks the nearly collinear
  // low-frequency directions: ~1e-6 (header), far below a random table's ~1.
  EXPECT_LT(r.max_residual, 1e-4);
}

TEST(TranslationFit, FittedFindsARandomOrthogonalTranslation) {
  // PE[p] = T^p PE[0] for a random orthogonal T (Gram-Schmidt of a Gaussian matrix).
  const int64_t dim = 12, n = 120;
  Matrix q = test::random_table(dim, dim, 31);
  for (int64_t i = 0; i < dim; ++i) {
    for (int64_t j = 0; j < i; ++j) {
      double proj = 0;
      for (int64_t k = 0; k < dim; ++k) proj += q(i, k) * q(j, k);
      for (int64_t k = 0; k < dim; ++k) q(i, k) -= proj * q(j, k);
    }
    double norm = 0;
    for (int64_t k = 0; k < dim; ++k) norm += q(i, k) * q(i, k);
    for (int64_t k = 0; k < dim; ++k) q(i, k) /= std::sqrt(norm);
  }
  Matrix table(n, dim);
  std::vector<Real> row(dim), next(dim);
  for (int64_t k = 0; k < dim; ++k) row[k] = 1.0L / (1 + k);
  for (int64_t p = 0; p < n; ++p) {
    for (int64_t k = 0; k < dim; ++k) table(p, k) = static_cast<double>(row[k]);
    for (int64_t i = 0; i < dim; ++i) {
      next[i] = 0;
      for (int64_t k = 0; k < dim; ++k) next[i] += q(i, k) * row[k];
    }
    row = next;
  }
  const TranslationResidual r = translation_residual_fitted(table, default_deltas(n));
  EXPECT_LT(r.max_residual, 1e-4);  // exactly translatable up to the ridge term and float64 rows
}

TEST(TranslationFit, RandomTablesAreNotTranslatable) {
  // n > D (primal) and D >= n (dual: out of sample, so not trivially 0).
  for (auto [n, d] : {std::pair<int64_t, int64_t>{256, 64}, {64, 128}}) {
    const TranslationResidual r = translation_residual_fitted(test::random_table(n, d, 2), default_deltas(n));
    for (double v : r.residuals) EXPECT_GT(v, 0.5) << n << "x" << d;
  }
}

TEST(TranslationFit, DeterministicPerSeedAndThreadCount) {
  const Matrix table = test::random_table(90, 40, 6);
  const std::vector<int64_t> deltas = {1, 2, 8};
  const TranslationResidual a = translation_residual_fitted(table, deltas, 5, 1);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const TranslationResidual b = translation_residual_fitted(table, deltas, 5, 1);
  omp_set_num_threads(saved);
  EXPECT_EQ(a.residuals, b.residuals);
  const TranslationResidual c = translation_residual_fitted(table, deltas, 5, 2);
  EXPECT_NE(a.residuals, c.residuals);  // other folds, other held-out errors
}

TEST(TranslationFit, ZeroTargetsAreRefused) {
  // ||Y|| = 0 makes the relative residual 0 / 0; it once read 0 ("exactly translatable") for an all-zero table.
  const Matrix zero(6, 3);
  expect_error([&] { translation_residual_fitted(zero, std::vector<int64_t>{1}, 2); },
               "[translation] the targets of delta 1 (rows 1 .. 5 of the table) must not all be zero, got all "
               "zeros: the relative residual is undefined");
  Matrix first_row(6, 3);
  first_row(1, 0) = 1.0;  // Y = PE[2 ..] is zero for delta 2, not for delta 1
  auto identity = [](int64_t) { return rotation_operator(3, {}, 0); };
  EXPECT_NO_THROW(translation_residual_exact(first_row, std::vector<int64_t>{1}, identity));
  expect_error([&] { translation_residual_exact(first_row, std::vector<int64_t>{1, 2, 4}, identity); },
               "[translation] the targets of delta 2 (rows 2 .. 5 of the table) must not all be zero, got all "
               "zeros: the relative residual is undefined");
}

TEST(TranslationFit, ResidualDoesNotDependOnScale) {
  // A sinusoid (nearly translatable) and a random table (not): the residual is
  // relative, so the table times 1e-150 or 1e150 must give the same numbers;
  // the sums of squares of such tables under- or overflow unless normalised.
  for (const Matrix& base : {test::sinusoidal_table(64, 16), test::random_table(64, 8, 3)}) {
    const std::vector<int64_t> deltas = {1, 3, 16};
    const TranslationResidual want = translation_residual_fitted(base, deltas, 4, 2);
    for (double scale : {1e-150, 1e150, 0x1p-700, 0x1p700}) {
      Matrix scaled = base;
      for (double& v : scaled.values) v *= scale;
      const TranslationResidual got = translation_residual_fitted(scaled, deltas, 4, 2);
      ASSERT_EQ(got.residuals.size(), want.residuals.size());
      for (size_t k = 0; k < deltas.size(); ++k) {
        // Powers of two are exact: the same bits. Decimal scales round every value
        // once (1 ulp); the sinusoid's near-singular ridge system amplifies that by
        // its condition number (~1e5 here: its residual ~1e-6 moves by ~1e-5 of itself).
        if (scale == 0x1p-700 || scale == 0x1p700)
          EXPECT_EQ(got.residuals[k], want.residuals[k]) << scale;
        else
          EXPECT_NEAR(got.residuals[k], want.residuals[k], 1e-3 * want.residuals[k] + 1e-15) << scale;
      }
    }
  }
}

TEST(TranslationFit, Errors) {
  const Matrix table = test::random_table(8, 16, 5);  // not all zero: zero targets are refused first
  auto identity = [](int64_t) { return rotation_operator(16, {}, 0); };
  expect_error([&] { translation_residual_exact(table, std::vector<int64_t>{}, identity); },
               "[translation] deltas must hold at least 1 delta, got 0");
  expect_error([&] { translation_residual_fitted(table, std::vector<int64_t>{}); },
               "[translation] deltas must hold at least 1 delta, got 0");
  expect_error(
      [&] {
        translation_residual_exact(table, std::vector<int64_t>{1, 8}, identity);
      },
      "[translation] delta must be in [1, 7] for a table of 8 positions, got 8");
  expect_error([&] { translation_residual_fitted(table, std::vector<int64_t>{0}); },
               "[translation] delta must be in [1, 7] for a table of 8 positions, got 0");
  expect_error(
      [&] { translation_residual_exact(table, std::vector<int64_t>{2}, [](int64_t) { return Matrix(16, 8); }); },
      "[translation] operator for delta 2 must be 16 x 16, got 16 x 8");
  expect_error(
      [&] {
        translation_residual_exact(table, std::vector<int64_t>{1}, [](int64_t) {
          Matrix t(16, 16);
          t(0, 0) = std::nan("");
          return t;
        });
      },
      "[translation] operator for delta 1 has a non-finite value at (0, 0): nan");
  expect_error([&] { translation_residual_fitted(table, std::vector<int64_t>{1}, 9); },
               "[translation] folds must be in [2, 7] for delta 1 on a table of 8 positions, got 9");
  expect_error(
      [&] {
        translation_residual_fitted(table, std::vector<int64_t>{1, 4}, 5);
      },
      "[translation] folds must be in [2, 4] for delta 4 on a table of 8 positions, got 5");
  expect_error([&] { translation_residual_fitted(table, std::vector<int64_t>{1}, 1); },
               "[translation] folds must be in [2, 7] for delta 1 on a table of 8 positions, got 1");
  expect_error([&] { translation_residual_fitted(Matrix(0, 4), std::vector<int64_t>{1}); },
               "[translation] table must have at least 1 row and 1 column, got 0 x 4");
  Matrix bad(8, 2);
  bad(5, 1) = INFINITY;
  expect_error([&] { translation_residual_fitted(bad, std::vector<int64_t>{1}); },
               "[translation] table has a non-finite value at (5, 1): inf");
}

TEST(TranslationFit, RotationOperatorErrors) {
  const std::vector<RotationPair> ok = {{0, 1, 0.5}};
  expect_error([&] { rotation_operator(0, ok, 1); },
               "[translation] dim must be in [1, 46340] (a dense dim x dim matrix), got 0");
  expect_error(
      [] {
        rotation_operator(8, std::vector<RotationPair>{{0, 1, 0.1}, {9, 2, 0.1}}, 1);
      },
      "[translation] pair 1 sin_col must be in [0, 7], got 9");
  expect_error(
      [] {
        rotation_operator(8, std::vector<RotationPair>{{0, -1, 0.1}}, 1);
      },
      "[translation] pair 0 cos_col must be in [0, 7], got -1");
  expect_error(
      [] {
        rotation_operator(8, std::vector<RotationPair>{{3, 3, 0.1}}, 1);
      },
      "[translation] pair 0 sin_col and cos_col must differ, got 3 and 3");
  expect_error(
      [] {
        rotation_operator(8, std::vector<RotationPair>{{3, 1, 0.1}, {0, 2, 0.1}, {4, 3, 0.2}}, 1);
      },
      "[translation] pair columns must be distinct, got column 3 in pairs 0 and 2");
  expect_error(
      [] {
        rotation_operator(8, std::vector<RotationPair>{{0, 1, INFINITY}}, 1);
      },
      "[translation] pair 0 omega must be finite, got inf");
}

}  // namespace
}  // namespace posenc::analysis
