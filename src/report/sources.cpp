#include "posenc/report/sources.h"

#include <algorithm>
#include <cmath>
#include <span>
#include <sstream>
#include <vector>

#include "posenc/analysis/translation_fit.h"
#include "posenc/error.h"
#include "posenc/io/tensor_file.h"
#include "posenc/kernels/positions.h"
#include "posenc/kernels/rope.h"
#include "posenc/kernels/rope_range.h"
#include "posenc/kernels/rope_axes.h"
#include "posenc/kernels/translation.h"
#include "random_normal.h"

namespace posenc::report {
namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::ostringstream s;
  s << '[';
  for (size_t k = 0; k < shape.size(); ++k) s << (k ? ", " : "") << shape[k];
  s << ']';
  return s.str();
}

}  // namespace

bool is_file_source(std::string_view source) noexcept {
  return source.ends_with(".npy") || source.ends_with(".safetensors");
}

TableSource absolute_source(std::string_view name, const kernels::AbsoluteParams& params,
                            const kernels::Positions& positions) {
  kernels::validate(params, positions);
  TableSource s;
  s.name = std::string(name);
  for (const kernels::AbsoluteKindInfo& info : kernels::absolute_kinds()) {
    if (info.kind == params.kind) s.description = std::string(info.summary);
  }
  s.table = analysis::Matrix(positions.count, params.dim);
  kernels::absolute_table<double>(params, positions, s.table.values);
  if (params.kind == kernels::AbsoluteKind::kSinusoidal) {
    kernels::SinusoidalParams sp;
    sp.dim = params.dim;
    sp.base = params.base;
    sp.layout = params.layout;
    s.exact_operator = [sp](int64_t delta) {
      analysis::Matrix t(sp.dim, sp.dim);
      kernels::translation_matrix(sp, static_cast<double>(delta), t.values);
      return t;
    };
  }
  return s;
}

TableSource grid_source(std::string_view name, bool three_d, const kernels::SinusoidalGridParams& params) {
  kernels::validate(params, three_d);
  const int64_t frames = three_d ? params.frames : 1;
  TableSource s;
  s.name = std::string(name);
  s.description = three_d ? "rows (t*H+y)*W+x; D/3 channels each for t, y, x (ViViT)"
                          : "rows y*W+x; channels [0, D/2) encode y, [D/2, D) encode x (DETR, MAE)";
  s.table = analysis::Matrix(frames * params.height * params.width, params.dim);
  if (three_d) {
    kernels::sinusoidal_3d<double>(params, s.table.values);
  } else {
    kernels::sinusoidal_2d<double>(params, s.table.values);
  }
  // No exact operator: a shift of the flattened row index is not a shift of
  // the grid coordinates (it wraps at the end of each row).
  return s;
}

TableSource rope_source(std::string_view name, int64_t dim, double base, const kernels::RopeScaling& scaling,
                        std::optional<int64_t> seq_len, kernels::Precision precision, int64_t start,
                        int64_t positions) {
  const kernels::RopeConfig config{dim, base, scaling, precision};
  kernels::RopeRangeTable<double> rows = kernels::rope_range_rows<double>(config, seq_len, start, positions);
  TableSource s;
  s.name = std::string(name);
  s.description = "RoPE cache: cos(p * w_i) in [0, D/2), sin in [D/2, D), w_i = base^(-2i/D) (Su et al. 2021)";
  s.table.rows = positions;  // the rows as built: no zero-filled Matrix to overwrite
  s.table.cols = dim;
  s.table.values = std::move(rows.values);
  const int64_t half = dim / 2;
  // Pair i: sin in column D/2 + i, cos in column i, turning by delta * omega_i.
  std::vector<analysis::RotationPair> pairs(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    pairs[static_cast<size_t>(i)] = {half + i, i, rows.frequencies.inv_freq[static_cast<size_t>(i)]};
  }
  s.exact_operator = [dim, pairs](int64_t delta) { return analysis::rotation_operator(dim, pairs, delta); };
  return s;
}

