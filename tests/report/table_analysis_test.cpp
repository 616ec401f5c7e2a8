// analyze_table on degenerate and extreme tables (docs/analysis.md,
// "Degenerate tables"): refused, naming why, where a statistic is undefined;
// the same numbers at any scale; progress that only moves forward; and the
// cost estimate of the quadratic parts against the plain count of S's bytes.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "posenc/report/table_analysis.h"

#include "report_test_support.h"

namespace posenc::report {
namespace {

using test::message_of;

TableSource file_like(analysis::Matrix table) {
  TableSource s;
  s.name = "t.npy";
  s.table = std::move(table);
  return s;
}

// sin / cos of p w_k (no exact operator: fitted by least squares).
analysis::Matrix sinusoid(int64_t n, int64_t d) {
  analysis::Matrix t(n, d);
  for (int64_t p = 0; p < n; ++p)
    for (int64_t k = 0; k < d; k += 2) {
      const double w = std::pow(1000.0, -static_cast<double>(k) / static_cast<double>(d));
      t(p, k) = std::sin(p * w);
      t(p, k + 1) = std::cos(p * w);
    }
  return t;
}

analysis::Matrix random_table(int64_t n, int64_t d, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  analysis::Matrix t(n, d);
  for (double& v : t.values) v = normal(rng);
  return t;
}

TEST(TableAnalysisDegenerate, RefusedNamingWhy) {
  // Each of these read as a perfect sinusoid before: invariance 1, symmetry 1, residual 0.
  EXPECT_EQ(message_of([] { analyze_table(file_like(analysis::Matrix(16, 4))); }),
            "[analyze] table is all zeros: the indicators are undefined");
  analysis::Matrix constant(16, 4);
  for (int64_t p = 0; p < 16; ++p)
    for (int64_t k = 0; k < 4; ++k) constant(p, k) = 0.25 * static_cast<double>(k) - 0.3;
  EXPECT_EQ(message_of([&] { analyze_table(file_like(constant)); }),
            "[analyze] table has all rows equal (a constant table): the indicators are undefined");
  // Rows that are positive multiples of one row: every cosine is 1.
  analysis::Matrix collinear(16, 3);
  for (int64_t p = 0; p < 16; ++p)
    for (int64_t k = 0; k < 3; ++k) collinear(p, k) = static_cast<double>((p + 1) * (k + 2));
  TableAnalysisOptions cosine;
  cosine.proximity = analysis::ProximityKind::kCosine;
  EXPECT_EQ(message_of([&] { analyze_table(file_like(collinear), cosine); }),
            "[analyze] the cosine proximity of the table is the same for every pair of positions 1 .. 15 apart: the "
            "indicators are undefined");
  EXPECT_NO_THROW(analyze_table(file_like(collinear)));  // their dot proximity varies
  analysis::Matrix bad = sinusoid(16, 4);
  bad(3, 2) = NAN;
  EXPECT_EQ(message_of([&] { analyze_table(file_like(bad)); }), "[analyze] table has a non-finite value at (3, 2): nan");
}

TEST(TableAnalysisDegenerate, DuplicatedRowsAreAnalysed) {
  // Some rows repeated (each row twice): every statistic is defined, and none is perfect.
  const analysis::Matrix base = random_table(16, 6, 3);
  analysis::Matrix twice(32, 6);
  for (int64_t p = 0; p < 32; ++p)
    for (int64_t k = 0; k < 6; ++k) twice(p, k) = base(p / 2, k);
  const TableAnalysis a = analyze_table(file_like(twice));
  EXPECT_LT(a.properties.indicators.translation_invariance, 0.9);
  EXPECT_LT(a.properties.indicators.symmetry, 0.9);
  ASSERT_TRUE(a.translation);
  EXPECT_GT(a.translation->max_residual, 0.1);
}

TEST(TableAnalysisScale, SameNumbersAtAnyScale) {
  // Scale-free by design; 1e-100 and 1e80 gave wrong or null indicators before.
  for (const analysis::Matrix& base : {sinusoid(48, 8), random_table(48, 8, 9)}) {
    TableAnalysisOptions options;
    options.probes = true;
    options.probe.pairs = 300;
    const TableAnalysis want = analyze_table(file_like(base), options);
    for (double scale : {1e-100, 1e80, 1e250, 1e-250}) {
      analysis::Matrix scaled = base;
      for (double& v : scaled.values) v *= scale;
      const TableAnalysis got = analyze_table(file_like(scaled), options);
      const analysis::Indicators& g = got.properties.indicators;
      const analysis::Indicators& w = want.properties.indicators;
      // Each value is rounded once by the scaling (1 ulp); the indicators are
      // ratios of sums of ~2000 such terms: 1e-12 is ~1e4 ulps of slack.
      EXPECT_NEAR(g.translation_invariance, w.translation_invariance, 1e-12) << scale;
      EXPECT_NEAR(g.symmetry, w.symmetry, 1e-12) << scale;
      EXPECT_NEAR(g.monotonicity, w.monotonicity, 1e-12) << scale;
      EXPECT_EQ(got.properties.monotone.range, want.properties.monotone.range) << scale;
      ASSERT_TRUE(got.translation);
      // The sinusoid's near-singular ridge fit amplifies the 1-ulp rounding ~1e5 times (residual ~1e-6).
      EXPECT_NEAR(got.translation->max_residual, want.translation->max_residual,
                  1e-3 * want.translation->max_residual + 1e-12)
          << scale;
      ASSERT_TRUE(got.probes);
      EXPECT_EQ(got.probes->absolute_mae, want.probes->absolute_mae) << scale;
      EXPECT_NEAR(got.probes->relative_error, want.probes->relative_error, 1e-12) << scale;
      const nlohmann::ordered_json j = table_json(got);
      EXPECT_FALSE(j["translation_invariance"].is_null()) << scale;
      EXPECT_FALSE(j["symmetry"].is_null()) << scale;
    }
  }
}

TEST(TableAnalysisScale, SimilarityInTheTableUnitsWhereFloat64HoldsThem) {
  const analysis::Matrix base = sinusoid(12, 4);  // |S| <= 2
  analysis::Matrix big = base;
  for (double& v : big.values) v *= 0x1p300;  // S ~ 2^600: representable
  const TableAnalysis a = analyze_table(file_like(big));
  EXPECT_EQ(a.similarity_exponent, 0);
  EXPECT_EQ(a.similarity(0, 0), 2.0 * 0x1p600);  // sin^2 + cos^2 twice, exact here
  analysis::Matrix huge = base;
  for (double& v : huge.values) v *= 0x1p600;  // S ~ 2^1200: beyond float64
  const TableAnalysis h = analyze_table(file_like(huge));
  EXPECT_EQ(h.similarity_exponent, 2 * 601);  // the table was scaled by 2^-601 (largest |value| in [2^600, 2^601))
  EXPECT_EQ(h.similarity(0, 0), 0.5);  // 2 * 2^1200 * 2^-1202
}

TEST(TableAnalysisCost, ProgressMovesForwardOverEveryStep) {
  TableAnalysisOptions options;
  options.probes = true;
  std::vector<std::string> steps;
  std::vector<double> done;
  options.progress = [&](std::string_view step, double fraction) {
    steps.emplace_back(step);
    done.push_back(fraction);
  };
  analyze_table(file_like(sinusoid(64, 8)), options);
  ASSERT_GE(steps.size(), 5u);
  EXPECT_EQ(steps.front(), "proximity");
  EXPECT_EQ(steps[1], "indicators");
  EXPECT_EQ(steps[3], "translation delta 1 (1 of 5)");  // deltas 1, 2, 4, 8, 16
  EXPECT_EQ(steps.back(), "probes");
  EXPECT_EQ(done.front(), 0.0);
  for (size_t k = 1; k < done.size(); ++k) EXPECT_GE(done[k], done[k - 1]) << steps[k];
  EXPECT_LT(done.back(), 1.0);
}

TEST(TableAnalysisCost, EstimateHoldsSAndGrowsAsItsSteps) {
  // S alone is 8 n^2 bytes; the whole estimate holds it and the table.
  const AnalysisCost c = estimate_table_analysis(8192, 1024, false);
  EXPECT_EQ(c.similarity_bytes, 8.0 * 8192 * 8192);
  EXPECT_GT(c.bytes, c.similarity_bytes + 8.0 * 8192 * 1024);
  // 4x the positions: S 16x, the linear parts 4x, so between 4x and 16x in all,
  // and S is most of it.
  const AnalysisCost four = estimate_table_analysis(32768, 1024, false);
  EXPECT_GT(four.bytes, 8.0 * c.bytes);
  EXPECT_LT(four.bytes, 16.0 * c.bytes);
  EXPECT_GT(four.similarity_bytes, 0.8 * four.bytes);
  EXPECT_GT(four.multiply_adds, c.multiply_adds);
}

}  // namespace
}  // namespace posenc::report
