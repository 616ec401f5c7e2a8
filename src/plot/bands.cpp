// render_bands: each series' band (filled, translucent) under every line,
// the lines on top, a dashed marker with its label, the legend at the right.
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
using detail::ScaledAxis;

constexpr double kMaxMagnitude = 1e300;  // as render_lines: spans and paddings stay finite
constexpr double kLineWidth = 2.2;
constexpr double kBandAlpha = 0.16;      // light enough for three overlapping bands to stay readable
constexpr Rgb kMarker{64, 64, 64};

bool is_log(AxisScale s) noexcept { return s != AxisScale::kLinear; }

void require_values(size_t series, const char* name, const std::vector<double>& values, bool positive) {
  for (size_t k = 0; k < values.size(); ++k) {
    const double v = values[k];
    if (!std::isfinite(v)) continue;
    require(std::abs(v) <= kMaxMagnitude, kOp, "series ", series, ' ', name,
            " values must be within +-1e300 where finite, got ", v, " at index ", k);
    require(!positive || v > 0, kOp, "series ", series, ' ', name, " values must be > 0 on a log axis, got ", v,
            " at index ", k);
  }
}

void validate(const BandFigure& f) {
  require(!f.series.empty(), kOp, "series must hold at least one series, got 0");
  for (size_t i = 0; i < f.series.size(); ++i) {
    const BandSeries& s = f.series[i];
    require(s.x.size() == s.y.size(), kOp, "series ", i, " has ", s.x.size(), " x values and ", s.y.size(),
            " y values");
    require((s.lo.empty() && s.hi.empty()) || (s.lo.size() == s.x.size() && s.hi.size() == s.x.size()), kOp,
            "series ", i, " has ", s.x.size(), " x values and ", s.lo.size(), " lo, ", s.hi.size(),
            " hi band values (as many as x, or none)");
    require_values(i, "x", s.x, is_log(f.x_scale));
    require_values(i, "y", s.y, is_log(f.y_scale));
    require_values(i, "lo", s.lo, false);
    require_values(i, "hi", s.hi, false);
    detail::require_text("series " + std::to_string(i) + " label", s.label);
  }
  detail::require_figure_size("width", f.width);
  detail::require_figure_size("height", f.height);
  detail::require_text("title", f.title);
  detail::require_text("x_label", f.x_label);
  detail::require_text("y_label", f.y_label);
  detail::require_text("marker_label", f.marker_label);
  if (f.marker_x) {
    require(std::isfinite(*f.marker_x) && std::abs(*f.marker_x) <= kMaxMagnitude, kOp,
            "marker_x must be a finite number within +-1e300, got ", *f.marker_x);
    require(!is_log(f.x_scale) || *f.marker_x > 0, kOp, "marker_x must be > 0 on a log axis, got ", *f.marker_x);
  }
}

bool point(const BandSeries& s, size_t k) noexcept { return std::isfinite(s.x[k]) && std::isfinite(s.y[k]); }

// Where the band is drawn at k: x, lo and hi finite, and hi inside a log axis.
bool band_at(const BandSeries& s, size_t k, bool log_y) noexcept {
  return !s.lo.empty() && std::isfinite(s.x[k]) && std::isfinite(s.lo[k]) && std::isfinite(s.hi[k]) &&
         (!log_y || s.hi[k] > 0);
}

struct Axes {
  ScaledAxis x, y;
};

Axes make_axes(const BandFigure& f, const Rect& plot) {
  const bool log_y = is_log(f.y_scale);
  double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
  auto take_y = [&](double v) {
    if (std::isfinite(v) && (!log_y || v > 0)) y_lo = std::min(y_lo, v), y_hi = std::max(y_hi, v);
  };
  for (const BandSeries& s : f.series) {
    for (size_t k = 0; k < s.x.size(); ++k) {
      if (!point(s, k)) continue;
      x_lo = std::min(x_lo, s.x[k]), x_hi = std::max(x_hi, s.x[k]);
      take_y(s.y[k]);
      if (band_at(s, k, log_y)) take_y(s.lo[k]), take_y(s.hi[k]);
    }
  }
  require(x_lo <= x_hi, kOp, "series must hold at least one point with finite x and y, got none");
  if (f.marker_x) x_lo = std::min(x_lo, *f.marker_x), x_hi = std::max(x_hi, *f.marker_x);
  Axes a{detail::make_axis(f.x_scale, x_lo, x_hi), detail::make_axis(f.y_scale, y_lo, y_hi)};
  a.x.from = plot.x, a.x.length = plot.w;
  a.y.from = plot.y, a.y.length = plot.h, a.y.flipped = true;
  return a;
}

