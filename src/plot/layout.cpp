#include "layout.h"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace posenc::plot::detail {

HeatmapLayout heatmap_layout(int width, int height) noexcept {
  HeatmapLayout l;
  l.plot = {kHeatmapLeft, kHeatmapTop, width - kHeatmapLeft - kHeatmapRight, height - kHeatmapTop - kHeatmapBottom};
  l.colorbar = {l.plot.x + l.plot.w + kColorbarGap, l.plot.y, kColorbarWidth, l.plot.h};
  l.title_band = {0, 0, width, kTitleBand};
  l.x_label_band = {l.plot.x, height - kLabelBand, l.plot.w, kLabelBand};
  l.y_label_band = {0, l.plot.y, kLabelBand, l.plot.h};
  l.colorbar_label_band = {width - kLabelBand, l.plot.y, kLabelBand, l.plot.h};
  return l;
}

LineLayout line_layout(int width, int height) noexcept {
  LineLayout l;
  l.plot = {kLinesLeft, kLinesTop, width - kLinesLeft - kLinesRight, height - kLinesTop - kLinesBottom};
  l.title_band = {0, 0, width, kTitleBand};
  l.x_label_band = {l.plot.x, height - kLabelBand, l.plot.w, kLabelBand};
  l.y_label_band = {0, l.plot.y, kLabelBand, l.plot.h};
  return l;
}

AxisRange widen_single(double v) noexcept {
  if (v == 0) return {-0.5, 0.5};
  const double d = std::abs(v) / 10;
  return {v - d, v + d};
}

AxisRange padded_range(double lo, double hi) noexcept {
  if (!(hi > lo)) return widen_single(lo);
  const double pad = 0.05 * (hi - lo);
  return {lo - pad, hi + pad};
}

double nice_step(double span, int max_ticks) noexcept {
  // Start one decade below the ideal step and walk up 1, 2, 5, 10, 20, ...
  // until the span holds at most max_ticks ticks (max_ticks - 1 intervals).
  if (!(span > 0) || !std::isfinite(span)) return 1;
  const double intervals = std::max(1, max_ticks - 1);
  double base = std::pow(10.0, std::floor(std::log10(span / intervals)) - 1);
  for (;;) {
    for (const double m : {1.0, 2.0, 5.0}) {
      const double step = m * base;
      if (span / step <= intervals * (1 + 1e-9)) return step;
    }
    base *= 10;
  }
}

Ticks nice_ticks(double lo, double hi, int max_ticks, double min_step) {
  Ticks ticks;
  if (!std::isfinite(hi - lo) || hi < lo) return ticks;
  if (hi == lo) {
    ticks.values.push_back(lo);
    return ticks;
  }
  ticks.step = std::max(nice_step(hi - lo, max_ticks), min_step);
  // A relative slack so that a tick on an end survives the rounding of lo / step.
  const double first = std::ceil(lo / ticks.step - 1e-9);
  const double last = std::floor(hi / ticks.step + 1e-9);
  for (double k = first; k <= last; ++k) ticks.values.push_back(k * ticks.step);
  return ticks;
}

std::string format_tick(double value, double step) {
  if (std::abs(value) < std::abs(step) * 1e-6) value = 0;  // no "-0" or "1e-17" at zero
  if (value == 0) return "0";
  char buffer[64];
  std::to_chars_result result;
  const double step_exponent = std::floor(std::log10(step) + 1e-9);
  if (step >= 1e-4 && std::abs(value) < 1e6) {
    const int decimals = static_cast<int>(std::max(0.0, -step_exponent));
    result = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::fixed, decimals);
  } else {
    // Enough significant digits to tell neighbouring ticks apart.
    const double digits = std::floor(std::log10(std::abs(value)) + 1e-9) - step_exponent;
    const int precision = static_cast<int>(std::clamp(digits, 0.0, 15.0));
    result = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::scientific, precision);
  }
  return std::string(buffer, result.ptr);
}

}  // namespace posenc::plot::detail
