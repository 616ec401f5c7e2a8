// The fixed input encodings: SinusoidalEncoding (1D) and
// SinusoidalEncoding2d / 3d (grids). Options are validated at construction
// by the kernels, with the ops' messages.
#include <ATen/ATen.h>

#include <ostream>

#include "op_support.h"
#include "posenc/nn/ops.h"
#include "posenc/nn/sinusoidal_encoding.h"
#include "posenc/nn/sinusoidal_grid_encoding.h"

namespace posenc::nn {
namespace {

// Rows start .. start+count-1 of a grid table (cells, dim).
at::Tensor grid_rows(const std::string& name, const at::Tensor& grid, int64_t start, int64_t count) {
  const int64_t cells = grid.size(0);
  TORCH_CHECK_VALUE(start >= 0 && count >= 0 && start <= cells - count, "[", name, "] cells ", start, "..",
                    start + count - 1, " must lie in the grid of ", cells, " cells (0..", cells - 1, ")");
  return grid.narrow(0, start, count);
}

// Rows at integer positions of shape S of a grid table -> S + (dim).
at::Tensor grid_rows_at(const std::string& name, const at::Tensor& grid, const at::Tensor& positions) {
  const at::Tensor p = detail::int64_positions(name, positions);
  const int64_t cells = grid.size(0);
  if (p.numel() > 0) {
    const int64_t lo = p.min().item<int64_t>();
    const int64_t hi = p.max().item<int64_t>();
    TORCH_CHECK_VALUE(lo >= 0 && hi < cells, "[", name, "] position ", lo < 0 ? lo : hi,
                      " is outside the grid of ", cells, " cells (valid 0..", cells - 1, ")");
  }
  return grid.index_select(0, p.reshape(-1)).reshape(detail::table_sizes(p.sizes(), grid.size(1)));
}

kernels::SinusoidalGridParams grid_params(int64_t frames, int64_t height, int64_t width, int64_t dim, double base,
                                          double scale, kernels::SinusoidalLayout layout,
                                          kernels::Precision precision, bool normalize, double normalize_scale) {
  return {frames, height, width, dim, base, scale, layout, precision, normalize, normalize_scale};
}

void print_common(std::ostream& stream, double base, double scale, kernels::SinusoidalLayout layout,
                  kernels::Precision precision, InputMode mode) {
  stream << ", base=" << base << ", scale=" << scale << ", layout=" << kernels::layout_name(layout)
         << ", precision=" << kernels::precision_name(precision) << ", mode=" << input_mode_name(mode) << ")";
}

}  // namespace

SinusoidalEncodingImpl::SinusoidalEncodingImpl(const SinusoidalEncodingOptions& options)
    : InputEncodingImpl("SinusoidalEncoding", options.dim(), options.mode()),
      options_(options),
      params_{options.dim(), options.base(), options.scale(), options.layout(), options.precision()} {
  detail::translate_errors([&] { kernels::validate(params_, "sinusoidal"); });
}

at::Tensor SinusoidalEncodingImpl::encode_range(int64_t start, int64_t count, at::ScalarType compute) {
  return ops::sinusoidal_range(start, count, params_, compute);
}

at::Tensor SinusoidalEncodingImpl::encode(const at::Tensor& positions, at::ScalarType compute) {
  return ops::sinusoidal(positions, params_, compute);
}

void SinusoidalEncodingImpl::pretty_print(std::ostream& stream) const {
  stream << "posenc::nn::SinusoidalEncoding(dim=" << options_.dim();
  print_common(stream, options_.base(), options_.scale(), options_.layout(), options_.precision(), options_.mode());
}

SinusoidalEncoding2dImpl::SinusoidalEncoding2dImpl(const SinusoidalEncoding2dOptions& options)
    : InputEncodingImpl("SinusoidalEncoding2d", options.dim(), options.mode()),
      options_(options),
      params_(grid_params(1, options.height(), options.width(), options.dim(), options.base(), options.scale(),
                          options.layout(), options.precision(), options.normalize(), options.normalize_scale())) {
  grid(at::kFloat);  // validates the options
}

at::Tensor SinusoidalEncoding2dImpl::grid(at::ScalarType compute) const { return ops::sinusoidal_2d(params_, compute); }

at::Tensor SinusoidalEncoding2dImpl::encode_range(int64_t start, int64_t count, at::ScalarType compute) {
  return grid_rows(name(), grid(compute), start, count);
}

at::Tensor SinusoidalEncoding2dImpl::encode(const at::Tensor& positions, at::ScalarType compute) {
  return grid_rows_at(name(), grid(compute), positions);
}

void SinusoidalEncoding2dImpl::pretty_print(std::ostream& stream) const {
  stream << "posenc::nn::SinusoidalEncoding2d(height=" << options_.height() << ", width=" << options_.width()
         << ", dim=" << options_.dim() << ", normalize=" << (options_.normalize() ? "true" : "false");
  print_common(stream, options_.base(), options_.scale(), options_.layout(), options_.precision(), options_.mode());
}

SinusoidalEncoding3dImpl::SinusoidalEncoding3dImpl(const SinusoidalEncoding3dOptions& options)
    : InputEncodingImpl("SinusoidalEncoding3d", options.dim(), options.mode()),
      options_(options),
      params_(grid_params(options.frames(), options.height(), options.width(), options.dim(), options.base(),
                          options.scale(), options.layout(), options.precision(), options.normalize(),
                          options.normalize_scale())) {
  grid(at::kFloat);  // validates the options
}

at::Tensor SinusoidalEncoding3dImpl::grid(at::ScalarType compute) const { return ops::sinusoidal_3d(params_, compute); }

at::Tensor SinusoidalEncoding3dImpl::encode_range(int64_t start, int64_t count, at::ScalarType compute) {
  return grid_rows(name(), grid(compute), start, count);
}

at::Tensor SinusoidalEncoding3dImpl::encode(const at::Tensor& positions, at::ScalarType compute) {
  return grid_rows_at(name(), grid(compute), positions);
}

void SinusoidalEncoding3dImpl::pretty_print(std::ostream& stream) const {
  stream << "posenc::nn::SinusoidalEncoding3d(frames=" << options_.frames() << ", height=" << options_.height()
         << ", width=" << options_.width() << ", dim=" << options_.dim()
         << ", normalize=" << (options_.normalize() ? "true" : "false");
  print_common(stream, options_.base(), options_.scale(), options_.layout(), options_.precision(), options_.mode());
}

}  // namespace posenc::nn
