#include <gtest/gtest.h>

#include <vector>

#include "check.h"
#include "posenc/kernels/learned.h"

namespace posenc::kernels {
namespace {

using test::expect_error;

TEST(Learned, ForwardGathersRows) {
  const int64_t rows = 5, dim = 3;
  std::vector<float> table(rows * dim);
  for (int64_t k = 0; k < rows * dim; ++k) table[k] = static_cast<float>(k);
  const std::vector<int64_t> pos = {4, 0, 4, 2};
  std::vector<float> out(pos.size() * dim);
  learned_forward<float>(table, rows, dim, pos, out);
  const std::vector<float> expected = {12, 13, 14, 0, 1, 2, 12, 13, 14, 6, 7, 8};
  EXPECT_EQ(out, expected);
}

TEST(Learned, BackwardScatterAddsRepeatedPositions) {
  const int64_t rows = 4, dim = 2;
  const std::vector<int64_t> pos = {1, 3, 1, 1};
  const std::vector<double> g = {1, 2, 10, 20, 100, 200, 1000, 2000};
  std::vector<double> grad(rows * dim, 0.5);  // accumulates into what is there
  learned_backward<double>(g, pos, rows, dim, grad);
  const std::vector<double> expected = {0.5, 0.5, 1101.5, 2202.5, 0.5, 0.5, 10.5, 20.5};
  EXPECT_EQ(grad, expected);
}

TEST(Learned, Errors) {
  std::vector<float> table(512 * 4), out(4 * 2);
  const std::vector<int64_t> outside = {3, 512};
  expect_error([&] { learned_forward<float>(table, 512, 4, outside, out); },
               "[learned] position 512 is outside the table of 512 rows (valid 0..511)");
  const std::vector<int64_t> negative = {-1, 0};
  expect_error([&] { learned_forward<float>(table, 512, 4, negative, out); },
               "[learned] position -1 is outside the table of 512 rows (valid 0..511)");
  expect_error([&] { learned_forward<float>(table, 500, 4, negative, out); },
               "[learned] table must hold rows x dim = 2000 values, got 2048");
}

}  // namespace
}  // namespace posenc::kernels
