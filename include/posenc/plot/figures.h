// PNG figures drawn with Cairo: a heatmap with a colour bar (the encoding
// matrix, position x dimension, as the tutorials draw it; a proximity matrix,
// position x position) and a line plot (proximity against offset). Every
// figure has a title, axis labels and numbered ticks; a heatmap's colour bar
// is labelled with its value range. Rendering is deterministic (same input,
// same bytes) and does not depend on installed fonts beyond Cairo's default
// sans-serif face.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace posenc::plot {

// kSequential: viridis (low dark purple -> high yellow), for proximity.
// kDiverging: blue - white - red centred on 0, for signed encoding values.
enum class ColorMap { kSequential, kDiverging };

struct HeatmapFigure {
  std::span<const double> values;  // rows * cols, row-major; row 0 drawn at the top
  int64_t rows = 0;
  int64_t cols = 0;
  std::string title;
  std::string x_label;   // along columns
  std::string y_label;   // along rows
  std::string colorbar_label;
  ColorMap colormap = ColorMap::kSequential;
  // Colour range; default: [min, max] of the finite values (kDiverging: +-max|v|).
  std::optional<double> value_min, value_max;
  int width = 720, height = 600;  // pixels
};

struct LineSeries {
  std::vector<double> x, y;
  std::string label;  // shown in a legend when the figure has 2+ series
};

struct LineFigure {
  std::vector<LineSeries> series;
  std::string title;
  std::string x_label;
  std::string y_label;
  std::optional<double> marker_x;  // a dashed vertical line (e.g. the reference position)
  int width = 720, height = 480;
};

// PNG file bytes. Throws std::invalid_argument naming the field:
//   "[plot] values holds 11 numbers, rows * cols = 12"
//   "[plot] rows must be >= 1, got 0"
//   "[plot] series 0 has 5 x values and 4 y values"
//   "[plot] width must be in [200, 8192], got 50"
// (docs/figures.md lists every check) and std::runtime_error when Cairo fails.
std::vector<unsigned char> render_heatmap(const HeatmapFigure& figure);
std::vector<unsigned char> render_lines(const LineFigure& figure);

// Writes bytes to path atomically (temporary file, then rename).
void write_png_file(const std::string& path, std::span<const unsigned char> png);

// The sequential / diverging colour of t in [0, 1] (clamped; NaN gives the
// neutral grey of non-finite cells), as 8-bit RGB; exposed so tests can check
// pixels against the colour bar.
struct Rgb {
  unsigned char r, g, b;
};
Rgb colormap_color(ColorMap map, double t) noexcept;

}  // namespace posenc::plot
