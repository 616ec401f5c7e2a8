// render_heatmap: the cells as one image scaled with nearest-neighbour
// sampling (crisp cells, fast for 1024 x 768 matrices), index axes with 1-2-5
// ticks at cell centres, and a vertical colour bar on the right.
#include <cairo.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>

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

constexpr int64_t kMaxSide = 32767;     // Cairo's largest image side
constexpr double kMaxMagnitude = 1e300;  // keeps spans and paddings finite
constexpr Rgb kInk{0, 0, 0};

struct ValueRange {
  double lo, hi;
  // Position of v in the range; the halves keep hi - lo from overflowing.
  double fraction(double v) const noexcept { return (0.5 * v - 0.5 * lo) / (0.5 * hi - 0.5 * lo); }
};

void require_bound(std::string_view name, const std::optional<double>& bound) {
  if (!bound) return;
  require(std::isfinite(*bound) && std::abs(*bound) <= kMaxMagnitude, kOp, name,
          " must be a finite number within +-1e300, got ", *bound);
}

// Validates the values and picks the colour range (see HeatmapFigure).
ValueRange value_range(const HeatmapFigure& f) {
  require_bound("value_min", f.value_min);
  require_bound("value_max", f.value_max);
  double lo = INFINITY, hi = -INFINITY;
  for (size_t i = 0; i < f.values.size(); ++i) {
    const double v = f.values[i];
    if (!std::isfinite(v)) continue;
    require(std::abs(v) <= kMaxMagnitude, kOp, "values must be within +-1e300 where finite, got ", v, " at index ", i);
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  ValueRange data{0, 1};
  if (f.colormap == ColorMap::kDiverging) {
    const double largest = lo <= hi ? std::max(std::abs(lo), std::abs(hi)) : 0;
    data = largest > 0 ? ValueRange{-largest, largest} : ValueRange{-1, 1};
  } else if (lo < hi) {
    data = {lo, hi};
  } else if (lo == hi) {  // a constant matrix: its colour sits in the middle
    const detail::AxisRange around = detail::widen_single(lo);
    data = {around.lo, around.hi};
  }
  const ValueRange r{f.value_min.value_or(data.lo), f.value_max.value_or(data.hi)};
  require(r.lo < r.hi, kOp, "value_min must be < value_max, got ", r.lo, " and ", r.hi);
  return r;
}

uint32_t pixel(Rgb c) noexcept {  // CAIRO_FORMAT_RGB24: 0x00RRGGBB in native order
  return (uint32_t{c.r} << 16) | (uint32_t{c.g} << 8) | uint32_t{c.b};
}

// An RGB24 image of w x h pixels filled by color(row, col).
template <class Color>
cairo_surface_t* make_image(int w, int h, Color color) {
  cairo_surface_t* image = cairo_image_surface_create(CAIRO_FORMAT_RGB24, w, h);
  if (const cairo_status_t status = cairo_surface_status(image); status != CAIRO_STATUS_SUCCESS) {
    cairo_surface_destroy(image);
    fail_runtime(kOp, "Cairo failed: ", cairo_status_to_string(status));
  }
  cairo_surface_flush(image);
  unsigned char* data = cairo_image_surface_get_data(image);
  const int stride = cairo_image_surface_get_stride(image);
  for (int i = 0; i < h; ++i) {
    auto* row = reinterpret_cast<uint32_t*>(data + static_cast<ptrdiff_t>(i) * stride);
    for (int j = 0; j < w; ++j) row[j] = pixel(color(i, j));
  }
  cairo_surface_mark_dirty(image);
  return image;
}

// Paints `image` stretched over `r` with nearest-neighbour sampling.
void paint_image(Canvas& canvas, cairo_surface_t* image, Rect r) {
  cairo_t* cr = canvas.cr();
  cairo_save(cr);
  cairo_rectangle(cr, r.x, r.y, r.w, r.h);
  cairo_clip(cr);
  cairo_translate(cr, r.x, r.y);
  cairo_scale(cr, static_cast<double>(r.w) / cairo_image_surface_get_width(image),
              static_cast<double>(r.h) / cairo_image_surface_get_height(image));
  cairo_set_source_surface(cr, image, 0, 0);
  cairo_pattern_set_filter(cairo_get_source(cr), CAIRO_FILTER_NEAREST);
  cairo_paint(cr);
  cairo_restore(cr);
  cairo_surface_destroy(image);
}

void draw_cells(Canvas& canvas, const HeatmapFigure& f, ValueRange range, Rect plot) {
  const auto cols = static_cast<size_t>(f.cols);
  cairo_surface_t* cells = make_image(static_cast<int>(f.cols), static_cast<int>(f.rows), [&](int i, int j) {
    const double v = f.values[static_cast<size_t>(i) * cols + static_cast<size_t>(j)];
    return std::isfinite(v) ? colormap_color(f.colormap, range.fraction(v)) : detail::kNonFiniteColor;
  });
  paint_image(canvas, cells, plot);
}

// Index ticks at cell centres along one side of the plot area.
void draw_index_axis(Canvas& canvas, Rect plot, int64_t count, bool along_x) {
  const int length = along_x ? plot.w : plot.h;
  const int max_ticks = std::max(3, length / (along_x ? 64 : 36));
  const detail::Ticks ticks = detail::nice_ticks(0, static_cast<double>(count - 1), max_ticks, 1.0);
  canvas.set_color(kInk);
  for (const double k : ticks.values) {
    const int at = static_cast<int>(std::floor((k + 0.5) * length / static_cast<double>(count)));
    const std::string label = detail::format_tick(k, ticks.step);
    if (along_x) {
      const int x = plot.x + at;
      const int bottom = plot.y + plot.h;
      canvas.vline(x, bottom + 1, bottom + 5);
      canvas.text(label, x + 0.5, bottom + 7, Align::kCentre, Align::kStart, detail::kTickSize);
    } else {
      const int y = plot.y + at;
      canvas.hline(plot.x - 5, plot.x - 1, y);
      canvas.text(label, plot.x - 7, y + 0.5, Align::kEnd, Align::kCentre, detail::kTickSize);
    }
  }
}

// Top row: value_max (t = 1), bottom row: value_min (t = 0), linear between.
void draw_colorbar(Canvas& canvas, const HeatmapFigure& f, ValueRange range, Rect bar) {
  const double last_row = std::max(1, bar.h - 1);
  paint_image(canvas, make_image(bar.w, bar.h, [&](int i, int) {
                return colormap_color(f.colormap, 1.0 - i / last_row);
              }),
              bar);
  canvas.set_color(kInk);
  canvas.frame(bar.x, bar.y, bar.w, bar.h);
  const detail::Ticks ticks = detail::nice_ticks(range.lo, range.hi, std::max(3, bar.h / 40));
  const int right = bar.x + bar.w;
  for (const double v : ticks.values) {
    const int y = bar.y + static_cast<int>(std::lround((1.0 - range.fraction(v)) * last_row));
    canvas.hline(right + 1, right + 5, y);
    canvas.text(detail::format_tick(v, ticks.step), right + 7, y + 0.5, Align::kStart, Align::kCentre,
                detail::kTickSize);
  }
}

}  // namespace

