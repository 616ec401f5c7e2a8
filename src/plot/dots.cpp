// render_dots: one slot per category, its error bar with caps and its dot
// (left of the slot's centre when the category has points, its rings right of it),
// the category names under the axis reading upwards, the legend at the right.
#include <cairo.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

#include "canvas.h"
#include "chart_parts.h"
#include "layout.h"
#include "posenc/error.h"
#include "posenc/plot/charts.h"

namespace posenc::plot {
namespace {

using detail::Align;
using detail::Canvas;
using detail::kOp;
using detail::Rect;

constexpr double kMaxMagnitude = 1e300;
constexpr double kDotRadius = 4.5;
constexpr double kRingRadius = 3.0;
constexpr double kPointShift = 0.2;  // of a slot: the bar left of its centre, the rings right of it

void require_number(size_t dot, const std::string& name, double v, bool nan_allowed) {
  if (nan_allowed && std::isnan(v)) return;
  require(std::isfinite(v) && std::abs(v) <= kMaxMagnitude, kOp, "dot ", dot, ' ', name,
          " must be finite", nan_allowed ? " or NaN" : "", ", within +-1e300, got ", v);
}

void validate(const DotFigure& f) {
  require(!f.dots.empty(), kOp, "dots must hold at least one dot, got 0");
  for (size_t i = 0; i < f.dots.size(); ++i) {
    const Dot& d = f.dots[i];
    require_number(i, "value", d.value, false);
    require_number(i, "lo", d.lo, true);
    require_number(i, "hi", d.hi, true);
    for (size_t k = 0; k < d.points.size(); ++k) {
      require_number(i, "point " + std::to_string(k), d.points[k], false);
    }
    detail::require_text("dot " + std::to_string(i) + " label", d.label);
  }
  for (size_t i = 0; i < f.legend.size(); ++i) {
    detail::require_text("legend " + std::to_string(i) + " label", f.legend[i].label);
  }
  detail::require_figure_size("width", f.width);
  detail::require_figure_size("height", f.height);
  detail::require_text("title", f.title);
  detail::require_text("y_label", f.y_label);
}

bool has_bar(const Dot& d) noexcept { return !std::isnan(d.lo) && !std::isnan(d.hi); }

}  // namespace

std::vector<unsigned char> render_dots(const DotFigure& f) {
  validate(f);
  // Names longer than 0.35 of the height grow the image downwards, the plot
  // keeping its size, so that no name is cut (measured on a scratch canvas).
  double longest = 0;
  {
    Canvas scratch(1, 1);
    for (const Dot& d : f.dots) longest = std::max(longest, scratch.text_width(d.label, detail::kTickSize));
  }
  const int names = static_cast<int>(std::ceil(longest));
  const int height = f.height + std::max(0, names - static_cast<int>(std::ceil(0.35 * f.height)));
  Canvas canvas(f.width, height);
  std::vector<detail::LegendItem> legend;
  for (const LegendEntry& e : f.legend) legend.push_back({e.label, e.color, false, true});
  const double legend_w = detail::legend_width(canvas, legend, 0.35 * f.width);
  Rect plot{detail::kChartLeft, detail::kChartTop, 0, 0};
  plot.w = std::max(20, f.width - plot.x - detail::kChartRight -
                            (legend.empty() ? 0 : detail::kLegendGap + static_cast<int>(legend_w)));
  plot.h = std::max(20, height - plot.y - names - 14);

  double lo = INFINITY, hi = -INFINITY;
  for (const Dot& d : f.dots) {
    lo = std::min({lo, d.value, has_bar(d) ? std::min(d.lo, d.hi) : d.value});
    hi = std::max({hi, d.value, has_bar(d) ? std::max(d.lo, d.hi) : d.value});
    for (const double v : d.points) lo = std::min(lo, v), hi = std::max(hi, v);
  }
  detail::ScaledAxis y = detail::make_axis(AxisScale::kLinear, lo, hi);
  y.from = plot.y, y.length = plot.h, y.flipped = true;
  const auto yt = detail::axis_ticks(y, std::max(3, plot.h / 40));
  const double slot = static_cast<double>(plot.w) / static_cast<double>(f.dots.size());
  const double cap = std::min(6.0, slot / 4);

  cairo_t* cr = canvas.cr();
  cairo_save(cr);
  cairo_rectangle(cr, plot.x, plot.y, plot.w, plot.h);
  cairo_clip(cr);
  detail::draw_grid(canvas, plot, nullptr, {}, y, yt);
  for (size_t i = 0; i < f.dots.size(); ++i) {
    const Dot& d = f.dots[i];
    const double centre = plot.x + slot * (static_cast<double>(i) + 0.5);
    const double cx = d.points.empty() ? centre : centre - kPointShift * slot;
    canvas.set_color(d.color);
    if (has_bar(d)) {
      const double top = y.pixel(std::max(d.lo, d.hi)), bottom = y.pixel(std::min(d.lo, d.hi));
      cairo_set_line_width(cr, 1.6);
      cairo_move_to(cr, cx, top);
      cairo_line_to(cr, cx, bottom);
      cairo_move_to(cr, cx - cap, top);
      cairo_line_to(cr, cx + cap, top);
      cairo_move_to(cr, cx - cap, bottom);
      cairo_line_to(cr, cx + cap, bottom);
      cairo_stroke(cr);
    }
    cairo_arc(cr, cx, y.pixel(d.value), kDotRadius, 0, 2 * std::numbers::pi);
    cairo_fill(cr);
    const double ring = std::min(kRingRadius, slot / 10);
    cairo_set_line_width(cr, 1.2);
    for (const double v : d.points) {
      cairo_new_sub_path(cr);
      cairo_arc(cr, centre + kPointShift * slot, y.pixel(v), ring, 0, 2 * std::numbers::pi);
    }
    cairo_stroke(cr);
  }
  cairo_restore(cr);
  detail::draw_frame_and_ticks(canvas, plot, nullptr, {}, y, yt);
  const int bottom = plot.y + plot.h;
  canvas.set_color({0, 0, 0});
  for (size_t i = 0; i < f.dots.size(); ++i) {
    const double cx = plot.x + slot * (static_cast<double>(i) + 0.5);
    canvas.vline(static_cast<int>(std::floor(cx)), bottom + 1, bottom + 5);
    cairo_save(cr);
    cairo_rectangle(cr, cx - slot / 2, bottom + 6, slot, names + 2);  // a name wider than its slot is cut
    cairo_clip(cr);
    canvas.text(f.dots[i].label, cx, bottom + 7, Align::kEnd, Align::kCentre, detail::kTickSize, false,
                -std::numbers::pi / 2);
    cairo_restore(cr);
  }
  if (!legend.empty()) {
    detail::draw_legend_column(canvas, legend, plot.x + plot.w + detail::kLegendGap, plot.y, legend_w);
  }
  detail::draw_chart_text(canvas, plot, height, f.title, "", f.y_label);
  return canvas.png();
}

}  // namespace posenc::plot
