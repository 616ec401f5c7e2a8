#include "posenc/analysis/summary.h"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "posenc/kernels/naive.h"
#include "posenc/kernels/sinusoidal.h"

namespace posenc::analysis {
namespace {

TEST(Summary, SmallTableByHand) {
  // rows: (1, 2), (3, -4), (0, 5)
  const std::vector<double> t = {1, 2, 3, -4, 0, 5};
  const TableSummary s = summarize_table<double>(t, 3, 2);
  EXPECT_EQ(s.rows, 3);
  EXPECT_EQ(s.cols, 2);
  EXPECT_EQ(s.min, -4.0);
  EXPECT_EQ(s.max, 5.0);
  EXPECT_DOUBLE_EQ(s.mean_abs, 15.0 / 6.0);
  EXPECT_DOUBLE_EQ(s.self_dot_mean, (5.0 + 25.0 + 25.0) / 3.0);
  EXPECT_DOUBLE_EQ(s.neighbour_dot_first, 3.0 - 8.0);
  EXPECT_DOUBLE_EQ(s.neighbour_dot_mean, ((3.0 - 8.0) + (0.0 - 20.0)) / 2.0);
}

TEST(Summary, SinusoidalDotProductsDependOnlyOnTheOffset) {
  // |PE[p]|^2 = s^2 D/2 and PE[p].PE[p+1] = s^2 sum_i cos(omega_i) for every p.
  const int64_t rows = 200, dim = 64;
  const double scale = 0.5;
  kernels::SinusoidalParams params;
  params.dim = dim;
  params.scale = scale;
  params.layout = kernels::SinusoidalLayout::kHalf;
  std::vector<float> table(static_cast<size_t>(rows * dim));
  kernels::sinusoidal_table<float>(params, kernels::Positions::range(0, rows), table);
  double cos_sum = 0.0;
  for (int64_t i = 0; i < dim / 2; ++i) cos_sum += std::cos(std::pow(10000.0, -2.0 * i / dim));

  const TableSummary s = summarize_table<float>(table, rows, dim);
  // 1e-5: 64 products of float32 values, each within ~1e-7 of exact.
  EXPECT_NEAR(s.self_dot_mean, scale * scale * dim / 2, 1e-5);
  EXPECT_NEAR(s.neighbour_dot_first, scale * scale * cos_sum, 1e-5);
  EXPECT_NEAR(s.neighbour_dot_mean, scale * scale * cos_sum, 1e-5);
  EXPECT_NEAR(s.min, -scale, 1e-3);
  EXPECT_NEAR(s.max, scale, 1e-6);
}

TEST(Summary, IndexEncodingGrowsWithPosition) {
  // PE[p, j] = p: self dots D p^2, neighbour dots D p (p+1).
  const int64_t rows = 10, dim = 3;
  kernels::NaiveParams params;
  params.kind = kernels::NaiveKind::kIndex;
  params.dim = dim;
  std::vector<double> table(static_cast<size_t>(rows * dim));
  kernels::naive_table<double>(params, kernels::Positions::range(0, rows), table);
  const TableSummary s = summarize_table<double>(table, rows, dim);
  EXPECT_EQ(s.min, 0.0);
  EXPECT_EQ(s.max, 9.0);
  EXPECT_DOUBLE_EQ(s.mean_abs, 4.5);
  EXPECT_DOUBLE_EQ(s.self_dot_mean, dim * 285.0 / rows);             // sum p^2, p < 10 = 285
  EXPECT_DOUBLE_EQ(s.neighbour_dot_mean, dim * 240.0 / (rows - 1));  // sum p(p+1), p < 9 = 240
  EXPECT_EQ(s.neighbour_dot_first, 0.0);
}

TEST(Summary, OneRowHasNoNeighbour) {
  const std::vector<float> t = {2, -1};
  const TableSummary s = summarize_table<float>(t, 1, 2);
  EXPECT_EQ(s.self_dot_mean, 5.0);
  EXPECT_TRUE(std::isnan(s.neighbour_dot_mean));
  EXPECT_TRUE(std::isnan(s.neighbour_dot_first));
}

std::string error_of(const std::vector<float>& t, int64_t rows, int64_t cols) {
  try {
    summarize_table<float>(t, rows, cols);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "<no exception>";
}

TEST(Summary, RefusesBadShapes) {
  EXPECT_EQ(error_of({}, 0, 4), "[summary] rows must be at least 1, got 0");
  EXPECT_EQ(error_of({1, 2}, 2, 0), "[summary] cols must be at least 1, got 0");
  EXPECT_EQ(error_of({1, 2, 3}, 2, 2), "[summary] rows x cols must equal the number of values 3, got 2 x 2");
}

}  // namespace
}  // namespace posenc::analysis
