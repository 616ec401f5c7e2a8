#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "check.h"
#include "posenc/kernels/reference.h"
#include "posenc/kernels/sinusoidal.h"

namespace posenc::kernels {
namespace {

using test::expect_error;
using test::max_abs_diff;

// Spec (issue 2, DESIGN.md §3): every float32 value within 5e-7 of the exact one.
constexpr double kFloatTolerance = 5e-7;
// Double output: the reference is long double; ours has a 64-step double
// recurrence (~64 ulps of 1) and double angle reduction.
constexpr double kDoubleTolerance = 1e-12;

struct Case {
  int64_t dim;
  double base;
  double scale;
  SinusoidalLayout layout;
  int64_t start;
  int64_t count;
};

std::string describe(const Case& c) {
  return "dim=" + std::to_string(c.dim) + " base=" + std::to_string(c.base) + " scale=" + std::to_string(c.scale) +
         " layout=" + std::string(layout_name(c.layout)) + " start=" + std::to_string(c.start) +
         " count=" + std::to_string(c.count);
}

std::vector<double> as_doubles(int64_t start, int64_t count) {
  std::vector<double> p(static_cast<size_t>(count));
  for (int64_t k = 0; k < count; ++k) p[k] = static_cast<double>(start + k);
  return p;
}

// Real model shapes: d_model 64..1024, both bases, odd counts across the 64-row anchors.
const std::vector<Case> kCases = {
    {2, 10000.0, 1.0, SinusoidalLayout::kInterleaved, 0, 5},
    {64, 10000.0, 1.0, SinusoidalLayout::kInterleaved, 0, 200},
    {64, 10000.0, 1.0, SinusoidalLayout::kHalf, 0, 200},
    {64, 10000.0, 1.0, SinusoidalLayout::kCosSin, 0, 200},
    {128, 500000.0, 0.5, SinusoidalLayout::kHalf, 17, 131},
    {512, 10000.0, 2.0, SinusoidalLayout::kCosSin, -100, 65},
    {1024, 10000.0, 1.0, SinusoidalLayout::kInterleaved, 1000, 129},
    {768, 100.0, 1.0, SinusoidalLayout::kInterleaved, (int64_t{1} << 24) - 70, 140},
};

TEST(Sinusoidal, RangeMatchesReference) {
  for (const Case& c : kCases) {
    const SinusoidalParams params{c.dim, c.base, c.scale, c.layout, Precision::kExact};
    const auto expected = reference::sinusoidal(as_doubles(c.start, c.count), c.dim, c.base, c.scale, c.layout);
    std::vector<float> f(static_cast<size_t>(c.count * c.dim));
    std::vector<double> d(f.size());
    sinusoidal_table<float>(params, Positions::range(c.start, c.count), f);
    sinusoidal_table<double>(params, Positions::range(c.start, c.count), d);
    EXPECT_LE(max_abs_diff(f, expected), kFloatTolerance * std::abs(c.scale)) << describe(c);
    EXPECT_LE(max_abs_diff(d, expected), kDoubleTolerance * std::abs(c.scale)) << describe(c);
  }
}

TEST(Sinusoidal, ListMatchesReference) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int64_t> any(-(int64_t{1} << 24), int64_t{1} << 24);
  for (const Case& c : kCases) {
    std::vector<int64_t> positions(static_cast<size_t>(c.count));
    for (auto& p : positions) p = any(rng);
    std::vector<double> as_double(positions.begin(), positions.end());
    const auto expected = reference::sinusoidal(as_double, c.dim, c.base, c.scale, c.layout);
    const SinusoidalParams params{c.dim, c.base, c.scale, c.layout, Precision::kExact};
    std::vector<float> f(static_cast<size_t>(c.count * c.dim));
    sinusoidal_table<float>(params, Positions::list(positions), f);
    EXPECT_LE(max_abs_diff(f, expected), kFloatTolerance * std::abs(c.scale)) << describe(c);
  }
}

TEST(Sinusoidal, PrecisionAtTwoToThe24) {
  // The whole last stretch below 2^24 and a little past it, d_model 256.
  const int64_t start = (int64_t{1} << 24) - 2048, count = 2049 + 64;
  const SinusoidalParams params{256, 10000.0, 1.0, SinusoidalLayout::kInterleaved, Precision::kExact};
  std::vector<float> f(static_cast<size_t>(count * 256));
  sinusoidal_table<float>(params, Positions::range(start, count), f);
  const auto expected = reference::sinusoidal(as_doubles(start, count), 256, 10000.0, 1.0, params.layout);
  EXPECT_LE(max_abs_diff(f, expected), kFloatTolerance);
}

TEST(Sinusoidal, Fp32ModeIsTheCommonFloatFormula) {
  const int64_t dim = 64, start = (int64_t{1} << 24) - 100, count = 100;
  const SinusoidalParams params{dim, 10000.0, 1.0, SinusoidalLayout::kHalf, Precision::kFp32};
  std::vector<float> got(static_cast<size_t>(count * dim));
  sinusoidal_table<float>(params, Positions::range(start, count), got);
  std::vector<double> common(got.size());
  for (int64_t r = 0; r < count; ++r) {
    for (int64_t i = 0; i < dim / 2; ++i) {
      // inv_freq in float32, position in float32, product in float32.
      const float w = static_cast<float>(powl(10000.0L, -2.0L * i / dim));
      const float angle = static_cast<float>(start + r) * w;
      common[r * dim + i] = std::sin(static_cast<double>(angle));
      common[r * dim + dim / 2 + i] = std::cos(static_cast<double>(angle));
    }
  }
  // 1 float ulp of the result; the angle itself is identical.
  EXPECT_LE(max_abs_diff(got, common), 1.2e-7);
  // ... and at 2^24 that formula is visibly off the exact encoding.
  const auto exact = reference::sinusoidal(as_doubles(start, count), dim, 10000.0, 1.0, params.layout);
  EXPECT_GT(max_abs_diff(got, exact), 1e-2);
}

TEST(Sinusoidal, FrequenciesAreGeometric) {
  const auto w = sinusoidal_frequencies(512, 10000.0);
  ASSERT_EQ(w.size(), 256u);
  EXPECT_EQ(w[0], 1.0);
  for (size_t i = 1; i < w.size(); ++i) EXPECT_NEAR(w[i] / w[i - 1], std::pow(10000.0, -2.0 / 512), 4e-16);  // two roundings of omega
}

TEST(Sinusoidal, RowsHaveUnitPairs) {
  // sin^2 + cos^2 = 1 for every pair, in every layout.
  for (auto layout : {SinusoidalLayout::kInterleaved, SinusoidalLayout::kHalf, SinusoidalLayout::kCosSin}) {
    const int64_t dim = 32;
    std::vector<double> t(static_cast<size_t>(100 * dim));
    sinusoidal_table<double>({dim, 10000.0, 1.0, layout, Precision::kExact}, Positions::range(3, 100), t);
    for (int64_t r = 0; r < 100; ++r) {
      for (int64_t i = 0; i < dim / 2; ++i) {
        const auto k = pair_columns(layout, dim, i);
        const double s = t[r * dim + k.sin_col], c = t[r * dim + k.cos_col];
        EXPECT_NEAR(s * s + c * c, 1.0, 1e-14);
        if (i == 0) EXPECT_NEAR(s, std::sin(3.0 + r), 1e-14);  // omega_0 = 1
      }
    }
  }
}

TEST(Sinusoidal, EmptyListGivesEmptyTable) {
  // An empty list is a valid (empty) request, unlike a range of 0 positions.
  std::vector<float> out;
  EXPECT_NO_THROW(sinusoidal_table<float>({8}, Positions::list({}), out));
}

TEST(Sinusoidal, Errors) {
  std::vector<float> out(100);
  const auto table = [&](SinusoidalParams p, Positions pos) { return [=, &out] { sinusoidal_table<float>(p, pos, out); }; };
  expect_error(table({7}, Positions::range(0, 10)), "[sinusoidal] dim must be even, got 7");
  expect_error(table({0}, Positions::range(0, 10)), "[sinusoidal] dim must be positive, got 0");
  expect_error(table({10, -1.0}, Positions::range(0, 10)), "[sinusoidal] base must be finite and > 0, got -1");
  expect_error(table({10, 0.0}, Positions::range(0, 10)), "[sinusoidal] base must be finite and > 0, got 0");
  expect_error(table({10, NAN}, Positions::range(0, 10)), "[sinusoidal] base must be finite and > 0, got nan");
  expect_error(table({10, 10000.0, INFINITY}, Positions::range(0, 10)), "[sinusoidal] scale must be finite, got inf");
  expect_error(table({10}, Positions::range(0, 0)), "[sinusoidal] positions must be at least 1, got 0");
  expect_error(table({10}, Positions::range(0, -5)), "[sinusoidal] positions must be at least 1, got -5");
  expect_error(table({1024}, Positions::range(0, int64_t{1} << 30)),
               "[sinusoidal] positions x dim must be at most 2147483648 values, got 1073741824 x 1024");
  expect_error(table({10}, Positions::range(0, 11)), "[sinusoidal] out must hold positions x dim = 110 values, got 100");
  expect_error([] { parse_layout("rows"); }, "[sinusoidal] layout must be one of interleaved, half, cos-sin, got 'rows'");
  expect_error([] { parse_precision("bf16"); }, "[sinusoidal] precision must be one of exact, fp32, got 'bf16'");
  EXPECT_EQ(parse_layout("cos-sin"), SinusoidalLayout::kCosSin);
  EXPECT_EQ(parse_precision("fp32"), Precision::kFp32);
}

}  // namespace
}  // namespace posenc::kernels
