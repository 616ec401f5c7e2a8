#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <vector>

#include "check.h"
#include "posenc/kernels/absolute.h"
#include "posenc/kernels/reference.h"
#include "posenc/kernels/sinusoidal_nd.h"

namespace posenc::kernels {
namespace {

using test::expect_error;
using test::max_abs_diff;

TEST(Naive, EveryKindMatchesReference) {
  const std::vector<int64_t> pos = {0, 1, 2, 3, 5, 6, 77, 255, 1000, (int64_t{1} << 24) - 3};
  for (auto kind : {NaiveKind::kIndex, NaiveKind::kNormalized, NaiveKind::kBinary, NaiveKind::kSignedBinary,
                    NaiveKind::kSineBinary, NaiveKind::kSineOnly}) {
    const NaiveParams params{kind, 24, 300, 10000.0};
    std::vector<double> d(pos.size() * 24);
    std::vector<float> f(d.size());
    naive_table<double>(params, Positions::list(pos), d);
    naive_table<float>(params, Positions::list(pos), f);
    const auto expected = reference::naive(params, pos);
    EXPECT_LE(max_abs_diff(d, expected), 1e-12 * 2e7) << naive_kind_name(kind);  // index reaches 1.7e7
    // float rounding of values up to 2^24 (index) or in [-1, 1] (others, 5e-7 spec)
    const double tolerance = kind == NaiveKind::kIndex ? 1.0 : kind == NaiveKind::kNormalized ? 1e-2 : 5e-7;
    EXPECT_LE(max_abs_diff(f, expected), tolerance) << naive_kind_name(kind);
  }
}

TEST(Naive, KnownValues) {
  std::vector<float> out(8);
  naive_table<float>({NaiveKind::kBinary, 4}, Positions::list(std::vector<int64_t>{5, 10}), out);
  EXPECT_EQ(out, (std::vector<float>{1, 0, 1, 0, 0, 1, 0, 1}));
  naive_table<float>({NaiveKind::kSignedBinary, 4}, Positions::list(std::vector<int64_t>{5, 10}), out);
  EXPECT_EQ(out, (std::vector<float>{1, -1, 1, -1, -1, 1, -1, 1}));
  std::vector<double> n(3 * 2);
  naive_table<double>({NaiveKind::kNormalized, 2, 3}, Positions::range(0, 3), n);
  EXPECT_EQ(n, (std::vector<double>{0, 0, 0.5, 0.5, 1, 1}));
  // sine-binary column j has period 2^(j+2): column 0 is 0, 1, 0, -1, ...
  std::vector<double> sb(4 * 1);
  naive_table<double>({NaiveKind::kSineBinary, 1}, Positions::range(0, 4), sb);
  EXPECT_NEAR(sb[1], 1.0, 1e-15);
  EXPECT_NEAR(sb[2], 0.0, 1e-15);
  EXPECT_NEAR(sb[3], -1.0, 1e-15);
}

TEST(Naive, Errors) {
  std::vector<float> out(64);
  const std::vector<int64_t> negative = {1, -3};
  expect_error([&] { naive_table<float>({NaiveKind::kBinary, 8}, Positions::list(negative), std::span<float>(out.data(), 16)); },
               "[binary] positions must be >= 0, got -3");
  expect_error([&] { naive_table<float>({NaiveKind::kNormalized, 8, 0}, Positions::range(0, 8), out); },
               "[normalized] length must be at least 1, got 0");
  expect_error([&] { naive_table<float>({NaiveKind::kSineOnly, 8, 0, -2.0}, Positions::range(0, 8), out); },
               "[sine-only] base must be finite and > 0, got -2");
  expect_error([&] { naive_table<float>({NaiveKind::kIndex, 0}, Positions::range(0, 8), out); },
               "[index] dim must be positive, got 0");
}

TEST(Absolute, RegistryNamesRoundTrip) {
  for (const auto& info : absolute_kinds()) {
    EXPECT_EQ(parse_absolute_kind(info.name), info.kind);
    EXPECT_EQ(absolute_kind_name(info.kind), info.name);
    EXPECT_FALSE(info.summary.empty());
  }
  EXPECT_EQ(absolute_kinds().size(), 7u);
  expect_error([] { parse_absolute_kind("rotary"); },
               "[absolute] kind must be one of sinusoidal, index, normalized, binary, signed-binary, sine-binary, "
               "sine-only, got 'rotary'");
}

TEST(Absolute, DispatchesToTheKind) {
  std::vector<double> a(10 * 16);
  absolute_table<double>({AbsoluteKind::kNormalized, 16}, Positions::range(0, 10), a);  // length defaults to N
  EXPECT_EQ(a[9 * 16], 1.0);
  absolute_table<double>({AbsoluteKind::kSinusoidal, 16}, Positions::range(0, 10), a);
  EXPECT_NEAR(a[16 * 3], std::sin(3.0), 1e-15);
}

}  // namespace
}  // namespace posenc::kernels

namespace posenc::kernels {
namespace {
TEST(Absolute, ValidateRefusesBeforeAnyOutput) {
  test::expect_error([] { validate(AbsoluteParams{AbsoluteKind::kNormalized, 8, 10000.0, 1.0, {}, {}, -2}, Positions::range(0, 4)); },
                     "[normalized] length must be at least 1, got -2");
  test::expect_error([] { validate(AbsoluteParams{AbsoluteKind::kSinusoidal, 9}, Positions::range(0, 4)); },
                     "[sinusoidal] dim must be even, got 9");
  SinusoidalGridParams grid;
  grid.height = 2;
  grid.width = 3;
  grid.dim = 12;
  validate(grid, true);  // 12 = 6 * 2: fine in 3D
  grid.dim = 8;
  test::expect_error([&] { validate(grid, true); }, "[sinusoidal-3d] dim must be divisible by 6 (an even share per axis), got 8");
}
}  // namespace
}  // namespace posenc::kernels