std::vector<unsigned char> render_heatmap(const HeatmapFigure& f) {
  require(f.rows >= 1, kOp, "rows must be >= 1, got ", f.rows);
  require(f.cols >= 1, kOp, "cols must be >= 1, got ", f.cols);
  require(f.rows <= kMaxSide, kOp, "rows must be <= 32767 (Cairo's largest image), got ", f.rows);
  require(f.cols <= kMaxSide, kOp, "cols must be <= 32767 (Cairo's largest image), got ", f.cols);
  const int64_t count = f.rows * f.cols;
  require(static_cast<int64_t>(f.values.size()) == count, kOp, "values holds ", f.values.size(),
          " numbers, rows * cols = ", count);
  detail::require_figure_size("width", f.width);
  detail::require_figure_size("height", f.height);
  detail::require_text("title", f.title);
  detail::require_text("x_label", f.x_label);
  detail::require_text("y_label", f.y_label);
  detail::require_text("colorbar_label", f.colorbar_label);
  const ValueRange range = value_range(f);

  Canvas canvas(f.width, f.height);
  const detail::HeatmapLayout layout = detail::heatmap_layout(f.width, f.height);
  const Rect plot = layout.plot;
  draw_cells(canvas, f, range, plot);
  draw_colorbar(canvas, f, range, layout.colorbar);
  canvas.set_color(kInk);
  canvas.frame(plot.x, plot.y, plot.w, plot.h);
  draw_index_axis(canvas, plot, f.cols, true);
  draw_index_axis(canvas, plot, f.rows, false);

  const double middle_y = plot.y + plot.h / 2.0;
  const double label_x = detail::kLabelBand / 2.0;
  canvas.text(f.x_label, plot.x + plot.w / 2.0, f.height - 6, Align::kCentre, Align::kEnd, detail::kLabelSize);
  canvas.text(f.y_label, label_x, middle_y, Align::kCentre, Align::kCentre, detail::kLabelSize, false,
              -std::numbers::pi / 2);
  canvas.text(f.colorbar_label, f.width - label_x, middle_y, Align::kCentre, Align::kCentre, detail::kLabelSize,
              false, -std::numbers::pi / 2);
  canvas.text(f.title, plot.x + plot.w / 2.0, detail::kTitleBand / 2.0, Align::kCentre, Align::kCentre,
              detail::kTitleSize, true);
  return canvas.png();
}

}  // namespace posenc::plot
