#include "posenc/report/pictures.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "posenc/error.h"
#include "posenc/plot/figures.h"

namespace posenc::report {
namespace {

// plot's defaults, read from its structs so the two cannot drift apart.
PictureSize default_size(Picture picture) {
  if (picture == Picture::kDecay) {
    const plot::LineFigure f;
    return {f.width, f.height};
  }
  const plot::HeatmapFigure f;
  return {f.width, f.height};
}

// k with 10^k <= the largest |value| < 10^(k+1); 0 for all zeros.
int decimal_exponent(const std::vector<double>& values) {
  double largest = 0.0;
  for (double v : values)
    if (std::isfinite(v)) largest = std::max(largest, std::abs(v));
  return largest > 0.0 ? static_cast<int>(std::floor(std::log10(largest))) : 0;
}

// values / 10^k, as two steps when 10^k itself is not a float64 (k > 308).
analysis::Matrix divided(const analysis::Matrix& m, int k) {
  analysis::Matrix out = m;
  const int first = k / 2, second = k - first;
  const double a = std::pow(10.0, -first), b = std::pow(10.0, -second);
  for (double& v : out.values) v = v * a * b;
  return out;
}

// Dot proximity of a table whose largest |value| lies outside [1e-150, 1e150]
// leaves float64 (or its sums lose their terms): such a table is drawn divided.
constexpr int kDotExponent = 150;

}  // namespace

PictureMatrix picture_proximity(const analysis::Matrix& table, analysis::ProximityKind kind) {
  const std::string name = std::string(analysis::proximity_kind_name(kind)) + " proximity";
  const int k = decimal_exponent(table.values);
  if (kind == analysis::ProximityKind::kCosine || std::abs(k) <= kDotExponent)
    return {analysis::proximity(table, kind), name};
  return {analysis::proximity(divided(table, k), kind), name + " / 1e" + std::to_string(2 * k)};
}

PictureRow picture_proximity_row(const analysis::Matrix& table, int64_t reference, analysis::ProximityKind kind) {
  const std::string name = std::string(analysis::proximity_kind_name(kind)) + " proximity";
  const int k = decimal_exponent(table.values);
  if (kind == analysis::ProximityKind::kCosine || std::abs(k) <= kDotExponent)
    return {analysis::proximity_row(table, reference, kind), name};
  return {analysis::proximity_row(divided(table, k), reference, kind), name + " / 1e" + std::to_string(2 * k)};
}

Picture parse_picture(std::string_view name, std::string_view op) {
  if (name == "encoding") return Picture::kEncoding;
  if (name == "similarity") return Picture::kSimilarity;
  if (name == "decay") return Picture::kDecay;
  fail_argument(op, "figure must be one of encoding, similarity, decay, got '", name, "'");
}

std::string_view picture_name(Picture picture) noexcept {
  switch (picture) {
    case Picture::kEncoding: return "encoding";
    case Picture::kSimilarity: return "similarity";
    case Picture::kDecay: return "decay";
  }
  return "?";
}

PictureSize picture_size(Picture picture, PictureSize size) {
  const PictureSize d = default_size(picture);
  return {size.width > 0 ? size.width : d.width, size.height > 0 ? size.height : d.height};
}

std::vector<unsigned char> encoding_picture(const analysis::Matrix& table, std::string_view name, PictureSize size) {
  size = picture_size(Picture::kEncoding, size);
  // plot draws values within +-1e300 (its spans and paddings stay finite): a
  // larger table is drawn divided by 10^k, the same picture, its scale in the label.
  const int k = decimal_exponent(table.values);
  const bool scaled = k >= 300;
  const analysis::Matrix shown = scaled ? divided(table, k) : analysis::Matrix();
  plot::HeatmapFigure f;
  f.values = scaled ? shown.values : table.values;
  f.rows = table.rows;
  f.cols = table.cols;
  f.title = std::string(name) + ": encoding [" + std::to_string(table.rows) + " x " + std::to_string(table.cols) + "]";
  f.x_label = "dimension";
  f.y_label = "position";
  f.colorbar_label = scaled ? "value / 1e" + std::to_string(k) : "value";
  f.colormap = plot::ColorMap::kDiverging;
  f.width = size.width;
  f.height = size.height;
  return plot::render_heatmap(f);
}

std::vector<unsigned char> similarity_picture(const analysis::Matrix& s, std::string_view name,
                                              std::string_view matrix_label, PictureSize size) {
  size = picture_size(Picture::kSimilarity, size);
  plot::HeatmapFigure f;
  f.values = s.values;
  f.rows = s.rows;
  f.cols = s.cols;
  f.title = std::string(name) + ": " + std::string(matrix_label);
  f.x_label = "position j";
  f.y_label = "position i";
  f.colorbar_label = std::string(matrix_label);
  f.colormap = plot::ColorMap::kSequential;
  f.width = size.width;
  f.height = size.height;
  return plot::render_heatmap(f);
}

std::vector<unsigned char> decay_picture(const analysis::Matrix& s, int64_t reference, std::string_view name,
                                         std::string_view matrix_label, PictureSize size) {
  analysis::validate_square("plot", "matrix", s);
  require(reference >= 0 && reference < s.rows, "plot", "reference must be in [0, ", s.rows - 1, "] for ", s.rows,
          " positions, got ", reference);
  return decay_picture_row(std::span<const double>(s.values).subspan(static_cast<size_t>(reference * s.cols),
                                                                     static_cast<size_t>(s.cols)),
                           reference, name, matrix_label, size);
}

std::vector<unsigned char> decay_picture_row(std::span<const double> row, int64_t reference, std::string_view name,
                                             std::string_view matrix_label, PictureSize size) {
  const auto n = static_cast<int64_t>(row.size());
  require(reference >= 0 && reference < n, "plot", "reference must be in [0, ", n - 1, "] for ", n,
          " positions, got ", reference);
  size = picture_size(Picture::kDecay, size);
  plot::LineSeries line;
  line.label = std::string(matrix_label);
  for (int64_t j = 0; j < n; ++j) {
    line.x.push_back(static_cast<double>(j));
    line.y.push_back(row[static_cast<size_t>(j)]);
  }
  plot::LineFigure f;
  f.series.push_back(std::move(line));
  f.title = std::string(name) + ": S[" + std::to_string(reference) + ", j], " + std::string(matrix_label);
  f.x_label = "position j";
  f.y_label = std::string(matrix_label);
  f.marker_x = static_cast<double>(reference);
  f.width = size.width;
  f.height = size.height;
  return plot::render_lines(f);
}

}  // namespace posenc::report
