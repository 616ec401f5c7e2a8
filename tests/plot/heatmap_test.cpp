// render_heatmap: argument errors word for word, a valid PNG of the figure's
// size, and the pixels decoded back: every cell centre has the colour of its
// value, the colour bar spans the map, the text lands in its bands.
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
using testing::dark;
using testing::Image;
using testing::near_color;

// Centre pixel of cell (i, j) of the plot area: the cells stretch over it.
std::pair<int, int> cell_centre(Rect plot, int64_t rows, int64_t cols, int64_t i, int64_t j) {
  const long double x = plot.x + (j + 0.5L) * plot.w / cols;
  const long double y = plot.y + (i + 0.5L) * plot.h / rows;
  return {static_cast<int>(std::floor(x)), static_cast<int>(std::floor(y))};
}

// Expects every cell centre of the figure (every stride-th along the
// anti-diagonals, which still meets every row and column) to show
// colormap_color(map, t(v)) with t = (v - lo) / (hi - lo), in long double here.
// 2 levels: the allowance of the brief; the renderer copies the cell colour exactly.
void expect_cells(const HeatmapFigure& f, long double lo, long double hi, int64_t stride = 1) {
  const Image image(render_heatmap(f));
  const Rect plot = detail::heatmap_layout(f.width, f.height).plot;
  int failures = 0;
  for (int64_t i = 0; i < f.rows; ++i) {
    for (int64_t j = (stride - i % stride) % stride; j < f.cols; j += stride) {
      const double v = f.values[static_cast<size_t>(i * f.cols + j)];
      const Rgb expected = std::isfinite(v) ? colormap_color(f.colormap, static_cast<double>((v - lo) / (hi - lo)))
                                            : Rgb{128, 128, 128};
      const auto [x, y] = cell_centre(plot, f.rows, f.cols, i, j);
      if (!near_color(image.at(x, y), expected, 2) && ++failures <= 5) {
        ADD_FAILURE() << "cell (" << i << ", " << j << ") value " << v << " at pixel (" << x << ", " << y
                      << "): " << image.at(x, y) << ", expected " << expected;
      }
    }
  }
  EXPECT_EQ(failures, 0);
}

struct Matrix {
  std::vector<double> values;
  int64_t rows, cols;
  HeatmapFigure figure(ColorMap map = ColorMap::kSequential) const {
    HeatmapFigure f;
    f.values = values;
    f.rows = rows;
    f.cols = cols;
    f.colormap = map;
    return f;
  }
};

Matrix make(int64_t rows, int64_t cols, const std::function<double(int64_t, int64_t)>& value) {
  Matrix m{std::vector<double>(static_cast<size_t>(rows * cols)), rows, cols};
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) m.values[static_cast<size_t>(i * cols + j)] = value(i, j);
  return m;
}

