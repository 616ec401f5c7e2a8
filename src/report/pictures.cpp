#include "posenc/report/pictures.h"

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

}  // namespace

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
  plot::HeatmapFigure f;
  f.values = table.values;
  f.rows = table.rows;
  f.cols = table.cols;
  f.title = std::string(name) + ": encoding [" + std::to_string(table.rows) + " x " + std::to_string(table.cols) + "]";
  f.x_label = "dimension";
  f.y_label = "position";
  f.colorbar_label = "value";
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
  size = picture_size(Picture::kDecay, size);
  plot::LineSeries line;
  line.label = std::string(matrix_label);
  for (int64_t j = 0; j < s.cols; ++j) {
    line.x.push_back(static_cast<double>(j));
    line.y.push_back(s(reference, j));
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
