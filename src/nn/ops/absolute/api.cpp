// The dispatcher calls (dispatch.h) and the typed C++ API on top (posenc/nn/absolute_ops.h).
#include "posenc/nn/absolute_ops.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include <string_view>

#include "dispatch.h"

namespace posenc::nn {
namespace dispatch {
namespace {

template <class Signature>
c10::TypedOperatorHandle<Signature> find_op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Signature>();
}

}  // namespace

at::Tensor sinusoidal(const at::Tensor& positions, int64_t dim, double base, double scale, c10::string_view layout,
                      c10::string_view precision, c10::optional<at::ScalarType> dtype) {
  static const auto op = find_op<decltype(sinusoidal)>("posenc::sinusoidal");
  return op.call(positions, dim, base, scale, layout, precision, dtype);
}

at::Tensor sinusoidal_range(int64_t start, int64_t count, int64_t dim, double base, double scale,
                            c10::string_view layout, c10::string_view precision,
                            c10::optional<at::ScalarType> dtype) {
  static const auto op = find_op<decltype(sinusoidal_range)>("posenc::sinusoidal_range");
  return op.call(start, count, dim, base, scale, layout, precision, dtype);
}

at::Tensor sinusoidal_frequencies(int64_t dim, double base) {
  static const auto op = find_op<decltype(sinusoidal_frequencies)>("posenc::sinusoidal_frequencies");
  return op.call(dim, base);
}

at::Tensor absolute_table(c10::string_view kind, const at::Tensor& positions, int64_t dim, double base,
                          double scale, c10::string_view layout, c10::string_view precision, int64_t length,
                          c10::optional<at::ScalarType> dtype) {
  static const auto op = find_op<decltype(absolute_table)>("posenc::absolute_table");
  return op.call(kind, positions, dim, base, scale, layout, precision, length, dtype);
}

at::Tensor absolute_table_range(c10::string_view kind, int64_t start, int64_t count, int64_t dim, double base,
                                double scale, c10::string_view layout, c10::string_view precision,
                                int64_t length, c10::optional<at::ScalarType> dtype) {
  static const auto op = find_op<decltype(absolute_table_range)>("posenc::absolute_table_range");
  return op.call(kind, start, count, dim, base, scale, layout, precision, length, dtype);
}

at::Tensor absolute(c10::string_view kind, const at::Tensor& positions, int64_t dim, double base, double scale,
                    c10::string_view layout, c10::string_view precision, int64_t length,
                    c10::optional<at::ScalarType> dtype, const c10::optional<at::Tensor>& table,
                    const c10::optional<at::Tensor>& omega) {
  static const auto op = find_op<decltype(absolute)>("posenc::absolute");
  return op.call(kind, positions, dim, base, scale, layout, precision, length, dtype, table, omega);
}

at::Tensor absolute_range(c10::string_view kind, int64_t start, int64_t count, int64_t dim, double base,
                          double scale, c10::string_view layout, c10::string_view precision, int64_t length,
                          c10::optional<at::ScalarType> dtype, const c10::optional<at::Tensor>& table,
                          const c10::optional<at::Tensor>& omega) {
  static const auto op = find_op<decltype(absolute_range)>("posenc::absolute_range");
  return op.call(kind, start, count, dim, base, scale, layout, precision, length, dtype, table, omega);
}

std::vector<std::string> absolute_kinds() {
  static const auto op = find_op<decltype(absolute_kinds)>("posenc::absolute_kinds");
  return op.call();
}

at::Tensor learnable_sinusoidal(const at::Tensor& positions, const at::Tensor& omega, c10::string_view layout,
                                double scale) {
  static const auto op = find_op<decltype(learnable_sinusoidal)>("posenc::learnable_sinusoidal");
  return op.call(positions, omega, layout, scale);
}

at::Tensor learnable_sinusoidal_backward(const at::Tensor& grad_out, const at::Tensor& positions,
                                         const at::Tensor& omega, c10::string_view layout, double scale) {
  static const auto op = find_op<decltype(learnable_sinusoidal_backward)>("posenc::learnable_sinusoidal_backward");
  return op.call(grad_out, positions, omega, layout, scale);
}

at::Tensor learned(const at::Tensor& table, const at::Tensor& positions) {
  static const auto op = find_op<decltype(learned)>("posenc::learned");
  return op.call(table, positions);
}

at::Tensor learned_backward(const at::Tensor& grad_out, const at::Tensor& positions, int64_t rows) {
  static const auto op = find_op<decltype(learned_backward)>("posenc::learned_backward");
  return op.call(grad_out, positions, rows);
}

at::Tensor sinusoidal_2d(int64_t height, int64_t width, int64_t dim, double base, double scale,
                         c10::string_view layout, c10::string_view precision, bool normalize, double normalize_scale,
                         c10::optional<at::ScalarType> dtype) {
  static const auto op = find_op<decltype(sinusoidal_2d)>("posenc::sinusoidal_2d");
  return op.call(height, width, dim, base, scale, layout, precision, normalize, normalize_scale, dtype);
}

at::Tensor sinusoidal_3d(int64_t frames, int64_t height, int64_t width, int64_t dim, double base, double scale,
                         c10::string_view layout, c10::string_view precision, bool normalize, double normalize_scale,
                         c10::optional<at::ScalarType> dtype) {
  static const auto op = find_op<decltype(sinusoidal_3d)>("posenc::sinusoidal_3d");
  return op.call(frames, height, width, dim, base, scale, layout, precision, normalize, normalize_scale, dtype);
}

at::Tensor translation_matrix(double delta, int64_t dim, double base, c10::string_view layout) {
  static const auto op = find_op<decltype(translation_matrix)>("posenc::translation_matrix");
  return op.call(delta, dim, base, layout);
}

}  // namespace dispatch

