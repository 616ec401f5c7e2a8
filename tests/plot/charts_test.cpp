// render_bands and render_dots: argument errors word for word, the ticks of
// logarithmic axes, and the pixels decoded back (a band's tint between lo and
// hi, nothing of it outside; a dot and its error bar where the values say,
// its points as rings beside it).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "canvas.h"
#include "chart_parts.h"
#include "plot_test_util.h"
#include "posenc/plot/charts.h"

namespace posenc::plot {
namespace {

using testing::argument_error;
using testing::channel_distance;
using testing::Image;

constexpr Rgb kRed{200, 30, 30};

BandFigure one_band() {
  BandFigure f;
  BandSeries s;
  s.x = {128, 256, 512, 1024};
  s.y = {100, 120, 150, 200};
  s.lo = {90, 110, 140, 180};
  s.hi = {110, 130, 160, 220};
  s.label = "rope";
  s.color = kRed;
  f.series = {s};
  f.x_scale = AxisScale::kLog2;
  f.y_scale = AxisScale::kLog10;
  return f;
}

TEST(Charts, BandArgumentErrors) {
  auto with = [](const std::function<void(BandFigure&)>& change) {
    BandFigure f = one_band();
    change(f);
    return argument_error([&] { render_bands(f); });
  };
  EXPECT_EQ(with([](BandFigure&) {}), "no exception");
  EXPECT_EQ(with([](BandFigure& f) { f.series.clear(); }), "[plot] series must hold at least one series, got 0");
  EXPECT_EQ(with([](BandFigure& f) { f.series[0].y.pop_back(); }), "[plot] series 0 has 4 x values and 3 y values");
  EXPECT_EQ(with([](BandFigure& f) { f.series[0].hi.pop_back(); }),
            "[plot] series 0 has 4 x values and 4 lo, 3 hi band values (as many as x, or none)");
  EXPECT_EQ(with([](BandFigure& f) { f.series[0].y[1] = -2; }),
            "[plot] series 0 y values must be > 0 on a log axis, got -2 at index 1");
  EXPECT_EQ(with([](BandFigure& f) { f.series[0].x[0] = 0; }),
            "[plot] series 0 x values must be > 0 on a log axis, got 0 at index 0");
  EXPECT_EQ(with([](BandFigure& f) { f.marker_x = -1; }), "[plot] marker_x must be > 0 on a log axis, got -1");
  EXPECT_EQ(with([](BandFigure& f) { f.series[0].y = {NAN, NAN, NAN, NAN}; }),
            "[plot] series must hold at least one point with finite x and y, got none");
  EXPECT_EQ(with([](BandFigure& f) { f.width = 100; }), "[plot] width must be in [200, 8192], got 100");
  // A lo <= 0 on a log axis is drawn to the bottom, not refused; no band at all is fine.
  EXPECT_EQ(with([](BandFigure& f) { f.series[0].lo[0] = -5; }), "no exception");
  EXPECT_EQ(with([](BandFigure& f) { f.series[0].lo.clear(), f.series[0].hi.clear(); }), "no exception");
}

TEST(Charts, DotArgumentErrors) {
  auto with = [](const std::function<void(DotFigure&)>& change) {
    DotFigure f;
    f.dots = {{"a", 0.5, 0.4, 0.6, kRed, {}}, {"b", 0.7, NAN, NAN, kRed, {}}};
    change(f);
    return argument_error([&] { render_dots(f); });
  };
  EXPECT_EQ(with([](DotFigure&) {}), "no exception");
  EXPECT_EQ(with([](DotFigure& f) { f.dots.clear(); }), "[plot] dots must hold at least one dot, got 0");
  EXPECT_EQ(with([](DotFigure& f) { f.dots[1].value = NAN; }),
            "[plot] dot 1 value must be finite, within +-1e300, got nan");
  EXPECT_EQ(with([](DotFigure& f) { f.dots[0].lo = INFINITY; }),
            "[plot] dot 0 lo must be finite or NaN, within +-1e300, got inf");
  EXPECT_EQ(with([](DotFigure& f) { f.dots[1].points = {0.1, 0.2, 0.3, NAN}; }),
            "[plot] dot 1 point 3 must be finite, within +-1e300, got nan");
  EXPECT_EQ(with([](DotFigure& f) { f.legend = {{"\xff", kRed}}; }),
            "[plot] legend 0 label must be valid UTF-8 without NUL bytes, got byte 0xff at offset 0");
}

std::vector<double> values(const std::vector<detail::TickMark>& marks) {
  std::vector<double> v;
  for (const detail::TickMark& m : marks) v.push_back(m.value);
  return v;
}

TEST(Charts, LogAxisTicks) {
  // Powers of two inside the padded range, labelled as integers.
  const detail::ScaledAxis x = detail::make_axis(AxisScale::kLog2, 128, 2048);
  const auto xt = detail::axis_ticks(x, 8);
  EXPECT_EQ(values(xt), (std::vector<double>{128, 256, 512, 1024, 2048}));
  EXPECT_EQ(xt.back().label, "2048");
  // Padding is 5% of the span in log units: 128 * 16^-0.05 below 128.
  EXPECT_NEAR(x.lo, 128 * std::pow(16.0, -0.05), 1e-9);
  // Three decades: powers of ten only.
  EXPECT_EQ(values(detail::axis_ticks(detail::make_axis(AxisScale::kLog10, 1, 1000), 8)),
            (std::vector<double>{1, 10, 100, 1000}));
  // Under two decades: 1, 2 and 5 times the powers of ten.
  EXPECT_EQ(values(detail::axis_ticks(detail::make_axis(AxisScale::kLog10, 150, 1210), 8)),
            (std::vector<double>{200, 500, 1000}));
  // Under a factor of 2: plain 1-2-5 steps inside the padded range (about 217 .. 239).
  EXPECT_EQ(values(detail::axis_ticks(detail::make_axis(AxisScale::kLog10, 218, 238), 6)),
            (std::vector<double>{220, 225, 230, 235}));
}

TEST(Charts, BandIsTintedBetweenLoAndHiOnly) {
  BandFigure f = one_band();
  f.series[0].y = {100, 100, 100, 100};
  f.series[0].lo = {50, 50, 50, 50};
  f.series[0].hi = {200, 200, 200, 200};
  f.series.push_back(f.series[0]);  // a second, flat series at 400 to fix the range
  f.series[1].y = {400, 400, 400, 400};
  f.series[1].lo.clear(), f.series[1].hi.clear();
  f.series[1].color = {30, 30, 200};
  const Image image(render_bands(f));
  // Plot area: x from kChartLeft, y from kChartTop; the range is [50, 400] padded in log10 units.
  const detail::ScaledAxis y = [&] {
    detail::ScaledAxis a = detail::make_axis(AxisScale::kLog10, 50, 400);
    a.from = detail::kChartTop, a.length = image.height() - detail::kChartTop - detail::kLinesBottom;
    a.flipped = true;
    return a;
  }();
  const int column = detail::kChartLeft + 60;
  // 16% of the red over white.
  const Rgb tint{static_cast<unsigned char>(255 - 0.16 * 55), static_cast<unsigned char>(255 - 0.16 * 225),
                 static_cast<unsigned char>(255 - 0.16 * 225)};
  auto at = [&](double v) { return image.at(column, static_cast<int>(y.pixel(v))); };
  EXPECT_LE(channel_distance(at(70), tint), 3);
  EXPECT_LE(channel_distance(at(150), tint), 3);
  EXPECT_LE(channel_distance(at(100), kRed), 10);  // the line over its band
  EXPECT_GE(channel_distance(at(300), tint), 20);  // above hi: white (or grid)
  EXPECT_GE(channel_distance(at(45), tint), 20);   // below lo
}

// The rows with a pixel near `color` in columns x - half .. x + half, as runs [first, last].
std::vector<std::pair<int, int>> coloured_runs(const Image& image, int x, int half, Rgb color) {
  std::vector<std::pair<int, int>> runs;
  for (int y = 0; y < image.height(); ++y) {
    bool hit = false;
    for (int c = x - half; c <= x + half; ++c) hit = hit || channel_distance(image.at(c, y), color) <= 60;
    if (!hit) continue;
    if (!runs.empty() && runs.back().second == y - 1) {
      runs.back().second = y;
    } else {
      runs.push_back({y, y});
    }
  }
  return runs;
}

TEST(Charts, DotPointsAreRingsBesideTheBar) {
  // One category: its bar and dot left of the slot's centre, its two points as
  // rings right of it, at the two ends of the range they widen to [0, 1].
  DotFigure f;
  f.dots = {{"a", 0.5, 0.45, 0.55, kRed, {0.0, 1.0}}};
  const Image image(render_dots(f));
  const double slot = f.width - detail::kChartLeft - detail::kChartRight;
  const double centre = detail::kChartLeft + slot / 2;
  // Each ring (radius 3) is one run of rows within 4 columns of its centre.
  const auto rings = coloured_runs(image, static_cast<int>(std::floor(centre + 0.2 * slot)), 4, kRed);
  const auto bar = coloured_runs(image, static_cast<int>(std::floor(centre - 0.2 * slot)), 0, kRed);
  ASSERT_EQ(rings.size(), 2u);
  ASSERT_EQ(bar.size(), 1u);  // the bar through its dot, nothing else in that column
  for (const auto& r : rings) EXPECT_NEAR(r.second - r.first, 7, 2);
  const double top_ring = (rings[0].first + rings[0].second) / 2.0;
  const double bottom_ring = (rings[1].first + rings[1].second) / 2.0;
  EXPECT_GT(bottom_ring - top_ring, 0.8 * (image.height() - detail::kChartTop) * 0.5);
  // The bar spans 0.45..0.55: a tenth of the rings' distance, centred between them.
  const double bar_length = bar[0].second - bar[0].first;
  EXPECT_NEAR(bar_length, 0.1 * (bottom_ring - top_ring), 10.0);  // plus the dot's 9 px
  EXPECT_NEAR((bar[0].first + bar[0].second) / 2.0, (top_ring + bottom_ring) / 2, 2.0);
  // Without points the bar is at the slot's centre.
  f.dots[0].points.clear();
  const Image plain(render_dots(f));
  EXPECT_EQ(coloured_runs(plain, static_cast<int>(std::floor(centre)), 0, kRed).size(), 1u);
  EXPECT_TRUE(coloured_runs(plain, static_cast<int>(std::floor(centre - 0.2 * slot)), 8, kRed).empty());
  EXPECT_TRUE(coloured_runs(plain, static_cast<int>(std::floor(centre + 0.2 * slot)), 8, kRed).empty());
}

TEST(Charts, LongDotNamesGrowTheImageAndAreNotCut) {
  // A name longer than 0.35 of the height is written whole: the image grows
  // downwards by what it needs, and the name's ink spans its measured width.
  DotFigure f;
  f.dots = {{"a", 0.5, 0.4, 0.6, kRed, {}}};
  EXPECT_EQ(Image(render_dots(f)).height(), f.height);
  const std::string name = "learnable-sinusoidal+shaw-learnable-sinusoidal";
  f.dots[0].label = name;
  detail::Canvas scratch(1, 1);
  const double width = scratch.text_width(name, detail::kTickSize);
  ASSERT_GT(width, 0.35 * f.height + 20);  // the case: longer than the old cut
  const Image image(render_dots(f));
  EXPECT_EQ(image.height(),
            f.height + static_cast<int>(std::ceil(width)) - static_cast<int>(std::ceil(0.35 * f.height)));
  // The name's rows: ink within 6 columns of the slot's centre, below the
  // plot's bottom tick (the name starts 7 rows under the plot, the tick ends 5).
  const int centre =
      static_cast<int>(std::floor(detail::kChartLeft + (f.width - detail::kChartLeft - detail::kChartRight) / 2.0));
  const int top = image.height() - static_cast<int>(std::ceil(width)) - 8;
  int first = -1, last = -1;
  for (int y = top; y < image.height(); ++y) {
    bool ink = false;
    for (int x = centre - 6; x <= centre + 6; ++x) ink = ink || channel_distance(image.at(x, y), {255, 255, 255}) > 100;
    if (!ink) continue;
    if (first < 0) first = y;
    last = y;
  }
  ASSERT_GE(first, 0);
  EXPECT_NEAR(last - first, width, 4.0);
  EXPECT_LT(last, image.height() - 1);
}

}  // namespace
}  // namespace posenc::plot
