// render_lines: series as polylines (a non-finite x or y breaks the line),
// a light grid at the 1-2-5 ticks of padded ranges, an optional dashed
// vertical marker, and a legend in the top-right corner for 2+ series.
#include <cairo.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

#include "canvas.h"
#include "layout.h"
#include "posenc/error.h"
#include "posenc/plot/figures.h"

namespace posenc::plot {
namespace {

using detail::Align;
using detail::Canvas;
using detail::kOp;
using detail::Rect;

constexpr double kMaxMagnitude = 1e300;  // keeps spans and paddings finite
constexpr Rgb kInk{0, 0, 0};
constexpr Rgb kGrid{228, 228, 228};
constexpr Rgb kMarker{64, 64, 64};
constexpr Rgb kLegendFrame{176, 176, 176};
constexpr double kLineWidth = 2;
constexpr double kDotRadius = 2.5;  // a lone point: visibly more than the line's width
// matplotlib's "tab10" cycle.
constexpr Rgb kSeriesColors[] = {{31, 119, 180}, {255, 127, 14},  {44, 160, 44},  {214, 39, 40},
                                 {148, 103, 189}, {140, 86, 75},  {227, 119, 194}, {127, 127, 127},
                                 {188, 189, 34},  {23, 190, 207}};

Rgb series_color(size_t i) noexcept { return kSeriesColors[i % std::size(kSeriesColors)]; }

void require_magnitudes(size_t series, char axis, const std::vector<double>& values) {
  for (size_t k = 0; k < values.size(); ++k) {
    const double v = values[k];
    require(!std::isfinite(v) || std::abs(v) <= kMaxMagnitude, kOp, "series ", series, ' ', axis,
            " values must be within +-1e300 where finite, got ", v, " at index ", k);
  }
}

void validate(const LineFigure& f) {
  require(!f.series.empty(), kOp, "series must hold at least one series, got 0");
  for (size_t i = 0; i < f.series.size(); ++i) {
    const LineSeries& s = f.series[i];
    require(s.x.size() == s.y.size(), kOp, "series ", i, " has ", s.x.size(), " x values and ", s.y.size(),
            " y values");
    require_magnitudes(i, 'x', s.x);
    require_magnitudes(i, 'y', s.y);
    detail::require_text("series " + std::to_string(i) + " label", s.label);
  }
  detail::require_figure_size("width", f.width);
  detail::require_figure_size("height", f.height);
  detail::require_text("title", f.title);
  detail::require_text("x_label", f.x_label);
  detail::require_text("y_label", f.y_label);
  if (f.marker_x) {
    require(std::isfinite(*f.marker_x) && std::abs(*f.marker_x) <= kMaxMagnitude, kOp,
            "marker_x must be a finite number within +-1e300, got ", *f.marker_x);
  }
}

bool finite_point(const LineSeries& s, size_t k) noexcept { return std::isfinite(s.x[k]) && std::isfinite(s.y[k]); }

// Data -> pixel coordinates of the plot area.
struct Mapping {
  detail::AxisRange x, y;
  Rect plot;
  double px(double v) const noexcept { return plot.x + (v - x.lo) / (x.hi - x.lo) * plot.w; }
  double py(double v) const noexcept { return plot.y + plot.h - (v - y.lo) / (y.hi - y.lo) * plot.h; }
};

Mapping make_mapping(const LineFigure& f, Rect plot) {
  double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
  for (const LineSeries& s : f.series) {
    for (size_t k = 0; k < s.x.size(); ++k) {
      if (!finite_point(s, k)) continue;
      x_lo = std::min(x_lo, s.x[k]), x_hi = std::max(x_hi, s.x[k]);
      y_lo = std::min(y_lo, s.y[k]), y_hi = std::max(y_hi, s.y[k]);
    }
  }
  require(x_lo <= x_hi, kOp, "series must hold at least one point with finite x and y, got none");
  if (f.marker_x) x_lo = std::min(x_lo, *f.marker_x), x_hi = std::max(x_hi, *f.marker_x);
  return {detail::padded_range(x_lo, x_hi), detail::padded_range(y_lo, y_hi), plot};
}

// The pixel row or column that holds a coordinate.
int pixel_of(double coordinate) noexcept { return static_cast<int>(std::floor(coordinate)); }

void draw_grid(Canvas& canvas, const Mapping& m, const detail::Ticks& xt, const detail::Ticks& yt) {
  canvas.set_color(kGrid);
  for (const double v : xt.values) canvas.vline(pixel_of(m.px(v)), m.plot.y, m.plot.y + m.plot.h);
  for (const double v : yt.values) canvas.hline(m.plot.x, m.plot.x + m.plot.w, pixel_of(m.py(v)));
}

void draw_series(Canvas& canvas, const LineSeries& s, const Mapping& m, Rgb color) {
  cairo_t* cr = canvas.cr();
  canvas.set_color(color);
  cairo_set_line_width(cr, kLineWidth);
  cairo_set_line_cap(cr, CAIRO_LINE_CAP_ROUND);
  cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
  // Pieces between non-finite points; a piece of one point becomes a dot.
  size_t k = 0;
  while (k < s.x.size()) {
    if (!finite_point(s, k)) {
      ++k;
      continue;
    }
    const size_t first = k;
    cairo_move_to(cr, m.px(s.x[k]), m.py(s.y[k]));
    for (++k; k < s.x.size() && finite_point(s, k); ++k) cairo_line_to(cr, m.px(s.x[k]), m.py(s.y[k]));
    if (k - first == 1) {
      cairo_new_path(cr);
      cairo_arc(cr, m.px(s.x[first]), m.py(s.y[first]), kDotRadius, 0, 2 * std::numbers::pi);
      cairo_fill(cr);
    } else {
      cairo_stroke(cr);
    }
  }
}

void draw_marker(Canvas& canvas, const Mapping& m, double marker_x) {
  cairo_t* cr = canvas.cr();
  const double dashes[] = {6, 4};
  cairo_save(cr);
  cairo_set_dash(cr, dashes, 2, 0);
  canvas.set_color(kMarker);
  canvas.vline(pixel_of(m.px(marker_x)), m.plot.y, m.plot.y + m.plot.h);
  cairo_restore(cr);
}

void draw_axes(Canvas& canvas, const Mapping& m, const detail::Ticks& xt, const detail::Ticks& yt) {
  const Rect p = m.plot;
  canvas.set_color(kInk);
  canvas.frame(p.x, p.y, p.w, p.h);
  const int bottom = p.y + p.h;
  for (const double v : xt.values) {
    const int x = pixel_of(m.px(v));
    canvas.vline(x, bottom + 1, bottom + 5);
    canvas.text(detail::format_tick(v, xt.step), x + 0.5, bottom + 7, Align::kCentre, Align::kStart,
                detail::kTickSize);
  }
  for (const double v : yt.values) {
    const int y = pixel_of(m.py(v));
    canvas.hline(p.x - 5, p.x - 1, y);
    canvas.text(detail::format_tick(v, yt.step), p.x - 7, y + 0.5, Align::kEnd, Align::kCentre, detail::kTickSize);
  }
}

void draw_legend(Canvas& canvas, const LineFigure& f, Rect plot) {
  constexpr double kPad = 8, kRow = 18, kSample = 22, kGap = 6;
  double widest = 0;
  for (const LineSeries& s : f.series) widest = std::max(widest, canvas.text_width(s.label, detail::kTickSize));
  const double w = kPad + kSample + kGap + widest + kPad;
  const double h = 2 * kPad + kRow * static_cast<double>(f.series.size()) - 4;
  const double x = std::round(plot.x + plot.w - 8 - w), y = plot.y + 8;
  cairo_t* cr = canvas.cr();
  cairo_rectangle(cr, x + 0.5, y + 0.5, w, h);
  canvas.set_color({255, 255, 255});
  cairo_fill_preserve(cr);
  canvas.set_color(kLegendFrame);
  cairo_set_line_width(cr, 1);
  cairo_stroke(cr);
  for (size_t i = 0; i < f.series.size(); ++i) {
    const double row_y = y + kPad + kRow * static_cast<double>(i) + kRow / 2 - 2;
    cairo_move_to(cr, x + kPad, row_y);
    cairo_line_to(cr, x + kPad + kSample, row_y);
    canvas.set_color(series_color(i));
    cairo_set_line_width(cr, kLineWidth);
    cairo_stroke(cr);
    canvas.set_color(kInk);
    canvas.text(f.series[i].label, x + kPad + kSample + kGap, row_y, Align::kStart, Align::kCentre,
                detail::kTickSize);
  }
}

}  // namespace

std::vector<unsigned char> render_lines(const LineFigure& f) {
  validate(f);
  const detail::LineLayout layout = detail::line_layout(f.width, f.height);
  const Mapping m = make_mapping(f, layout.plot);
  const Rect p = layout.plot;
  const detail::Ticks xt = detail::nice_ticks(m.x.lo, m.x.hi, std::max(3, p.w / 80));
  const detail::Ticks yt = detail::nice_ticks(m.y.lo, m.y.hi, std::max(3, p.h / 40));

  Canvas canvas(f.width, f.height);
  cairo_t* cr = canvas.cr();
  cairo_save(cr);
  cairo_rectangle(cr, p.x, p.y, p.w, p.h);
  cairo_clip(cr);
  draw_grid(canvas, m, xt, yt);
  if (f.marker_x) draw_marker(canvas, m, *f.marker_x);
  for (size_t i = 0; i < f.series.size(); ++i) draw_series(canvas, f.series[i], m, series_color(i));
  cairo_restore(cr);
  draw_axes(canvas, m, xt, yt);
  if (f.series.size() >= 2) draw_legend(canvas, f, p);

  const double middle_y = p.y + p.h / 2.0;
  canvas.text(f.x_label, p.x + p.w / 2.0, f.height - 6, Align::kCentre, Align::kEnd, detail::kLabelSize);
  canvas.text(f.y_label, detail::kLabelBand / 2.0, middle_y, Align::kCentre, Align::kCentre, detail::kLabelSize,
              false, -std::numbers::pi / 2);
  canvas.text(f.title, p.x + p.w / 2.0, detail::kTitleBand / 2.0, Align::kCentre, Align::kCentre, detail::kTitleSize,
              true);
  return canvas.png();
}

}  // namespace posenc::plot
