// Internal to posenc::plot: what render_bands and render_dots share — an
// axis that may be logarithmic (data -> pixels, ticks and their labels) and
// the legend drawn right of the plot area.
#pragma once

#include <string>
#include <vector>

#include "canvas.h"
#include "layout.h"
#include "posenc/plot/charts.h"

namespace posenc::plot::detail {

// The legend column and the chart margins around the plot area.
inline constexpr int kChartLeft = 80;   // y label band + tick labels
inline constexpr int kChartTop = 44;    // title band
inline constexpr int kChartRight = 14;  // beyond the legend
inline constexpr int kLegendGap = 16;   // between the plot area and the legend
inline constexpr double kLegendRow = 18;
inline constexpr double kLegendSample = 26;

// An axis over [lo, hi] in data units; on a log axis both are > 0 and the
// mapping is linear in log(value).
struct ScaledAxis {
  AxisScale scale = AxisScale::kLinear;
  double lo = 0, hi = 1;      // data units, after padding
  int from = 0, length = 1;   // pixels: lo maps to `from`, hi to `from + length` (both directions)
  bool flipped = false;       // y: hi at the top
  double transform(double v) const noexcept;
  double pixel(double v) const noexcept;
};

// The data range [lo, hi] (finite, and > 0 on a log axis) padded by 5% of its
// span in transformed units.
ScaledAxis make_axis(AxisScale scale, double lo, double hi);

struct TickMark {
  double value;
  std::string label;
};
// Linear: 1-2-5 steps. Log2: powers of two (every k-th when too many). Log10:
// decades, then 2x and 5x within them when there are few, then the linear
// 1-2-5 ticks of the range when the range is under a decade.
std::vector<TickMark> axis_ticks(const ScaledAxis& axis, int max_ticks);

struct LegendItem {
  std::string label;
  Rgb color;
  bool dashed = false;
  bool dot = false;  // a dot sample instead of a line
};
// Width the legend needs (0 without items), at most max_width.
double legend_width(Canvas& canvas, const std::vector<LegendItem>& items, double max_width);
// The legend's column at x (its left edge), from y downwards.
void draw_legend_column(Canvas& canvas, const std::vector<LegendItem>& items, double x, double y, double width);

// Tick marks and labels on the left and bottom edges of plot, the frame, and
// the grid lines (drawn first, under the data, by draw_grid).
void draw_grid(Canvas& canvas, const Rect& plot, const ScaledAxis* x, const std::vector<TickMark>& xt,
               const ScaledAxis& y, const std::vector<TickMark>& yt);
void draw_frame_and_ticks(Canvas& canvas, const Rect& plot, const ScaledAxis* x, const std::vector<TickMark>& xt,
                          const ScaledAxis& y, const std::vector<TickMark>& yt);
// Title over the plot area, y label reading upwards at the left edge, x label (if any) at the bottom.
void draw_chart_text(Canvas& canvas, const Rect& plot, int height, const std::string& title,
                     const std::string& x_label, const std::string& y_label);

}  // namespace posenc::plot::detail
