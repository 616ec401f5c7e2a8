// Two charts for experiment results (the experiments' section of the report),
// drawn with Cairo like figures.h's, deterministic, with the legend to the
// right of the plot area so that it never hides a line:
//
//   render_bands  one line per series (a mean against x) with a shaded band
//                 (e.g. mean +- 1 sd), linear, log2 or log10 axes, and an
//                 optional dashed vertical marker with a label (the training
//                 length). A non-finite y breaks a line; a lone point is a dot.
//   render_dots   one dot with an error bar per category (an encoding), and
//                 the values it summarizes (one per seed) as rings beside it;
//                 the categories along x with their names reading upwards.
//
// Series and dots carry their own colour (the caller colours by family) and
// the legend lists them in order.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "posenc/plot/figures.h"

namespace posenc::plot {

// kLog2 / kLog10: logarithmic, ticks at powers of 2 / at 1-2-5 x 10^k.
enum class AxisScale { kLinear, kLog2, kLog10 };

struct BandSeries {
  std::vector<double> x, y;
  // The band per x: empty (no band) or as many values as x. Drawn between
  // lo and hi where both are finite; on a log axis a lo <= 0 reaches the
  // bottom of the plot area.
  std::vector<double> lo, hi;
  std::string label;
  Rgb color{31, 119, 180};
  bool dashed = false;
};

struct BandFigure {
  std::vector<BandSeries> series;
  std::string title;
  std::string x_label;
  std::string y_label;
  AxisScale x_scale = AxisScale::kLinear;
  AxisScale y_scale = AxisScale::kLinear;
  std::optional<double> marker_x;  // a dashed vertical line
  std::string marker_label;        // written beside its top
  int width = 900, height = 520;
};

struct Dot {
  std::string label;  // the category, written under the axis
  double value = 0;
  double lo = 0, hi = 0;  // the error bar; NaN: none
  Rgb color{31, 119, 180};
  // The values the dot summarizes (a run per seed), drawn as rings beside the bar:
  // a mean and its sd hide a bimodal spread that the rings show. Empty: none.
  std::vector<double> points;
};

struct LegendEntry {
  std::string label;
  Rgb color;
};

struct DotFigure {
  std::vector<Dot> dots;
  std::vector<LegendEntry> legend;  // empty: no legend
  std::string title;
  std::string y_label;
  // Dot labels are written upright under the plot; labels longer than 0.35 of
  // the height grow the image by what they need beyond it (the plot keeps its size).
  int width = 720, height = 460;
};

// PNG file bytes. Throws std::invalid_argument naming the field, as
// render_lines does ("[plot] series 0 has 5 x values and 4 y values"), and:
//   "[plot] series 1 has 5 x values and 3 lo, 3 hi band values (as many as x, or none)"
//   "[plot] series 0 y values must be > 0 on a log axis, got -2 at index 1"
//   "[plot] dots must hold at least one dot, got 0"
//   "[plot] dot 2 value must be finite, within +-1e300, got nan"
//   "[plot] dot 0 lo must be finite or NaN, within +-1e300, got inf"
//   "[plot] dot 1 point 3 must be finite, within +-1e300, got nan"
std::vector<unsigned char> render_bands(const BandFigure& figure);
std::vector<unsigned char> render_dots(const DotFigure& figure);

}  // namespace posenc::plot
