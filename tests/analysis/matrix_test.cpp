#include "posenc/analysis/matrix.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "analysis_test_support.h"

namespace posenc::analysis {
namespace {

using test::expect_error;

TEST(AnalysisMatrix, CopiesFloatAndDoubleRowMajor) {
  const std::vector<float> f = {1.5f, -2.0f, 3.25f, 4.0f, 5.0f, 6.0f};
  const Matrix a = matrix_from(f, 2, 3);
  EXPECT_EQ(a.rows, 2);
  EXPECT_EQ(a.cols, 3);
  EXPECT_EQ(a(0, 2), 3.25);
  EXPECT_EQ(a(1, 0), 4.0);
  const std::vector<double> d = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6};
  const Matrix b = matrix_from(d, 3, 2);
  EXPECT_EQ(b(2, 1), 0.6);
  EXPECT_EQ(b.values, d);
  EXPECT_EQ(matrix_from(std::vector<double>{}, 0, 4).values.size(), 0u);
}

TEST(AnalysisMatrix, FromRefusesAShapeThatDoesNotMatch) {
  const std::vector<double> v(11, 1.0);
  expect_error([&] { matrix_from(v, 3, 4); }, "[matrix] values must hold rows * cols = 12 values, got 11");
  expect_error([&] { matrix_from(v, -1, 4); }, "[matrix] rows and cols must be >= 0, got -1 x 4");
  expect_error([&] { matrix_from(v, 0, 4); }, "[matrix] values must hold rows * cols = 0 values, got 11");
  const std::vector<float> f(4, 1.0f);
  expect_error([&] { matrix_from(f, int64_t{1} << 40, int64_t{1} << 40); },
               "[matrix] values must hold rows * cols = 1208925819614629174706176 values, got 4");
}

TEST(AnalysisMatrix, ValidateMessagesNameOpWhatAndValue) {
  Matrix m(3, 4);
  validate_table("proximity", "table", m);
  expect_error([&] { validate_square("indicators", "matrix", m); }, "[indicators] matrix must be square, got 3 x 4");
  Matrix empty(0, 4);
  expect_error([&] { validate_table("proximity", "table", empty); },
               "[proximity] table must have at least 1 row and 1 column, got 0 x 4");
  expect_error([&] { validate_square("indicators", "matrix", empty); },
               "[indicators] matrix must have at least 1 row and 1 column, got 0 x 4");
  Matrix nan_at(4, 8);
  nan_at(3, 7) = std::nan("");
  expect_error([&] { validate_table("proximity", "table", nan_at); },
               "[proximity] table has a non-finite value at (3, 7): nan");
  Matrix inf_at(2, 2);
  inf_at(0, 1) = -std::numeric_limits<double>::infinity();
  expect_error([&] { validate_square("monotone range", "matrix", inf_at); },
               "[monotone range] matrix has a non-finite value at (0, 1): -inf");
  Matrix short_values(3, 4);
  short_values.values.pop_back();
  expect_error([&] { validate_table("proximity", "table", short_values); },
               "[proximity] table holds 11 values, rows * cols = 12");
  Matrix huge;
  huge.rows = int64_t{1} << 40;
  huge.cols = int64_t{1} << 40;
  expect_error([&] { validate_table("probe", "table", huge); },
               "[probe] table holds 0 values, rows * cols = 1208925819614629174706176");
}

}  // namespace
}  // namespace posenc::analysis
