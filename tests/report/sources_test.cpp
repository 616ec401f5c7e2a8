// The report's tables against plain long double references written from the
// formulas in include/posenc/report/sources.h, and their translation
// operators by the property they promise: PE[p + d] = T(d) PE[p].
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

#include "posenc/report/sources.h"
#include "posenc/report/table_analysis.h"

#include "report_test_support.h"

namespace posenc::report {
namespace {

// Every table here is float64 from exact angles: |error| ~1e-15 per entry.
constexpr double kTableTol = 1e-12;

using test::message_of;

TEST(RopeSource, MatchesCosSinReference) {
  const int64_t n = 50, d = 16, start = 7;
  const TableSource s = rope_source("rope", d, 500.0, {}, std::nullopt, kernels::Precision::kExact, start, n);
  ASSERT_EQ(s.table.rows, n);
  ASSERT_EQ(s.table.cols, d);
  for (int64_t p = 0; p < n; ++p) {
    for (int64_t i = 0; i < d / 2; ++i) {
      const long double omega = std::pow(500.0L, -2.0L * i / d);
      const long double angle = (start + p) * omega;
      EXPECT_NEAR(s.table(p, i), static_cast<double>(std::cos(angle)), kTableTol) << p << " " << i;
      EXPECT_NEAR(s.table(p, d / 2 + i), static_cast<double>(std::sin(angle)), kTableTol) << p << " " << i;
    }
  }
}

TEST(RopeSource, ExactOperatorTranslatesEveryRow) {
  const TableSource s = rope_source("rope", 32, 10000.0, {}, std::nullopt, kernels::Precision::kExact, 0, 80);
  ASSERT_TRUE(s.exact_operator);
  for (int64_t delta : {1, 5, 40}) {
    const analysis::Matrix t = s.exact_operator(delta);
    for (int64_t p = 0; p + delta < s.table.rows; ++p) {
      for (int64_t r = 0; r < 32; ++r) {
        long double moved = 0;
        for (int64_t c = 0; c < 32; ++c) moved += static_cast<long double>(t(r, c)) * s.table(p, c);
        EXPECT_NEAR(static_cast<double>(moved), s.table(p + delta, r), 1e-12) << delta << " " << p << " " << r;
      }
    }
  }
}

TEST(AbsoluteSource, SinusoidalHasAnExactOperatorOtherKindsNone) {
  kernels::AbsoluteParams p;
  p.dim = 8;
  p.layout = kernels::SinusoidalLayout::kHalf;
  const TableSource sin = absolute_source("sinusoidal", p, kernels::Positions::range(0, 30));
  ASSERT_TRUE(sin.exact_operator);
  const TableAnalysis a = analyze_table(sin);
  ASSERT_TRUE(a.translation);
  EXPECT_EQ(a.translation->method, "exact");
  EXPECT_LT(a.translation->max_residual, 1e-13);  // float64 rotation of float64 rows
  p.kind = kernels::AbsoluteKind::kSineOnly;
  EXPECT_FALSE(absolute_source("sine-only", p, kernels::Positions::range(0, 30)).exact_operator);
}

TEST(RopeAxialSource, MatchesAxialReference) {
  // Half the frequencies turn with y, half with x, each base^(-2i/(D/2)).
  const int64_t h = 3, w = 5, d = 16, quarter = d / 4;
  const TableSource s = rope_axial_source("rope-axial-2d", h, w, d, 100.0);
  ASSERT_EQ(s.table.rows, h * w);
  EXPECT_FALSE(s.exact_operator);
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) {
      const int64_t row = y * w + x;
      for (int64_t i = 0; i < quarter; ++i) {
        const long double omega = std::pow(100.0L, -2.0L * i / (d / 2));
        EXPECT_NEAR(s.table(row, i), static_cast<double>(std::cos(y * omega)), kTableTol);
        EXPECT_NEAR(s.table(row, quarter + i), static_cast<double>(std::cos(x * omega)), kTableTol);
        EXPECT_NEAR(s.table(row, 2 * quarter + i), static_cast<double>(std::sin(y * omega)), kTableTol);
        EXPECT_NEAR(s.table(row, 3 * quarter + i), static_cast<double>(std::sin(x * omega)), kTableTol);
      }
    }
  }
  EXPECT_EQ(message_of([] { rope_axial_source("a", 2, 2, 6, 100.0); }),
            "[rope-axial] dim must be a positive multiple of 4 (an even share per axis), got 6");
}

TEST(LearnedInitSource, SeededNormalDraws) {
  const TableSource a = learned_init_source("learned", 256, 128, 0.02, 5);
  const TableSource b = learned_init_source("learned", 256, 128, 0.02, 5);
  const TableSource c = learned_init_source("learned", 256, 128, 0.02, 6);
  EXPECT_TRUE(a.untrained);
  EXPECT_EQ(a.table.values, b.table.values);  // same seed, same table
  EXPECT_NE(a.table.values, c.table.values);
  long double sum = 0, squares = 0;
  for (double v : a.table.values) sum += v, squares += static_cast<long double>(v) * v;
  const double n = static_cast<double>(a.table.values.size());
  const double mean = static_cast<double>(sum / n);
  const double std = std::sqrt(static_cast<double>(squares / n) - mean * mean);
  // 32768 draws: the mean's standard error is 0.02/181 = 1.1e-4 (5 sigma: 6e-4);
  // the deviation's relative error ~1/sqrt(2n) = 0.4% (5 sigma: 2%).
  EXPECT_NEAR(mean, 0.0, 6e-4);
  EXPECT_NEAR(std, 0.02, 0.02 * 0.02);
  EXPECT_EQ(message_of([] { learned_init_source("learned", 0, 4, 0.02, 0); }),
            "[learned] positions must be at least 1, got 0");
  EXPECT_EQ(message_of([] { learned_init_source("learned", 4, 4, 0.0, 0); }),
            "[learned] std must be finite and > 0, got 0");
}

TEST(FileSource, IsFileSource) {
  EXPECT_TRUE(is_file_source("a/b.npy"));
  EXPECT_TRUE(is_file_source("x.safetensors"));
  EXPECT_FALSE(is_file_source("sinusoidal"));
  EXPECT_FALSE(is_file_source("x.npy.txt"));
}

TEST(TableAnalysis, TooShortToTranslate) {
  kernels::AbsoluteParams p;
  p.kind = kernels::AbsoluteKind::kIndex;
  p.dim = 2;
  // 4 positions: delta 1 leaves 3 pairs, fewer than 5 folds: no least-squares fit.
  const TableAnalysis a = analyze_table(absolute_source("index", p, kernels::Positions::range(0, 4)));
  EXPECT_FALSE(a.translation);
  const nlohmann::ordered_json j = table_json(a);
  EXPECT_TRUE(j["translation_residual"].is_null());
  EXPECT_TRUE(j["translation"].is_null());
  EXPECT_FALSE(j.contains("absolute_mae"));  // probes not asked for
  EXPECT_EQ(message_of([&] { analyze_table(absolute_source("index", p, kernels::Positions::range(0, 1))); }),
            "[analyze] the table must have at least 2 positions, got 1");
  EXPECT_EQ(translation_deltas(256, 5), (std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64}));
  EXPECT_EQ(translation_deltas(8, 5), (std::vector<int64_t>{1, 2}));
}

}  // namespace
}  // namespace posenc::report