namespace ops {
namespace {

c10::string_view view(std::string_view s) noexcept { return c10::string_view(s.data(), s.size()); }

}  // namespace

at::Tensor sinusoidal(const at::Tensor& positions, const kernels::SinusoidalParams& params, at::ScalarType dtype) {
  return dispatch::sinusoidal(positions, params.dim, params.base, params.scale, view(kernels::layout_name(params.layout)),
                              view(kernels::precision_name(params.precision)), dtype);
}

at::Tensor sinusoidal_range(int64_t start, int64_t count, const kernels::SinusoidalParams& params,
                            at::ScalarType dtype) {
  return dispatch::sinusoidal_range(start, count, params.dim, params.base, params.scale,
                                    view(kernels::layout_name(params.layout)),
                                    view(kernels::precision_name(params.precision)), dtype);
}

at::Tensor sinusoidal_frequencies(int64_t dim, double base) { return dispatch::sinusoidal_frequencies(dim, base); }

at::Tensor absolute(const at::Tensor& positions, const kernels::AbsoluteParams& params, at::ScalarType dtype) {
  return dispatch::absolute_table(view(kernels::absolute_kind_name(params.kind)), positions, params.dim, params.base,
                                  params.scale, view(kernels::layout_name(params.layout)),
                                  view(kernels::precision_name(params.precision)), params.length, dtype);
}

at::Tensor absolute_range(int64_t start, int64_t count, const kernels::AbsoluteParams& params, at::ScalarType dtype) {
  return dispatch::absolute_table_range(view(kernels::absolute_kind_name(params.kind)), start, count, params.dim,
                                        params.base, params.scale, view(kernels::layout_name(params.layout)),
                                        view(kernels::precision_name(params.precision)), params.length, dtype);
}

std::vector<std::string> absolute_kinds() { return dispatch::absolute_kinds(); }

at::Tensor learnable_sinusoidal(const at::Tensor& positions, const at::Tensor& omega,
                                const kernels::LearnableSinusoidalParams& params) {
  return dispatch::learnable_sinusoidal(positions, omega, view(kernels::layout_name(params.layout)), params.scale);
}

at::Tensor learned(const at::Tensor& table, const at::Tensor& positions) {
  return dispatch::learned(table, positions);
}

at::Tensor sinusoidal_2d(const kernels::SinusoidalGridParams& params, at::ScalarType dtype) {
  return dispatch::sinusoidal_2d(params.height, params.width, params.dim, params.base, params.scale,
                                 view(kernels::layout_name(params.layout)),
                                 view(kernels::precision_name(params.precision)), params.normalize,
                                 params.normalize_scale, dtype);
}

at::Tensor sinusoidal_3d(const kernels::SinusoidalGridParams& params, at::ScalarType dtype) {
  return dispatch::sinusoidal_3d(params.frames, params.height, params.width, params.dim, params.base, params.scale,
                                 view(kernels::layout_name(params.layout)),
                                 view(kernels::precision_name(params.precision)), params.normalize,
                                 params.normalize_scale, dtype);
}

at::Tensor translation_matrix(double delta, const kernels::SinusoidalParams& params) {
  return dispatch::translation_matrix(delta, params.dim, params.base, view(kernels::layout_name(params.layout)));
}

}  // namespace ops
}  // namespace posenc::nn
