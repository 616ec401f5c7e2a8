// render_lines: argument errors word for word, and the pixels decoded back:
// y = x lies on the plot area's diagonal, NaN breaks the line, the dashed
// marker, the legend, the text bands.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "layout.h"
#include "plot_test_util.h"

namespace posenc::plot {
namespace {

using detail::Rect;
using testing::argument_error;
using testing::channel_distance;
using testing::dark;
using testing::Image;

constexpr Rgb kFirst{31, 119, 180};   // tab10 blue, the first series
constexpr Rgb kSecond{255, 127, 14};  // tab10 orange
constexpr Rgb kMarker{64, 64, 64};

// 40 levels: the core of a 2-pixel anti-aliased line is the series colour
// (within rounding), while grid, text edges and white are far from it.
bool is(Rgb c, Rgb series) { return channel_distance(c, series) <= 40; }

LineSeries series(const std::function<double(double)>& f, double x0, double x1, int n, std::string label = "") {
  LineSeries s;
  for (int k = 0; k < n; ++k) {
    const double x = x0 + (x1 - x0) * k / (n - 1);
    s.x.push_back(x);
    s.y.push_back(f(x));
  }
  s.label = std::move(label);
  return s;
}

TEST(Lines, ArgumentErrors) {
  auto with = [](const std::function<void(LineFigure&)>& change) {
    LineFigure f;
    f.series = {series([](double x) { return x; }, 0, 4, 5)};
    change(f);
    return argument_error([&] { render_lines(f); });
  };
  EXPECT_EQ(with([](LineFigure& f) { f.series.clear(); }), "[plot] series must hold at least one series, got 0");
  EXPECT_EQ(with([](LineFigure& f) { f.series[0].y.pop_back(); }), "[plot] series 0 has 5 x values and 4 y values");
  EXPECT_EQ(with([](LineFigure& f) {
              f.series.push_back(f.series[0]);
              f.series[1].x.push_back(9);
            }),
            "[plot] series 1 has 6 x values and 5 y values");
  EXPECT_EQ(with([](LineFigure& f) { f.series[0].y = {NAN, NAN, INFINITY, NAN, -INFINITY}; }),
            "[plot] series must hold at least one point with finite x and y, got none");
  EXPECT_EQ(with([](LineFigure& f) { f.series[0] = LineSeries{}; }),
            "[plot] series must hold at least one point with finite x and y, got none");
  EXPECT_EQ(with([](LineFigure& f) { f.series[0].x[3] = 5e300; }),
            "[plot] series 0 x values must be within +-1e300 where finite, got 5.0000000000000003e+300 at index 3");
  EXPECT_EQ(with([](LineFigure& f) { f.series[0].y[0] = -1e301; }),
            "[plot] series 0 y values must be within +-1e300 where finite, got -1.0000000000000001e+301 at index 0");
  EXPECT_EQ(with([](LineFigure& f) { f.series[0].label = "\x80"; }),
            "[plot] series 0 label must be valid UTF-8 without NUL bytes, got byte 0x80 at offset 0");
  EXPECT_EQ(with([](LineFigure& f) { f.title = "\xf4\x90\x80\x80"; }),  // past U+10FFFF
            "[plot] title must be valid UTF-8 without NUL bytes, got byte 0xf4 at offset 0");
  EXPECT_EQ(with([](LineFigure& f) { f.x_label = "a\xe2\x82"; }),
            "[plot] x_label must be valid UTF-8 without NUL bytes, got byte 0xe2 at offset 1");
  EXPECT_EQ(with([](LineFigure& f) { f.y_label = "\xe0\x80\xaf"; }),  // overlong '/'
            "[plot] y_label must be valid UTF-8 without NUL bytes, got byte 0xe0 at offset 0");
  EXPECT_EQ(with([](LineFigure& f) { f.y_label = "ok \xf0\x8f\xbf\xbf"; }),  // overlong U+FFFF
            "[plot] y_label must be valid UTF-8 without NUL bytes, got byte 0xf0 at offset 3");
  EXPECT_EQ(with([](LineFigure& f) { f.width = 100; }), "[plot] width must be in [200, 8192], got 100");
  EXPECT_EQ(with([](LineFigure& f) { f.height = 10000; }), "[plot] height must be in [200, 8192], got 10000");
  EXPECT_EQ(with([](LineFigure& f) { f.marker_x = NAN; }),
            "[plot] marker_x must be a finite number within +-1e300, got nan");
  EXPECT_EQ(with([](LineFigure& f) { f.marker_x = INFINITY; }),
            "[plot] marker_x must be a finite number within +-1e300, got inf");
  // Valid UTF-8 beyond ASCII is accepted.
  EXPECT_EQ(with([](LineFigure& f) { f.title = "\xce\x94 = 1, \xe2\x80\x94, \xf0\x9f\x98\x80"; }), "no exception");
}

TEST(Lines, IsAPngOfTheFigureSize) {
  LineFigure f;
  f.series = {series([](double x) { return x * x; }, -1, 1, 21)};
  f.width = 417;
  f.height = 233;
  const std::vector<unsigned char> png = render_lines(f);
  const auto chunks = testing::png_chunks(png);
  ASSERT_EQ(chunks.front().type, "IHDR");
  EXPECT_EQ(testing::big_endian32(&chunks.front().data[0]), 417u);
  EXPECT_EQ(testing::big_endian32(&chunks.front().data[4]), 233u);
  EXPECT_EQ(chunks.back().type, "IEND");
  for (const auto& c : chunks) EXPECT_TRUE(c.crc_ok) << c.type;
  const Image image(png);
  EXPECT_EQ(image.width(), 417);
  EXPECT_EQ(image.height(), 233);
}

// The rows of column x whose pixels are the series colour.
std::vector<int> rows_of(const Image& image, int x, Rect plot, Rgb color) {
  std::vector<int> rows;
  for (int y = plot.y; y < plot.y + plot.h; ++y)
    if (is(image.at(x, y), color)) rows.push_back(y);
  return rows;
}

// With equal x and y ranges, y = x (or y = -x) runs along a diagonal of the
// plot area: the pixel row at column x is the diagonal's row there.
void expect_diagonal(int width, int height, bool rising) {
  LineFigure f;
  f.series = {series([&](double x) { return rising ? x : -x; }, 0, 100, 101)};
  f.width = width;
  f.height = height;
  const Image image(render_lines(f));
  const Rect p = detail::line_layout(width, height).plot;
  // The data cover the middle 100/110 of each axis (5% padding each side).
  int checked = 0;
  for (int x = p.x + p.w / 10; x < p.x + p.w * 9 / 10; ++x) {
    const double u = (x + 0.5 - p.x) / p.w;  // 0 at the left edge, 1 at the right
    const double diagonal = rising ? p.y + p.h * (1 - u) : p.y + p.h * u;
    const std::vector<int> rows = rows_of(image, x, p, kFirst);
    ASSERT_FALSE(rows.empty()) << "column " << x;
    // 2 px: the line is 2 px wide, so its pixels reach ~1.2 px either side of
    // the diagonal at this slope, plus half a pixel of sampling.
    for (const int y : rows) EXPECT_NEAR(y + 0.5, diagonal, 2.0) << "column " << x;
    ++checked;
  }
  EXPECT_GT(checked, 100);
}

TEST(Lines, IdentityRunsAlongTheDiagonal) {
  expect_diagonal(720, 480, true);
  expect_diagonal(400, 640, true);
  expect_diagonal(720, 480, false);
}

TEST(Lines, NaNBreaksTheLine) {
  LineFigure f;
  f.series = {series([](double x) { return (x > 40 && x < 60) ? NAN : x; }, 0, 100, 101)};
  const Image image(render_lines(f));
  const Rect p = detail::line_layout(720, 480).plot;
  const detail::AxisRange xr = detail::padded_range(0, 100);
  auto column = [&](double x) { return static_cast<int>(std::floor(p.x + (x - xr.lo) / (xr.hi - xr.lo) * p.w)); };
  // Points 40 and 60 are the last and first drawn; the round caps reach 1 px past them.
  for (int x = column(41.5); x <= column(58.5); ++x) EXPECT_TRUE(rows_of(image, x, p, kFirst).empty()) << x;
  EXPECT_FALSE(rows_of(image, column(30), p, kFirst).empty());
  EXPECT_FALSE(rows_of(image, column(70), p, kFirst).empty());
}

TEST(Lines, LonePointIsADot) {
  LineFigure f;
  f.series = {{{1, 2, 3}, {NAN, 7, NAN}, ""}};
  const Image image(render_lines(f));
  const Rect p = detail::line_layout(720, 480).plot;
  // The single finite point sits in the middle of both widened ranges.
  const Rect centre{p.x + p.w / 2 - 3, p.y + p.h / 2 - 3, 6, 6};
  EXPECT_GT(image.count(centre, [](Rgb c) { return is(c, kFirst); }), 0);
  EXPECT_EQ(image.count(p, [](Rgb c) { return is(c, kFirst); }), image.count(centre, [](Rgb c) { return is(c, kFirst); }));
}

TEST(Lines, DashedMarker) {
  LineFigure f;
  f.series = {series([](double) { return 1.0; }, 0, 100, 11)};
  const Rect p = detail::line_layout(720, 480).plot;
  const detail::AxisRange xr = detail::padded_range(0, 100);
  const int x = static_cast<int>(std::floor(p.x + (50 - xr.lo) / (xr.hi - xr.lo) * p.w));
  const Rect column{x, p.y, 1, p.h};
  auto marker = [](Rgb c) { return c == kMarker; };
  EXPECT_EQ(Image(render_lines(f)).count(column, marker), 0);
  f.marker_x = 50;
  const int on = Image(render_lines(f)).count(column, marker);
  // Dashes of 6 on, 4 off: 60% of the column (less where the series crosses it).
  EXPECT_GT(on, p.h * 50 / 100);
  EXPECT_LT(on, p.h * 65 / 100);
}

TEST(Lines, MarkerOutsideTheDataWidensTheRange) {
  LineFigure f;
  f.series = {series([](double x) { return x; }, 0, 10, 11)};
  f.marker_x = 30;
  const Rect p = detail::line_layout(720, 480).plot;
  const detail::AxisRange xr = detail::padded_range(0, 30);
  const int x = static_cast<int>(std::floor(p.x + (30 - xr.lo) / (xr.hi - xr.lo) * p.w));
  EXPECT_GT(Image(render_lines(f)).count(Rect{x, p.y, 1, p.h}, [](Rgb c) { return c == kMarker; }), p.h / 2);
}

TEST(Lines, LegendForTwoOrMoreSeries) {
  // Both series low in the plot: the top-right quarter holds only the legend.
  LineFigure f;
  f.series = {series([](double x) { return 0.1 * x; }, 0, 10, 11, "first"),
              series([](double) { return 0.0; }, 0, 10, 11, "second")};
  f.series[0].y.back() = 10;  // the range reaches up to 10; the data stay below 1 elsewhere
  f.series[0].x.back() = 0;
  const Rect p = detail::line_layout(720, 480).plot;
  const Rect corner{p.x + p.w / 2, p.y, p.w / 2, p.h / 4};
  const Image two(render_lines(f));
  EXPECT_GT(two.count(corner, [](Rgb c) { return is(c, kFirst); }), 10);
  EXPECT_GT(two.count(corner, [](Rgb c) { return is(c, kSecond); }), 10);
  EXPECT_GT(two.count(corner, dark), 20);  // the labels
  f.series.pop_back();
  const Image one(render_lines(f));
  EXPECT_EQ(one.count(corner, [](Rgb c) { return is(c, kFirst); }), 0);
  EXPECT_EQ(one.count(corner, dark), 0);
}

TEST(Lines, TextLandsInItsBands) {
  LineFigure plain;
  plain.series = {series([](double x) { return std::exp(-x); }, 0, 5, 50)};
  LineFigure labelled = plain;
  labelled.title = "Proximity against offset";
  labelled.x_label = "offset";
  labelled.y_label = "dot product";
  const Image without(render_lines(plain));
  const Image with(render_lines(labelled));
  const detail::LineLayout l = detail::line_layout(720, 480);
  for (const auto& [name, band] : {std::pair{"title", l.title_band}, std::pair{"x label", l.x_label_band},
                                   std::pair{"y label", l.y_label_band}}) {
    EXPECT_EQ(without.count(band, dark), 0) << name;
    EXPECT_GT(with.count(band, dark), 20) << name;
  }
}

TEST(Lines, SameInputSameBytes) {
  LineFigure f;
  f.series = {series([](double x) { return std::sin(x); }, 0, 10, 200, "sin"),
              series([](double x) { return std::cos(x); }, 0, 10, 200, "cos")};
  f.marker_x = 3;
  const std::vector<unsigned char> a = render_lines(f);
  EXPECT_EQ(a, render_lines(f));
  f.series[1].y[100] += 0.5;
  EXPECT_NE(a, render_lines(f));
}

}  // namespace
}  // namespace posenc::plot