// The band as one polygon per run of drawable points: along hi, back along lo.
void draw_band(Canvas& canvas, const BandSeries& s, const Axes& a, bool log_y) {
  cairo_t* cr = canvas.cr();
  cairo_set_source_rgba(cr, s.color.r / 255.0, s.color.g / 255.0, s.color.b / 255.0, kBandAlpha);
  const double bottom = a.y.from + a.y.length + 1;  // below the plot area: a lo <= 0 on a log axis
  auto lo_pixel = [&](size_t k) { return log_y && !(s.lo[k] > 0) ? bottom : a.y.pixel(s.lo[k]); };
  size_t k = 0;
  while (k < s.x.size()) {
    if (!band_at(s, k, log_y)) {
      ++k;
      continue;
    }
    const size_t first = k;
    while (k < s.x.size() && band_at(s, k, log_y)) ++k;
    if (k - first < 2) continue;  // a lone point has no area
    cairo_move_to(cr, a.x.pixel(s.x[first]), a.y.pixel(s.hi[first]));
    for (size_t j = first + 1; j < k; ++j) cairo_line_to(cr, a.x.pixel(s.x[j]), a.y.pixel(s.hi[j]));
    for (size_t j = k; j-- > first;) cairo_line_to(cr, a.x.pixel(s.x[j]), lo_pixel(j));
    cairo_close_path(cr);
    cairo_fill(cr);
  }
}

void draw_line(Canvas& canvas, const BandSeries& s, const Axes& a) {
  cairo_t* cr = canvas.cr();
  cairo_save(cr);
  canvas.set_color(s.color);
  cairo_set_line_width(cr, kLineWidth);
  cairo_set_line_cap(cr, CAIRO_LINE_CAP_ROUND);
  cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
  if (s.dashed) {
    const double dashes[] = {7, 4};
    cairo_set_dash(cr, dashes, 2, 0);
  }
  size_t k = 0;
  while (k < s.x.size()) {
    if (!point(s, k)) {
      ++k;
      continue;
    }
    const size_t first = k;
    cairo_move_to(cr, a.x.pixel(s.x[k]), a.y.pixel(s.y[k]));
    for (++k; k < s.x.size() && point(s, k); ++k) cairo_line_to(cr, a.x.pixel(s.x[k]), a.y.pixel(s.y[k]));
    if (k - first == 1) {
      cairo_new_path(cr);
      cairo_arc(cr, a.x.pixel(s.x[first]), a.y.pixel(s.y[first]), 3.5, 0, 2 * std::numbers::pi);
      cairo_fill(cr);
    } else {
      cairo_stroke(cr);
    }
  }
  cairo_restore(cr);
}

void draw_marker(Canvas& canvas, const Axes& a, const Rect& plot, double x, const std::string& label) {
  cairo_t* cr = canvas.cr();
  const int px = static_cast<int>(std::floor(a.x.pixel(x)));
  cairo_save(cr);
  const double dashes[] = {6, 4};
  cairo_set_dash(cr, dashes, 2, 0);
  canvas.set_color(kMarker);
  canvas.vline(px, plot.y, plot.y + plot.h);
  cairo_restore(cr);
  canvas.set_color(kMarker);
  canvas.text(label, px + 5, plot.y + 5, Align::kStart, Align::kStart, detail::kTickSize);
}

}  // namespace

std::vector<unsigned char> render_bands(const BandFigure& f) {
  validate(f);
  Canvas canvas(f.width, f.height);
  std::vector<detail::LegendItem> legend;
  for (const BandSeries& s : f.series) {
    if (!s.label.empty()) legend.push_back({s.label, s.color, s.dashed, false});
  }
  const double legend_w = detail::legend_width(canvas, legend, 0.4 * f.width);
  Rect plot{detail::kChartLeft, detail::kChartTop, 0, f.height - detail::kChartTop - detail::kLinesBottom};
  plot.w = std::max(20, f.width - plot.x - detail::kChartRight -
                            (legend.empty() ? 0 : detail::kLegendGap + static_cast<int>(legend_w)));
  const Axes a = make_axes(f, plot);
  const auto xt = detail::axis_ticks(a.x, std::max(3, plot.w / 70));
  const auto yt = detail::axis_ticks(a.y, std::max(3, plot.h / 40));
  const bool log_y = is_log(f.y_scale);

  cairo_t* cr = canvas.cr();
  cairo_save(cr);
  cairo_rectangle(cr, plot.x, plot.y, plot.w, plot.h);
  cairo_clip(cr);
  detail::draw_grid(canvas, plot, &a.x, xt, a.y, yt);
  for (const BandSeries& s : f.series) draw_band(canvas, s, a, log_y);
  if (f.marker_x) draw_marker(canvas, a, plot, *f.marker_x, f.marker_label);
  for (const BandSeries& s : f.series) draw_line(canvas, s, a);
  cairo_restore(cr);
  detail::draw_frame_and_ticks(canvas, plot, &a.x, xt, a.y, yt);
  if (!legend.empty()) {
    detail::draw_legend_column(canvas, legend, plot.x + plot.w + detail::kLegendGap, plot.y, legend_w);
  }
  detail::draw_chart_text(canvas, plot, f.height, f.title, f.x_label, f.y_label);
  return canvas.png();
}

}  // namespace posenc::plot
