#include <gtest/gtest.h>

#include <numbers>
#include <vector>

#include "check.h"
#include "posenc/kernels/reference.h"
#include "posenc/kernels/sinusoidal_nd.h"

namespace posenc::kernels {
namespace {

using test::expect_error;
using test::max_abs_diff;

TEST(Grid, TwoDMatchesReference) {
  for (bool normalize : {false, true}) {
    for (auto layout : {SinusoidalLayout::kInterleaved, SinusoidalLayout::kHalf, SinusoidalLayout::kCosSin}) {
      SinusoidalGridParams p;
      p.height = 7;
      p.width = 13;  // non-square
      p.dim = 64;
      p.layout = layout;
      p.normalize = normalize;
      p.normalize_scale = 2 * std::numbers::pi;
      std::vector<float> f(7 * 13 * 64);
      std::vector<double> d(f.size());
      sinusoidal_2d<float>(p, f);
      sinusoidal_2d<double>(p, d);
      const auto expected = reference::grid(p, false);
      EXPECT_LE(max_abs_diff(f, expected), 5e-7);
      EXPECT_LE(max_abs_diff(d, expected), 1e-12);
    }
  }
}

TEST(Grid, ThreeDMatchesReference) {
  SinusoidalGridParams p;
  p.frames = 3;
  p.height = 4;
  p.width = 5;
  p.dim = 96;
  p.layout = SinusoidalLayout::kHalf;
  std::vector<double> d(3 * 4 * 5 * 96);
  sinusoidal_3d<double>(p, d);
  EXPECT_LE(max_abs_diff(d, reference::grid(p, true)), 1e-12);
}

TEST(Grid, RowsEncodeYThenX) {
  // Channel block 0 depends on y only, block 1 on x only.
  SinusoidalGridParams p;
  p.height = 3;
  p.width = 4;
  p.dim = 8;
  std::vector<double> d(3 * 4 * 8);
  sinusoidal_2d<double>(p, d);
  const int64_t y = 2, x = 3, row = y * 4 + x;
  EXPECT_NEAR(d[row * 8 + 0], std::sin(2.0), 1e-15);  // omega_0 = 1 on the y block
  EXPECT_NEAR(d[row * 8 + 4], std::sin(3.0), 1e-15);  // and on the x block
}

TEST(Grid, Errors) {
  std::vector<float> out(16);
  SinusoidalGridParams p;
  p.height = 2;
  p.width = 2;
  p.dim = 6;
  expect_error([&] { sinusoidal_2d<float>(p, out); },
               "[sinusoidal-2d] dim must be divisible by 4 (an even share per axis), got 6");
  p.dim = 8;
  expect_error([&] { sinusoidal_3d<float>(p, out); },
               "[sinusoidal-3d] dim must be divisible by 6 (an even share per axis), got 8");
  p.height = 0;
  expect_error([&] { sinusoidal_2d<float>(p, out); }, "[sinusoidal-2d] height must be at least 1, got 0");
  p.height = 2;
  p.frames = 0;
  p.dim = 12;
  expect_error([&] { sinusoidal_3d<float>(p, out); }, "[sinusoidal-3d] frames must be at least 1, got 0");
  p.frames = 1;
  p.height = 100000;
  p.width = 100000;
  p.dim = 4;
  expect_error([&] { sinusoidal_2d<float>(p, out); },
               "[sinusoidal-2d] grid cells x dim must be at most 2147483648 values, got 100000 x 100000 x 4");
}

}  // namespace
}  // namespace posenc::kernels
