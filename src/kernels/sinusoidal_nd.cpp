#include "posenc/kernels/sinusoidal_nd.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "posenc/error.h"
#include "sinusoid_engine.h"

namespace posenc::kernels {
namespace {

}  // namespace

void validate(const SinusoidalGridParams& p, bool three_d) {
  const char* op = three_d ? "sinusoidal-3d" : "sinusoidal-2d";
  const int64_t axes = three_d ? 3 : 2;
  if (three_d) require(p.frames >= 1, op, "frames must be at least 1, got ", p.frames);
  require(p.height >= 1, op, "height must be at least 1, got ", p.height);
  require(p.width >= 1, op, "width must be at least 1, got ", p.width);
  require(p.dim >= 1, op, "dim must be positive, got ", p.dim);
  require(p.dim % (2 * axes) == 0, op, "dim must be divisible by ", 2 * axes, " (an even share per axis), got ",
          p.dim);
  require(std::isfinite(p.base) && p.base > 0, op, "base must be finite and > 0, got ", p.base);
  require(std::isfinite(p.scale), op, "scale must be finite, got ", p.scale);
  require(std::isfinite(p.normalize_scale), op, "normalize_scale must be finite, got ", p.normalize_scale);
  const int64_t cells_limit = kMaxTableValues / p.dim;
  const int64_t frames = three_d ? p.frames : 1;
  const bool fits = p.height <= cells_limit / p.width && frames <= cells_limit / (p.height * p.width);
  if (!fits) {
    if (three_d) {
      fail_argument(op, "grid cells x dim must be at most ", kMaxTableValues, " values, got ", frames, " x ", p.height,
                    " x ", p.width, " x ", p.dim);
    }
    fail_argument(op, "grid cells x dim must be at most ", kMaxTableValues, " values, got ", p.height, " x ", p.width,
                  " x ", p.dim);
  }
}

namespace {

// 1D encoding of coordinates 0..size-1 (or their normalized values) on one axis.
template <class T>
std::vector<T> axis_table(const SinusoidalGridParams& p, int64_t size, int64_t axis_dim) {
  const std::vector<double> omega = sinusoidal_frequencies(axis_dim, p.base);
  const detail::SinusoidRows rows{omega, p.scale, p.layout, p.precision, axis_dim};
  std::vector<T> table(static_cast<size_t>(size * axis_dim));
  const double step = !p.normalize ? 1.0 : size > 1 ? p.normalize_scale / static_cast<double>(size - 1) : 0.0;
  detail::sinusoid_rows_arithmetic(rows, 0.0, step, size, table.data());
  return table;
}

template <class T>
void fill_grid(const SinusoidalGridParams& p, bool three_d, std::span<T> out) {
  validate(p, three_d);
  const char* op = three_d ? "sinusoidal-3d" : "sinusoidal-2d";
  const int64_t frames = three_d ? p.frames : 1;
  const int64_t cells = frames * p.height * p.width;
  require(static_cast<int64_t>(out.size()) == cells * p.dim, op, "out must hold cells x dim = ", cells * p.dim,
          " values, got ", out.size());
  const int64_t axes = three_d ? 3 : 2;
  const int64_t axis_dim = p.dim / axes;
  // Axis order in the channels: (t,) y, x.
  std::vector<int64_t> sizes = three_d ? std::vector<int64_t>{frames, p.height, p.width}
                                       : std::vector<int64_t>{p.height, p.width};
  std::vector<std::vector<T>> tables;
  for (int64_t size : sizes) tables.push_back(axis_table<T>(p, size, axis_dim));
#pragma omp parallel for schedule(static) if (cells * p.dim > (int64_t{1} << 16))
  for (int64_t cell = 0; cell < cells; ++cell) {
    std::array<int64_t, 3> coord{};
    int64_t rest = cell;
    for (int64_t a = axes - 1; a >= 0; --a) {
      coord[a] = rest % sizes[a];
      rest /= sizes[a];
    }
    T* row = out.data() + cell * p.dim;
    for (int64_t a = 0; a < axes; ++a) {
      const T* src = tables[a].data() + coord[a] * axis_dim;
      std::copy(src, src + axis_dim, row + a * axis_dim);
    }
  }
}

}  // namespace

template <class T>
void sinusoidal_2d(const SinusoidalGridParams& params, std::span<T> out) {
  fill_grid(params, false, out);
}

template <class T>
void sinusoidal_3d(const SinusoidalGridParams& params, std::span<T> out) {
  fill_grid(params, true, out);
}

template void sinusoidal_2d<float>(const SinusoidalGridParams&, std::span<float>);
template void sinusoidal_2d<double>(const SinusoidalGridParams&, std::span<double>);
template void sinusoidal_3d<float>(const SinusoidalGridParams&, std::span<float>);
template void sinusoidal_3d<double>(const SinusoidalGridParams&, std::span<double>);

}  // namespace posenc::kernels
