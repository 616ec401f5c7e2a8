// The axis arithmetic behind every figure: padded ranges, 1-2-5 steps (against
// a brute-force search), ticks, tick labels; and the layout's invariants.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "layout.h"
#include "plot_test_util.h"

namespace posenc::plot::detail {
namespace {

// The smallest step m * 10^k (m in {1, 2, 5}) with span / step <= max_ticks - 1,
// found by walking every candidate from 1e-15 upwards in long double.
long double brute_force_step(long double span, int max_ticks) {
  for (int k = -15; k <= 15; ++k) {
    for (const int m : {1, 2, 5}) {
      const long double step = m * std::pow(10.0L, k);
      // 1e-9: the same relative slack the tick code allows for rounding.
      if (span / step <= (max_ticks - 1) * (1 + 1e-9L)) return step;
    }
  }
  return -1;
}

TEST(Axes, NiceStepIsTheSmallest125StepThatFits) {
  std::mt19937_64 rng(6);
  std::uniform_real_distribution<double> exponent(-6, 6);
  std::uniform_int_distribution<int> ticks(2, 15);
  for (int trial = 0; trial < 2000; ++trial) {
    const double span = std::pow(10.0, exponent(rng));
    const int max_ticks = ticks(rng);
    const long double expected = brute_force_step(span, max_ticks);
    // 1e-12 relative: pow(10, k) in double against long double.
    EXPECT_NEAR(nice_step(span, max_ticks) / expected, 1.0, 1e-12) << "span " << span << ", max_ticks " << max_ticks;
  }
  // Spans that are exact multiples: 10 in 6 ticks is 2 (0 2 4 6 8 10), 255 in 13 ticks is 50.
  EXPECT_DOUBLE_EQ(nice_step(10, 6), 2);
  EXPECT_DOUBLE_EQ(nice_step(100, 11), 10);
  EXPECT_DOUBLE_EQ(nice_step(255, 13), 50);
  EXPECT_DOUBLE_EQ(nice_step(255, 14), 20);
}

TEST(Axes, TicksAreTheStepMultiplesInsideTheRange) {
  const struct {
    double lo, hi;
    int max_ticks;
    double min_step;
  } cases[] = {{0, 255, 8, 1}, {-5, 105, 7, 0}, {-1.3, 0.7, 6, 0}, {0.0012, 0.0017, 5, 0}, {0, 3, 10, 1}, {-2e5, 7e5, 5, 0}};
  for (const auto& c : cases) {
    const Ticks t = nice_ticks(c.lo, c.hi, c.max_ticks, c.min_step);
    ASSERT_FALSE(t.values.empty());
    EXPECT_GE(t.step, c.min_step);
    EXPECT_LE(static_cast<int>(t.values.size()), c.max_ticks);
    EXPECT_GE(t.values.front(), c.lo - 1e-12 * t.step);
    EXPECT_LT(t.values.front() - t.step, c.lo);  // none missing below
    EXPECT_LE(t.values.back(), c.hi + 1e-12 * t.step);
    EXPECT_GT(t.values.back() + t.step, c.hi);  // none missing above
    for (size_t i = 0; i < t.values.size(); ++i) {
      const double k = t.values[i] / t.step;
      EXPECT_NEAR(k, std::round(k), 1e-9) << "a multiple of the step";
      if (i > 0) {
        EXPECT_NEAR(t.values[i] - t.values[i - 1], t.step, 1e-9 * t.step);
      }
    }
  }
  // Integer indices never get a fractional step.
  EXPECT_EQ(nice_ticks(0, 3, 10, 1).values, (std::vector<double>{0, 1, 2, 3}));
  EXPECT_EQ(nice_ticks(0, 0, 10, 1).values, (std::vector<double>{0}));
  EXPECT_EQ(nice_ticks(0, 255, 8, 1).values, (std::vector<double>{0, 50, 100, 150, 200, 250}));
}

TEST(Axes, TickLabels) {
  EXPECT_EQ(format_tick(250, 50), "250");
  EXPECT_EQ(format_tick(-3, 1), "-3");
  EXPECT_EQ(format_tick(0.4, 0.2), "0.4");
  EXPECT_EQ(format_tick(0.25, 0.05), "0.25");
  EXPECT_EQ(format_tick(-0.6000000000000001, 0.2), "-0.6");
  EXPECT_EQ(format_tick(1e-17, 0.1), "0");  // k * step rounding next to zero
  EXPECT_EQ(format_tick(-1e-17, 0.1), "0");
  EXPECT_EQ(format_tick(1.5e-5, 5e-6), "1.5e-05");
  EXPECT_EQ(format_tick(2e6, 5e5), "2.0e+06");
}

TEST(Axes, PaddedRange) {
  const AxisRange r = padded_range(0, 100);
  EXPECT_DOUBLE_EQ(r.lo, -5);
  EXPECT_DOUBLE_EQ(r.hi, 105);
  const AxisRange c = padded_range(3, 3);
  EXPECT_DOUBLE_EQ(c.lo, 2.7);
  EXPECT_DOUBLE_EQ(c.hi, 3.3);
  const AxisRange z = padded_range(0, 0);
  EXPECT_DOUBLE_EQ(z.lo, -0.5);
  EXPECT_DOUBLE_EQ(z.hi, 0.5);
  const AxisRange n = widen_single(-10);
  EXPECT_DOUBLE_EQ(n.lo, -11);
  EXPECT_DOUBLE_EQ(n.hi, -9);
}

bool inside(Rect inner, Rect outer) {
  return inner.x >= outer.x && inner.y >= outer.y && inner.x + inner.w <= outer.x + outer.w &&
         inner.y + inner.h <= outer.y + outer.h;
}
bool disjoint(Rect a, Rect b) {
  return a.x + a.w <= b.x || b.x + b.w <= a.x || a.y + a.h <= b.y || b.y + b.h <= a.y;
}

TEST(Axes, LayoutPartsFitAndDoNotOverlap) {
  for (const auto& [w, h] : {std::pair{200, 200}, std::pair{720, 600}, std::pair{8192, 8192}}) {
    const Rect figure{0, 0, w, h};
    const HeatmapLayout l = heatmap_layout(w, h);
    const Rect parts[] = {l.plot, l.colorbar, l.title_band, l.x_label_band, l.y_label_band, l.colorbar_label_band};
    for (const Rect& p : parts) {
      EXPECT_TRUE(inside(p, figure));
      EXPECT_GT(p.w, 0);
      EXPECT_GT(p.h, 0);
    }
    for (size_t i = 0; i < std::size(parts); ++i)
      for (size_t j = i + 1; j < std::size(parts); ++j) EXPECT_TRUE(disjoint(parts[i], parts[j])) << i << ' ' << j;
    EXPECT_EQ(l.colorbar.y, l.plot.y);
    EXPECT_EQ(l.colorbar.h, l.plot.h);
    EXPECT_GT(l.colorbar.x, l.plot.x + l.plot.w);

    const LineLayout m = line_layout(w, h);
    const Rect line_parts[] = {m.plot, m.title_band, m.x_label_band, m.y_label_band};
    for (const Rect& p : line_parts) {
      EXPECT_TRUE(inside(p, figure));
      EXPECT_GT(p.w, 0);
    }
    for (size_t i = 0; i < std::size(line_parts); ++i)
      for (size_t j = i + 1; j < std::size(line_parts); ++j) EXPECT_TRUE(disjoint(line_parts[i], line_parts[j]));
  }
}

}  // namespace
}  // namespace posenc::plot::detail