TableSource rope_axial_source(std::string_view name, int64_t height, int64_t width, int64_t dim, double base) {
  const char* op = "rope-axial";
  require(height >= 1, op, "height must be >= 1, got ", height);
  require(width >= 1, op, "width must be >= 1, got ", width);
  require(dim >= 4 && dim % 4 == 0, op, "dim must be a positive multiple of 4 (an even share per axis), got ", dim);
  const int64_t rows = height * width;
  kernels::validate_table_size(op, kernels::Positions::range(0, rows), dim);
  const std::vector<int64_t> dims = kernels::rope_axial_default_dims(dim, 2, op);
  const kernels::RopeAxisFrequencies f = kernels::rope_axial_frequencies(dims, base, {}, {}, op);
  kernels::RopeTableSpec spec;
  spec.omega = f.omega;
  spec.axis_of = f.axis_of;
  spec.n_axes = 2;
  spec.attention_factor = f.attention_factor;
  std::vector<int64_t> pos(static_cast<size_t>(rows * 2));
  for (int64_t y = 0; y < height; ++y) {
    for (int64_t x = 0; x < width; ++x) {
      pos[static_cast<size_t>(2 * (y * width + x))] = y;
      pos[static_cast<size_t>(2 * (y * width + x) + 1)] = x;
    }
  }
  const int64_t half = dim / 2;
  std::vector<double> cos(static_cast<size_t>(rows * half)), sin(cos.size());
  kernels::rope_cos_sin<double>(spec, pos.data(), nullptr, rows, cos.data(), sin.data());
  TableSource s;
  s.name = std::string(name);
  s.description = "axial 2D RoPE cos/sin table on a " + std::to_string(height) + " x " + std::to_string(width) +
                  " grid (rows y*W+x): half the frequencies turn with y, half with x (Heo et al. 2024)";
  s.table = analysis::Matrix(rows, dim);
  for (int64_t r = 0; r < rows; ++r) {
    std::copy_n(cos.begin() + r * half, half, s.table.values.begin() + r * dim);
    std::copy_n(sin.begin() + r * half, half, s.table.values.begin() + r * dim + half);
  }
  return s;
}

TableSource learned_init_source(std::string_view name, int64_t positions, int64_t dim, double std, uint64_t seed) {
  const char* op = "learned";
  require(positions >= 1, op, "positions must be at least 1, got ", positions);
  require(dim >= 1, op, "dim must be at least 1, got ", dim);
  require(std::isfinite(std) && std > 0, op, "std must be finite and > 0, got ", std);
  kernels::validate_table_size(op, kernels::Positions::range(0, positions), dim);
  TableSource s;
  s.name = std::string(name);
  std::ostringstream d;
  d << "a learned table (BERT, GPT-2) at its initialisation: N(0, " << std << "^2) entries, seed " << seed;
  s.description = d.str();
  s.untrained = true;
  s.table = analysis::Matrix(positions, dim);
  s.table.values = detail::normal_values(s.table.values.size(), std, seed);
  return s;
}

TableSource file_source(std::string_view op, const std::string& path, const std::optional<std::string>& tensor) {
  io::NamedTensor named = io::load_tensor(path, tensor);
  const std::string label = named.name.empty() ? "the array" : "tensor '" + named.name + "'";
  std::vector<int64_t> shape = named.tensor.shape;
  // ViT / MAE store [1, N, D]: drop leading 1s down to two axes.
  while (shape.size() > 2 && shape.front() == 1) shape.erase(shape.begin());
  if (shape.size() != 2) {
    fail_argument(op, label, " of ", path, " must be 2-D [positions, dim] (leading 1s are squeezed), got ",
                  shape_text(named.tensor.shape));
  }
  TableSource s;
  s.name = named.name.empty() ? path : path + ":" + named.name;
  s.description = "read from " + path + (named.name.empty() ? "" : " (tensor " + named.name + ")") + ", " +
                  std::string(io::element_type_name(named.tensor.type)) + " " + shape_text(named.tensor.shape);
  s.table.rows = shape[0];
  s.table.cols = shape[1];
  s.table.values = named.tensor.to_double();
  for (int64_t r = 0; r < s.table.rows; ++r) {
    for (int64_t c = 0; c < s.table.cols; ++c) {
      const double x = s.table(r, c);
      if (!std::isfinite(x)) {
        std::ostringstream value;
        value << x;
        fail_argument(op, label, " of ", path, " has a non-finite value at (", r, ", ", c, "): ", value.str());
      }
    }
  }
  return s;
}

}  // namespace posenc::report