TEST(Heatmap, ArgumentErrors) {
  const Matrix m = make(3, 4, [](int64_t i, int64_t j) { return i + j; });
  auto with = [&](const std::function<void(HeatmapFigure&)>& change) {
    HeatmapFigure f = m.figure();
    change(f);
    return argument_error([&] { render_heatmap(f); });
  };
  EXPECT_EQ(with([](HeatmapFigure& f) { f.rows = 0; }), "[plot] rows must be >= 1, got 0");
  EXPECT_EQ(with([](HeatmapFigure& f) { f.cols = -3; }), "[plot] cols must be >= 1, got -3");
  EXPECT_EQ(with([](HeatmapFigure& f) { f.rows = 40000; }),
            "[plot] rows must be <= 32767 (Cairo's largest image), got 40000");
  EXPECT_EQ(with([](HeatmapFigure& f) { f.cols = 32768; }),
            "[plot] cols must be <= 32767 (Cairo's largest image), got 32768");
  EXPECT_EQ(with([&](HeatmapFigure& f) { f.values = std::span(m.values).first(11); }),
            "[plot] values holds 11 numbers, rows * cols = 12");
  EXPECT_EQ(with([](HeatmapFigure& f) { f.rows = 4; }), "[plot] values holds 12 numbers, rows * cols = 16");
  EXPECT_EQ(with([](HeatmapFigure& f) { f.width = 50; }), "[plot] width must be in [200, 8192], got 50");
  EXPECT_EQ(with([](HeatmapFigure& f) { f.width = 8193; }), "[plot] width must be in [200, 8192], got 8193");
  EXPECT_EQ(with([](HeatmapFigure& f) { f.height = 199; }), "[plot] height must be in [200, 8192], got 199");
  EXPECT_EQ(with([](HeatmapFigure& f) { f.title = "ab\xff"; }),
            "[plot] title must be valid UTF-8 without NUL bytes, got byte 0xff at offset 2");
  EXPECT_EQ(with([](HeatmapFigure& f) { f.x_label = std::string("x\0y", 3); }),
            "[plot] x_label must be valid UTF-8 without NUL bytes, got byte 0x00 at offset 1");
  EXPECT_EQ(with([](HeatmapFigure& f) { f.y_label = "caf\xc3"; }),  // cut short
            "[plot] y_label must be valid UTF-8 without NUL bytes, got byte 0xc3 at offset 3");
  EXPECT_EQ(with([](HeatmapFigure& f) { f.colorbar_label = "\xc0\x80"; }),  // overlong NUL
            "[plot] colorbar_label must be valid UTF-8 without NUL bytes, got byte 0xc0 at offset 0");
  EXPECT_EQ(with([](HeatmapFigure& f) { f.title = "\xed\xa0\x80"; }),  // a surrogate
            "[plot] title must be valid UTF-8 without NUL bytes, got byte 0xed at offset 0");
  EXPECT_EQ(with([](HeatmapFigure& f) { f.value_min = NAN; }),
            "[plot] value_min must be a finite number within +-1e300, got nan");
  EXPECT_EQ(with([](HeatmapFigure& f) { f.value_max = -INFINITY; }),
            "[plot] value_max must be a finite number within +-1e300, got -inf");
  EXPECT_EQ(with([](HeatmapFigure& f) { f.value_max = 2e300; }),
            "[plot] value_max must be a finite number within +-1e300, got 2.0000000000000001e+300");
  EXPECT_EQ(with([](HeatmapFigure& f) { f.value_min = 5, f.value_max = 3; }),
            "[plot] value_min must be < value_max, got 5 and 3");
  EXPECT_EQ(with([](HeatmapFigure& f) { f.value_min = 1, f.value_max = 1; }),
            "[plot] value_min must be < value_max, got 1 and 1");
  // One bound given, the other from the values (0 .. 5).
  EXPECT_EQ(with([](HeatmapFigure& f) { f.value_min = 10; }), "[plot] value_min must be < value_max, got 10 and 5");
  std::vector<double> huge = m.values;
  huge[7] = -3e300;
  EXPECT_EQ(with([&](HeatmapFigure& f) { f.values = huge; }),
            "[plot] values must be within +-1e300 where finite, got -3.0000000000000002e+300 at index 7");
}

