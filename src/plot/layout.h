// Internal to posenc::plot: where each part of a figure goes, and the axis
// arithmetic (padded ranges, 1-2-5 ticks, tick labels). Exposed to the tests
// so they can find the plot area and the bands that hold the text.
#pragma once

#include <string>
#include <vector>

#include "posenc/plot/figures.h"

namespace posenc::plot::detail {

// Heatmap cells holding NaN or +-inf (and colormap_color of a NaN t): a
// neutral grey that neither colour map contains.
inline constexpr Rgb kNonFiniteColor{128, 128, 128};

// Pixel rectangle [x, x + w) x [y, y + h); y grows downwards.
struct Rect {
  int x = 0, y = 0, w = 0, h = 0;
};

// Heatmap: plot area on the left, colour bar to its right, both as tall as the
// plot area. Margins are fixed, so the plot area of a 200 x 200 figure is small
// but never empty.
inline constexpr int kHeatmapLeft = 72;     // y label band + tick labels
inline constexpr int kHeatmapRight = 112;   // gap + colour bar + its labels + its label band
inline constexpr int kHeatmapTop = 44;      // title band
inline constexpr int kHeatmapBottom = 56;   // tick labels + x label band
inline constexpr int kColorbarGap = 14;
inline constexpr int kColorbarWidth = 18;

// Line plot: plot area only (the legend is drawn inside it, top right).
inline constexpr int kLinesLeft = 92;     // y label band + tick labels as wide as "-3.912e-03"
inline constexpr int kLinesRight = 20;
inline constexpr int kLinesTop = 44;
inline constexpr int kLinesBottom = 56;

// Text bands: nothing but the named text is drawn in them.
inline constexpr int kTitleBand = 34;       // from the top edge
inline constexpr int kLabelBand = 22;       // axis labels, from the figure's edge inwards

struct HeatmapLayout {
  Rect plot;
  Rect colorbar;
  Rect title_band;           // the title, centred over the plot area
  Rect x_label_band;         // below the x tick labels
  Rect y_label_band;         // left of the y tick labels
  Rect colorbar_label_band;  // right of the colour bar's tick labels
};
HeatmapLayout heatmap_layout(int width, int height) noexcept;

struct LineLayout {
  Rect plot;
  Rect title_band;
  Rect x_label_band;
  Rect y_label_band;
};
LineLayout line_layout(int width, int height) noexcept;

// [lo, hi] widened by 5% of the span on each side; a single value v (lo == hi)
// becomes widen_single(v), so a constant series sits in the middle.
struct AxisRange {
  double lo = 0, hi = 1;
};
AxisRange padded_range(double lo, double hi) noexcept;
// v -+ |v| / 10, or [-0.5, 0.5] for v = 0: a range around a constant.
AxisRange widen_single(double v) noexcept;

// The 1-2-5 step (1, 2 or 5 times a power of ten) that puts at most
// max_ticks ticks in a span, the smallest such step. span > 0, max_ticks >= 2.
double nice_step(double span, int max_ticks) noexcept;

// The multiples of step = max(nice_step(hi - lo, max_ticks), min_step) in
// [lo, hi]; for lo == hi the single tick lo (step 1).
struct Ticks {
  std::vector<double> values;
  double step = 1;
};
Ticks nice_ticks(double lo, double hi, int max_ticks, double min_step = 0);

// A tick value written with as many decimals as the step needs ("0.25",
// "-3", "1.5e-05" for very small or large values); never "-0".
std::string format_tick(double value, double step);

}  // namespace posenc::plot::detail
