#include "chart_parts.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numbers>

namespace posenc::plot::detail {
namespace {

constexpr Rgb kInk{0, 0, 0};
constexpr Rgb kGrid{228, 228, 228};
constexpr double kLegendPad = 8;

double inverse(AxisScale scale, double t) noexcept {
  switch (scale) {
    case AxisScale::kLog2: return std::exp2(t);
    case AxisScale::kLog10: return std::pow(10.0, t);
    case AxisScale::kLinear: break;
  }
  return t;
}

// 128, 2048, 0.5, 1e+08: integers as integers, the rest with up to 6 digits.
std::string plain_number(double v) {
  char text[32];
  if (v == std::round(v) && std::abs(v) < 1e7) {
    std::snprintf(text, sizeof text, "%.0f", v);
  } else {
    std::snprintf(text, sizeof text, "%.6g", v);
  }
  return text;
}

std::vector<TickMark> linear_ticks(double lo, double hi, int max_ticks, bool positive_only) {
  const Ticks t = nice_ticks(lo, hi, max_ticks);
  std::vector<TickMark> marks;
  for (const double v : t.values) {
    if (positive_only && !(v > 0)) continue;
    marks.push_back({v, format_tick(v, t.step)});
  }
  return marks;
}

// Every k-th mark, so that at most max_ticks remain.
std::vector<TickMark> thinned(std::vector<TickMark> marks, int max_ticks) {
  const size_t every = (marks.size() + static_cast<size_t>(max_ticks) - 1) / static_cast<size_t>(max_ticks);
  if (every <= 1) return marks;
  std::vector<TickMark> kept;
  for (size_t k = 0; k < marks.size(); k += every) kept.push_back(marks[k]);
  return kept;
}

}  // namespace

double ScaledAxis::transform(double v) const noexcept {
  switch (scale) {
    case AxisScale::kLog2: return std::log2(v);
    case AxisScale::kLog10: return std::log10(v);
    case AxisScale::kLinear: break;
  }
  return v;
}

double ScaledAxis::pixel(double v) const noexcept {
  const double t = (transform(v) - transform(lo)) / (transform(hi) - transform(lo));
  return flipped ? from + length - t * length : from + t * length;
}

ScaledAxis make_axis(AxisScale scale, double lo, double hi) {
  ScaledAxis a;
  a.scale = scale;
  a.lo = lo, a.hi = hi;
  double tlo = a.transform(lo), thi = a.transform(hi);
  if (scale == AxisScale::kLinear) {
    const AxisRange r = padded_range(tlo, thi);
    tlo = r.lo, thi = r.hi;
  } else {
    // A constant on a log axis: a quarter of a unit (a factor 1.19 or 1.78) each side.
    if (!(thi > tlo)) tlo -= 0.25, thi += 0.25;
    const double pad = 0.05 * (thi - tlo);
    tlo -= pad, thi += pad;
  }
  a.lo = inverse(scale, tlo), a.hi = inverse(scale, thi);
  return a;
}

std::vector<TickMark> axis_ticks(const ScaledAxis& axis, int max_ticks) {
  max_ticks = std::max(max_ticks, 2);
  if (axis.scale == AxisScale::kLinear) return linear_ticks(axis.lo, axis.hi, max_ticks, false);
  const double base = axis.scale == AxisScale::kLog2 ? 2.0 : 10.0;
  const double first = std::ceil(axis.transform(axis.lo) - 1e-9), last = std::floor(axis.transform(axis.hi) + 1e-9);
  std::vector<TickMark> marks;
  if (axis.scale == AxisScale::kLog10 && last - first < 2) {
    // Under two decades: 1, 2 and 5 times the powers of ten inside the range.
    for (double k = first - 1; k <= last; ++k) {
      for (const double m : {1.0, 2.0, 5.0}) {
        const double v = m * std::pow(10.0, k);
        if (v >= axis.lo && v <= axis.hi) marks.push_back({v, plain_number(v)});
      }
    }
  } else {
    for (double k = first; k <= last; ++k) {
      const double v = std::pow(base, k);
      marks.push_back({v, plain_number(v)});
    }
  }
  // A range too narrow for its powers reads better with plain 1-2-5 ticks.
  if (marks.size() < 3) return linear_ticks(axis.lo, axis.hi, std::min(max_ticks, 6), true);
  return thinned(std::move(marks), max_ticks);
}

double legend_width(Canvas& canvas, const std::vector<LegendItem>& items, double max_width) {
  if (items.empty()) return 0;
  double widest = 0;
  for (const LegendItem& item : items) widest = std::max(widest, canvas.text_width(item.label, kTickSize));
  return std::min(std::ceil(2 * kLegendPad + kLegendSample + 6 + widest), max_width);
}

void draw_legend_column(Canvas& canvas, const std::vector<LegendItem>& items, double x, double y, double width) {
  cairo_t* cr = canvas.cr();
  for (size_t i = 0; i < items.size(); ++i) {
    const LegendItem& item = items[i];
    const double row_y = y + kLegendRow * (static_cast<double>(i) + 0.5);
    const double sample_x = x + kLegendPad;
    cairo_save(cr);
    canvas.set_color(item.color);
    if (item.dot) {
      cairo_arc(cr, sample_x + kLegendSample / 2, row_y, 4, 0, 2 * std::numbers::pi);
      cairo_fill(cr);
    } else {
      if (item.dashed) {
        const double dashes[] = {6, 4};
        cairo_set_dash(cr, dashes, 2, 0);
      }
      cairo_set_line_width(cr, 2.5);
      cairo_move_to(cr, sample_x, row_y);
      cairo_line_to(cr, sample_x + kLegendSample, row_y);
      cairo_stroke(cr);
    }
    // A label longer than the column is cut at its right edge.
    cairo_rectangle(cr, x, row_y - kLegendRow / 2, width, kLegendRow);
    cairo_clip(cr);
    canvas.set_color(kInk);
    canvas.text(item.label, sample_x + kLegendSample + 6, row_y, Align::kStart, Align::kCentre, kTickSize);
    cairo_restore(cr);
  }
}

void draw_grid(Canvas& canvas, const Rect& plot, const ScaledAxis* x, const std::vector<TickMark>& xt,
               const ScaledAxis& y, const std::vector<TickMark>& yt) {
  canvas.set_color(kGrid);
  if (x) {
    for (const TickMark& t : xt) canvas.vline(static_cast<int>(std::floor(x->pixel(t.value))), plot.y, plot.y + plot.h);
  }
  for (const TickMark& t : yt) canvas.hline(plot.x, plot.x + plot.w, static_cast<int>(std::floor(y.pixel(t.value))));
}

void draw_frame_and_ticks(Canvas& canvas, const Rect& plot, const ScaledAxis* x, const std::vector<TickMark>& xt,
                          const ScaledAxis& y, const std::vector<TickMark>& yt) {
  canvas.set_color(kInk);
  canvas.frame(plot.x, plot.y, plot.w, plot.h);
  const int bottom = plot.y + plot.h;
  if (x) {
    for (const TickMark& t : xt) {
      const int px = static_cast<int>(std::floor(x->pixel(t.value)));
      canvas.vline(px, bottom + 1, bottom + 5);
      canvas.text(t.label, px + 0.5, bottom + 7, Align::kCentre, Align::kStart, kTickSize);
    }
  }
  for (const TickMark& t : yt) {
    const int py = static_cast<int>(std::floor(y.pixel(t.value)));
    canvas.hline(plot.x - 5, plot.x - 1, py);
    canvas.text(t.label, plot.x - 7, py + 0.5, Align::kEnd, Align::kCentre, kTickSize);
  }
}

void draw_chart_text(Canvas& canvas, const Rect& plot, int height, const std::string& title,
                     const std::string& x_label, const std::string& y_label) {
  canvas.set_color(kInk);
  canvas.text(title, plot.x + plot.w / 2.0, kTitleBand / 2.0, Align::kCentre, Align::kCentre, kTitleSize, true);
  canvas.text(y_label, kLabelBand / 2.0, plot.y + plot.h / 2.0, Align::kCentre, Align::kCentre, kLabelSize, false,
              -std::numbers::pi / 2);
  canvas.text(x_label, plot.x + plot.w / 2.0, height - 6, Align::kCentre, Align::kEnd, kLabelSize);
}

}  // namespace posenc::plot::detail
