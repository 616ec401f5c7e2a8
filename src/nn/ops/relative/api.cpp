// The relative-vector dispatcher calls (dispatch.h) and the typed C++ API on
// top (posenc/nn/relative_ops.h): the kernels' parameter structs become the
// schemas' arguments.
#include <ATen/core/dispatch/Dispatcher.h>

#include <optional>
#include <tuple>

#include "dispatch.h"
#include "posenc/nn/relative_ops.h"

namespace posenc::nn {
namespace dispatch {
namespace {

template <class Signature>
c10::TypedOperatorHandle<Signature> find_op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Signature>();
}

}  // namespace

at::Tensor relative_logits(const at::Tensor& q, const at::Tensor& table, int64_t max_distance,
                           c10::optional<int64_t> k_len, int64_t query_offset) {
  static const auto op = find_op<decltype(relative_logits)>("posenc::relative_logits");
  return op.call(q, table, max_distance, k_len, query_offset);
}

at::Tensor relative_values(const at::Tensor& probs, const at::Tensor& table, int64_t max_distance,
                           int64_t query_offset) {
  static const auto op = find_op<decltype(relative_values)>("posenc::relative_values");
  return op.call(probs, table, max_distance, query_offset);
}

at::Tensor relative_table_grad(const at::Tensor& weights, const at::Tensor& x, int64_t max_distance, int64_t tables,
                               int64_t query_offset) {
  static const auto op = find_op<decltype(relative_table_grad)>("posenc::relative_table_grad");
  return op.call(weights, x, max_distance, tables, query_offset);
}

at::Tensor relative_2d_expand(const at::Tensor& rel_h, const at::Tensor& rel_w, int64_t height, int64_t width) {
  static const auto op = find_op<decltype(relative_2d_expand)>("posenc::relative_2d_expand");
  return op.call(rel_h, rel_w, height, width);
}

std::tuple<at::Tensor, at::Tensor> relative_2d_reduce(const at::Tensor& grad, int64_t height, int64_t width) {
  static const auto op = find_op<decltype(relative_2d_reduce)>("posenc::relative_2d_reduce");
  return op.call(grad, height, width);
}

at::Tensor relative_logits_2d(const at::Tensor& q, const at::Tensor& table_h, const at::Tensor& table_w,
                              int64_t height, int64_t width) {
  static const auto op = find_op<decltype(relative_logits_2d)>("posenc::relative_logits_2d");
  return op.call(q, table_h, table_w, height, width);
}

at::Tensor sinusoidal_relative_table(int64_t max_distance, int64_t dim, double base,
                                     const c10::optional<at::Tensor>& omega, c10::string_view layout,
                                     c10::optional<at::ScalarType> dtype) {
  static const auto op = find_op<decltype(sinusoidal_relative_table)>("posenc::sinusoidal_relative_table");
  return op.call(max_distance, dim, base, omega, layout, dtype);
}

}  // namespace dispatch

namespace ops {

at::Tensor relative_logits(const at::Tensor& q, const at::Tensor& table, const kernels::RelativeParams& params,
                           std::optional<int64_t> k_len) {
  return dispatch::relative_logits(q, table, params.max_distance, k_len ? c10::optional<int64_t>(*k_len) : c10::nullopt,
                                   params.query_offset);
}

at::Tensor relative_values(const at::Tensor& probs, const at::Tensor& table, const kernels::RelativeParams& params) {
  return dispatch::relative_values(probs, table, params.max_distance, params.query_offset);
}

at::Tensor relative_logits_2d(const at::Tensor& q, const at::Tensor& table_h, const at::Tensor& table_w,
                              const kernels::Relative2dParams& params) {
  return dispatch::relative_logits_2d(q, table_h, table_w, params.height, params.width);
}

at::Tensor sinusoidal_relative_table(int64_t max_distance, int64_t dim, double base,
                                     const std::optional<at::Tensor>& omega, std::optional<at::ScalarType> dtype) {
  const c10::optional<at::Tensor> w = omega ? c10::optional<at::Tensor>(*omega) : c10::nullopt;
  const c10::optional<at::ScalarType> t = dtype ? c10::optional<at::ScalarType>(*dtype) : c10::nullopt;
  return dispatch::sinusoidal_relative_table(max_distance, dim, base, w, "interleaved", t);
}

}  // namespace ops
}  // namespace posenc::nn