TEST(Heatmap, IsAPngOfTheFigureSize) {
  const Matrix m = make(5, 7, [](int64_t i, int64_t j) { return std::sin(i * 0.7 + j); });
  for (const auto& [w, h] : {std::pair{200, 200}, std::pair{720, 600}, std::pair{333, 517}}) {
    HeatmapFigure f = m.figure();
    f.width = w;
    f.height = h;
    const std::vector<unsigned char> png = render_heatmap(f);
    ASSERT_GE(png.size(), 8u);
    EXPECT_EQ(std::vector<unsigned char>(png.begin(), png.begin() + 8),
              (std::vector<unsigned char>{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'}));
    const auto chunks = testing::png_chunks(png);
    ASSERT_GE(chunks.size(), 3u);
    ASSERT_EQ(chunks.front().type, "IHDR");
    ASSERT_EQ(chunks.front().data.size(), 13u);
    EXPECT_EQ(testing::big_endian32(&chunks.front().data[0]), static_cast<uint32_t>(w));
    EXPECT_EQ(testing::big_endian32(&chunks.front().data[4]), static_cast<uint32_t>(h));
    EXPECT_EQ(chunks.front().data[8], 8);  // bit depth
    EXPECT_EQ(chunks.front().data[9], 2);  // colour type: RGB, opaque
    EXPECT_EQ(chunks.back().type, "IEND");
    for (const auto& c : chunks) EXPECT_TRUE(c.crc_ok) << c.type;
    const Image image(png);
    EXPECT_EQ(image.width(), w);
    EXPECT_EQ(image.height(), h);
    EXPECT_EQ(image.format(), CAIRO_FORMAT_RGB24);
  }
}

TEST(Heatmap, EveryCellShowsItsValueRowZeroAtTheTop) {
  // Distinct values, so a flipped or transposed image fails: v = i * cols + j.
  const Matrix m = make(6, 8, [](int64_t i, int64_t j) { return static_cast<double>(i * 8 + j); });
  expect_cells(m.figure(), 0, 47);
  HeatmapFigure wide = m.figure(ColorMap::kDiverging);  // default range: +-max|v|
  wide.width = 1000;
  wide.height = 300;
  expect_cells(wide, -47, 47);
}

TEST(Heatmap, LeftToRightRamp) {
  const Matrix ramp = make(4, 16, [](int64_t, int64_t j) { return -1.0 + 0.25 * static_cast<double>(j); });
  expect_cells(ramp.figure(), -1, 2.75);
}

TEST(Heatmap, LargeMatrices) {
  // 256 x 256 proximity-like values: cells of ~2 px, every centre checked.
  const Matrix m = make(256, 256, [](int64_t i, int64_t j) {
    return std::cos(0.05 * static_cast<double>(i - j)) * std::exp(-0.01 * std::abs(static_cast<double>(i - j)));
  });
  long double lo = INFINITY, hi = -INFINITY;
  for (const double v : m.values) lo = std::min<long double>(lo, v), hi = std::max<long double>(hi, v);
  expect_cells(m.figure(), lo, hi);
  // 1024 x 768 on 960 x 1130 pixels: a plot area of 776 x 1030, so every cell
  // owns at least one pixel (smooth values keep the PNG quick to encode).
  const Matrix big = make(1024, 768, [](int64_t i, int64_t j) {
    return std::sin(0.01 * static_cast<double>(i)) + std::cos(0.02 * static_cast<double>(j));
  });
  HeatmapFigure f = big.figure(ColorMap::kDiverging);
  f.width = 960;
  f.height = 1130;
  long double largest = 0;
  for (const double v : big.values) largest = std::max<long double>(largest, std::abs(v));
  expect_cells(f, -largest, largest, 5);
}

TEST(Heatmap, NonFiniteCellsAreGreyAndLeaveTheRangeAlone) {
  Matrix m = make(3, 5, [](int64_t i, int64_t j) { return static_cast<double>(i * 5 + j); });
  m.values[1] = NAN;
  m.values[7] = INFINITY;
  m.values[14] = -INFINITY;  // the largest finite value is now 13
  expect_cells(m.figure(), 0, 13);
  const Matrix none = make(2, 2, [](int64_t, int64_t) { return NAN; });
  expect_cells(none.figure(), 0, 1);
}

TEST(Heatmap, ExplicitRangeClampsAndDivergingCentresOnZero) {
  const Matrix m = make(1, 5, [](int64_t, int64_t j) { return std::vector<double>{-20, -10, 0, 5, 20}[j]; });
  HeatmapFigure f = m.figure();
  f.value_min = -10;
  f.value_max = 10;
  expect_cells(f, -10, 10);  // -20 and 20 clamp to the ends
  // Diverging default: +-max|v| = +-20, so 0 is the centre: white.
  HeatmapFigure d = m.figure(ColorMap::kDiverging);
  const Image image(render_heatmap(d));
  const Rect plot = detail::heatmap_layout(d.width, d.height).plot;
  const auto [x, y] = cell_centre(plot, 1, 5, 0, 2);
  EXPECT_EQ(image.at(x, y), (Rgb{255, 255, 255}));
  expect_cells(d, -20, 20);
  // One bound given: the other comes from the values.
  HeatmapFigure one = m.figure();
  one.value_max = 0;
  expect_cells(one, -20, 0);
}

TEST(Heatmap, ConstantMatrixSitsInTheMiddleOfTheMap) {
  const Matrix m = make(2, 3, [](int64_t, int64_t) { return 4.0; });
  const Image image(render_heatmap(m.figure()));
  const Rect plot = detail::heatmap_layout(720, 600).plot;
  const auto [x, y] = cell_centre(plot, 2, 3, 1, 1);
  EXPECT_PRED3(near_color, image.at(x, y), colormap_color(ColorMap::kSequential, 0.5), 2);
}

TEST(Heatmap, ColourBarSpansTheMapTopToBottom) {
  const Matrix m = make(3, 3, [](int64_t i, int64_t j) { return static_cast<double>(i - j); });
  for (const ColorMap map : {ColorMap::kSequential, ColorMap::kDiverging}) {
    const Image image(render_heatmap(m.figure(map)));
    const Rect bar = detail::heatmap_layout(720, 600).colorbar;
    const int x = bar.x + bar.w / 2;
    // 2 levels: the end rows are the ends of the map.
    EXPECT_PRED3(near_color, image.at(x, bar.y), colormap_color(map, 1.0), 2);
    EXPECT_PRED3(near_color, image.at(x, bar.y + bar.h - 1), colormap_color(map, 0.0), 2);
    // In between, each row is the map at its height (linear, value_max on top).
    for (int r = 0; r < bar.h; r += 7) {
      const double t = 1.0 - static_cast<double>(r) / (bar.h - 1);
      EXPECT_PRED3(near_color, image.at(x, bar.y + r), colormap_color(map, t), 2) << "row " << r;
    }
    // The bar is as wide as the layout says: the same colour across it.
    EXPECT_EQ(image.at(bar.x, bar.y + bar.h / 2), image.at(bar.x + bar.w - 1, bar.y + bar.h / 2));
  }
}

TEST(Heatmap, TextLandsInItsBands) {
  const Matrix m = make(10, 20, [](int64_t i, int64_t j) { return static_cast<double>(i * j); });
  HeatmapFigure plain = m.figure();
  HeatmapFigure labelled = m.figure();
  labelled.title = "Dot product between positions";
  labelled.x_label = "position j";
  labelled.y_label = "position i";
  labelled.colorbar_label = "proximity";
  const Image without(render_heatmap(plain));
  const Image with(render_heatmap(labelled));
  const detail::HeatmapLayout l = detail::heatmap_layout(720, 600);
  for (const auto& [name, band] : {std::pair{"title", l.title_band}, std::pair{"x label", l.x_label_band},
                                   std::pair{"y label", l.y_label_band},
                                   std::pair{"colour bar label", l.colorbar_label_band}}) {
    EXPECT_EQ(without.count(band, dark), 0) << name;
    // 20 pixels: a few letters' stems; a missing text has none.
    EXPECT_GT(with.count(band, dark), 20) << name;
  }
  // Tick labels: dark pixels left of and below the plot area, outside the label bands.
  const Rect y_ticks{detail::kLabelBand, l.plot.y, l.plot.x - detail::kLabelBand - 6, l.plot.h};
  const Rect x_ticks{l.plot.x, l.plot.y + l.plot.h + 6, l.plot.w, 600 - l.plot.y - l.plot.h - 6 - detail::kLabelBand};
  const Rect bar_ticks{l.colorbar.x + l.colorbar.w + 6, l.plot.y, l.colorbar_label_band.x - l.colorbar.x - l.colorbar.w - 6,
                       l.plot.h};
  EXPECT_GT(without.count(y_ticks, dark), 20);
  EXPECT_GT(without.count(x_ticks, dark), 20);
  EXPECT_GT(without.count(bar_ticks, dark), 20);
}

TEST(Heatmap, SameInputSameBytes) {
  const Matrix m = make(32, 48, [](int64_t i, int64_t j) { return std::sin(0.3 * static_cast<double>(i + 2 * j)); });
  HeatmapFigure f = m.figure(ColorMap::kDiverging);
  f.title = "encoding";
  const std::vector<unsigned char> a = render_heatmap(f);
  EXPECT_EQ(a, render_heatmap(f));
  f.title = "encodinh";
  EXPECT_NE(a, render_heatmap(f));
}

}  // namespace
}  // namespace posenc::plot
