#include "posenc/analysis/probes.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <vector>

#include "analysis_test_support.h"

namespace posenc::analysis {
namespace {

using test::expect_error;

Matrix index_table(int64_t n, int64_t d) {
  Matrix t(n, d);
  for (int64_t p = 0; p < n; ++p)
    for (int64_t k = 0; k < d; ++k) t(p, k) = static_cast<double>(p);
  return t;
}

// A model that predicts the training mean of p: per fold of the documented
// rule, mean |round(mean of the other folds' p) - p| over the held-out p.
// `margin`: how close the worst training mean comes to a rounding boundary.
double training_mean_mae(int64_t n, int64_t folds, uint64_t seed, double* margin = nullptr) {
  const std::vector<int64_t> fold = test::documented_folds(n, folds, seed);
  double total = 0, closest = 1;
  for (int64_t f = 0; f < folds; ++f) {
    long double sum = 0;
    int64_t count = 0;
    for (int64_t p = 0; p < n; ++p)
      if (fold[p] != f) sum += p, ++count;
    const double mean = static_cast<double>(sum / count);
    closest = std::min(closest, std::abs(mean - std::floor(mean) - 0.5));
    for (int64_t p = 0; p < n; ++p)
      if (fold[p] == f) total += std::abs(std::round(mean) - static_cast<double>(p));
  }
  if (margin) *margin = closest;
  return total / static_cast<double>(n);
}

TEST(Probes, IndexTableIsDecodedExactly) {
  // PE[p] = p in every column: p is a linear function of the row, and i < j is p_i < p_j.
  const ProbeResult r = probe(index_table(90, 4));
  EXPECT_EQ(r.absolute_mae, 0.0);
  EXPECT_EQ(r.relative_error, 0.0);
  EXPECT_EQ(r.folds, 5);
  EXPECT_EQ(r.seed, 0u);
  EXPECT_EQ(r.pairs, 90 * 89 / 2);  // fewer than 4096: every pair
  // 4096 of the 19900 pairs of 200 positions: a pair decoded with i >= j would be misjudged.
  const ProbeResult drawn = probe(index_table(200, 3));
  EXPECT_EQ(drawn.pairs, 4096);
  EXPECT_EQ(drawn.relative_error, 0.0);
  EXPECT_EQ(drawn.absolute_mae, 0.0);
}

TEST(Probes, ConstantTablePredictsTheTrainingMeanAndGuessesOrder) {
  const int64_t n = 200;
  Matrix t(n, 6);
  for (double& v : t.values) v = 0.7;
  for (uint64_t seed : {0u, 9u}) {
    ProbeOptions options;
    options.seed = seed;
    const ProbeResult r = probe(t, options);
    // Nothing tells two positions apart: the logit is the bias alone, 0 by the
    // symmetry of the two orders, so "i < j" is never predicted: half of the pairs.
    EXPECT_EQ(r.relative_error, 0.5);
    // Exactly the training-mean predictor on the documented folds.
    EXPECT_DOUBLE_EQ(r.absolute_mae, training_mean_mae(n, 5, seed));
    // Its expectation: mean |p - (n - 1) / 2| = n / 4 for even n. A held-out fold
    // pulls its training mean away from itself, which adds ~sigma_p / (4 n) per
    // fold pair, ~1% here.
    EXPECT_NEAR(r.absolute_mae, n / 4.0, 0.02 * n / 4.0);
  }
}

TEST(Probes, OneHotRowsCannotGeneraliseToUnseenPositions) {
  // PE = identity: a held-out row is orthogonal to every training row, and its
  // centred part has no component along the fit, so ridge predicts the training mean.
  const int64_t n = 60;
  Matrix t(n, n);
  for (int64_t p = 0; p < n; ++p) t(p, p) = 1.0;
  double margin = 0;
  const double expected = training_mean_mae(n, 5, 0, &margin);
  ASSERT_GT(margin, 1e-6);  // no training mean sits on a rounding boundary, so round-off cannot flip one
  EXPECT_NEAR(absolute_probe_mae(t), expected, 1e-12);
  EXPECT_GT(absolute_probe_mae(t), n / 5.0);
}

// Positions 0 .. n/2-1 share one row, the others another.
Matrix two_groups(int64_t n) {
  Matrix t = test::random_table(2, 5, 12);
  Matrix g(n, 5);
  for (int64_t p = 0; p < n; ++p)
    for (int64_t k = 0; k < 5; ++k) g(p, k) = t(p < n / 2 ? 0 : 1, k);
  return g;
}

TEST(Probes, RelativeErrorCountsThePairsNoRowCanOrder) {
  // Within a group both orders of a pair have the same logit, so exactly one of
  // them is wrong; across groups the order is always "first group first" and
  // is learned. Every pair used once: error = within pairs / (2 * all pairs).
  const int64_t n = 20;
  const ProbeResult all = probe(two_groups(n));
  ASSERT_EQ(all.pairs, 190);
  EXPECT_DOUBLE_EQ(all.relative_error, 2.0 * 45.0 / (2.0 * 190.0));
  // 1000 of the 4950 pairs of 100 positions, drawn uniformly: within pairs are
  // 2450 / 4950 of them; the drawn share has sd ~0.016, so the error ~0.008.
  ProbeOptions options;
  options.pairs = 1000;
  const double drawn = relative_probe_error(two_groups(100), options);
  EXPECT_NEAR(drawn, 2450.0 / 4950.0 / 2.0, 0.03);
}

TEST(Probes, RelativeProbeDoesNotDependOnColumnScales) {
  // Columns are standardized: scaling them by powers of two (exact) changes nothing.
  const Matrix t = test::random_table(60, 6, 14);
  Matrix scaled = t;
  for (int64_t p = 0; p < t.rows; ++p)
    for (int64_t k = 0; k < t.cols; ++k) scaled(p, k) = std::ldexp(t(p, k), static_cast<int>(3 * k) - 8);
  ProbeOptions options;
  options.pairs = 600;
  const double base = relative_probe_error(t, options);
  EXPECT_EQ(relative_probe_error(scaled, options), base);
  EXPECT_GT(base, 0.0);
}

TEST(Probes, SinusoidEncodesPositionAndOrder) {
  // The lowest frequencies are monotone over 256 positions: both probes succeed.
  const ProbeResult r = probe(test::sinusoidal_table(256, 128));
  EXPECT_LT(r.absolute_mae, 1.0);
  EXPECT_LT(r.relative_error, 0.05);
}

TEST(Probes, DeterministicForASeedAndAnyThreadCount) {
  const Matrix t = test::random_table(120, 16, 8);
  ProbeOptions options;
  options.seed = 3;
  options.pairs = 800;
  const ProbeResult a = probe(t, options);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const ProbeResult b = probe(t, options);
  omp_set_num_threads(saved);
  EXPECT_EQ(a.absolute_mae, b.absolute_mae);
  EXPECT_EQ(a.relative_error, b.relative_error);
  EXPECT_EQ(a.pairs, 800);
  EXPECT_EQ(absolute_probe_mae(t, options), a.absolute_mae);
  EXPECT_EQ(relative_probe_error(t, options), a.relative_error);
  options.seed = 4;  // other folds, other pairs
  const ProbeResult c = probe(t, options);
  EXPECT_NE(a.absolute_mae, c.absolute_mae);
  EXPECT_NE(a.relative_error, c.relative_error);
  EXPECT_EQ(c.seed, 4u);
}

TEST(Probes, Errors) {
  const Matrix t(8, 3);
  ProbeOptions options;
  options.folds = 9;
  // Too few positions for the folds: the message says what to change (it once read "folds must be in [2, 1]").
  const char* too_few = "[probe] the table has 8 positions; 9 folds need at least 9 (one held-out position per fold): "
                        "use 2 .. 8 folds or a table of at least 9 positions";
  expect_error([&] { probe(t, options); }, too_few);
  expect_error([&] { absolute_probe_mae(t, options); }, too_few);
  expect_error([&] { probe(Matrix(1, 3), options); },
               "[probe] the table has 1 position; the probes need at least 2 (cross-validation holds out positions "
               "in at least 2 folds)");
  expect_error([&] { probe(Matrix(3, 3)); },  // default 5 folds
               "[probe] the table has 3 positions; 5 folds need at least 5 (one held-out position per fold): "
               "use 2 .. 3 folds or a table of at least 5 positions");
  options.folds = 1;
  expect_error([&] { relative_probe_error(t, options); }, "[probe] folds must be >= 2, got 1");
  options.folds = 2;
  options.pairs = 0;
  expect_error([&] { probe(t, options); }, "[probe] pairs must be >= 1, got 0");
  expect_error([&] { relative_probe_error(t, options); }, "[probe] pairs must be >= 1, got 0");
  EXPECT_NO_THROW(absolute_probe_mae(t, options));  // pairs do not concern the absolute probe
  options.pairs = 4096;
  expect_error([&] { probe(Matrix(2, 3), options); },
               "[probe] the table has 2 positions, hence 1 pair; 2 folds need at least 2 (one held-out pair per "
               "fold): use a table of at least 3 positions");
  options.folds = 5;
  options.pairs = 3;
  expect_error([&] { relative_probe_error(t, options); }, "[probe] pairs must be at least folds = 5, got 3");
  expect_error([] { probe(Matrix(0, 3)); }, "[probe] table must have at least 1 row and 1 column, got 0 x 3");
  Matrix bad(8, 3);
  bad(0, 1) = INFINITY;
  expect_error([&] { probe(bad); }, "[probe] table has a non-finite value at (0, 1): inf");
}

}  // namespace
}  // namespace posenc::analysis
