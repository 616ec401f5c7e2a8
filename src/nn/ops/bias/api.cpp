// The attention-bias dispatcher calls (dispatch.h) and the typed C++ API on
// top (posenc/nn/bias_ops.h): the kernels' structs become the schemas'
// arguments.
#include <ATen/core/dispatch/Dispatcher.h>

#include "dispatch.h"
#include "posenc/nn/bias_ops.h"

namespace posenc::nn {
namespace dispatch {
namespace {

template <class Signature>
c10::TypedOperatorHandle<Signature> find_op(const char* name, const char* overload = "") {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, overload).typed<Signature>();
}

}  // namespace

at::Tensor alibi_slopes(int64_t num_heads, c10::optional<at::ScalarType> dtype) {
  static const auto op = find_op<decltype(alibi_slopes)>("posenc::alibi_slopes");
  return op.call(num_heads, dtype);
}

at::Tensor alibi_bias(int64_t num_heads, int64_t q_len, int64_t k_len, bool causal,
                      c10::optional<at::ScalarType> dtype) {
  static const auto op = find_op<decltype(alibi_bias)>("posenc::alibi_bias");
  return op.call(num_heads, q_len, k_len, causal, dtype);
}

at::Tensor& alibi_bias_out(int64_t num_heads, int64_t q_len, int64_t k_len, bool causal, at::Tensor& out) {
  static const auto op = find_op<decltype(alibi_bias_out)>("posenc::alibi_bias", "out");
  return op.call(num_heads, q_len, k_len, causal, out);
}

at::Tensor alibi_bias_2d(int64_t num_heads, int64_t height, int64_t width, c10::string_view distance,
                         c10::optional<at::ScalarType> dtype) {
  static const auto op = find_op<decltype(alibi_bias_2d)>("posenc::alibi_bias_2d");
  return op.call(num_heads, height, width, distance, dtype);
}

at::Tensor t5_bucket(const at::Tensor& relative_position, bool bidirectional, int64_t num_buckets,
                     int64_t max_distance) {
  static const auto op = find_op<decltype(t5_bucket)>("posenc::t5_bucket");
  return op.call(relative_position, bidirectional, num_buckets, max_distance);
}

at::Tensor t5_bias(const at::Tensor& table, int64_t q_len, int64_t k_len, bool bidirectional, int64_t max_distance) {
  static const auto op = find_op<decltype(t5_bias)>("posenc::t5_bias");
  return op.call(table, q_len, k_len, bidirectional, max_distance);
}

at::Tensor t5_bias_backward(const at::Tensor& grad, int64_t num_buckets, bool bidirectional, int64_t max_distance) {
  static const auto op = find_op<decltype(t5_bias_backward)>("posenc::t5_bias_backward");
  return op.call(grad, num_buckets, bidirectional, max_distance);
}

at::Tensor t5_bias_2d(const at::Tensor& table_h, const at::Tensor& table_w, int64_t height, int64_t width,
                      bool bidirectional, int64_t max_distance) {
  static const auto op = find_op<decltype(t5_bias_2d)>("posenc::t5_bias_2d");
  return op.call(table_h, table_w, height, width, bidirectional, max_distance);
}

std::tuple<at::Tensor, at::Tensor> t5_bias_2d_backward(const at::Tensor& grad, int64_t num_buckets, int64_t height,
                                                       int64_t width, bool bidirectional, int64_t max_distance) {
  static const auto op = find_op<decltype(t5_bias_2d_backward)>("posenc::t5_bias_2d_backward");
  return op.call(grad, num_buckets, height, width, bidirectional, max_distance);
}

}  // namespace dispatch

namespace ops {

at::Tensor alibi_slopes(int64_t num_heads, at::ScalarType dtype) { return dispatch::alibi_slopes(num_heads, dtype); }

at::Tensor alibi_bias(int64_t num_heads, int64_t q_len, int64_t k_len, bool causal, at::ScalarType dtype) {
  return dispatch::alibi_bias(num_heads, q_len, k_len, causal, dtype);
}

at::Tensor& alibi_bias_out(at::Tensor& out, int64_t num_heads, int64_t q_len, int64_t k_len, bool causal) {
  return dispatch::alibi_bias_out(num_heads, q_len, k_len, causal, out);
}

at::Tensor alibi_bias_2d(const kernels::Alibi2dParams& params, at::ScalarType dtype) {
  const std::string_view distance = kernels::grid_distance_name(params.distance);
  return dispatch::alibi_bias_2d(params.num_heads, params.height, params.width,
                                 c10::string_view(distance.data(), distance.size()), dtype);
}

at::Tensor t5_bucket(const at::Tensor& relative_position, const kernels::T5BucketParams& params) {
  return dispatch::t5_bucket(relative_position, params.bidirectional, params.num_buckets, params.max_distance);
}

at::Tensor t5_bias(const at::Tensor& table, int64_t q_len, int64_t k_len, bool bidirectional, int64_t max_distance) {
  return dispatch::t5_bias(table, q_len, k_len, bidirectional, max_distance);
}

at::Tensor t5_bias_2d(const at::Tensor& table_h, const at::Tensor& table_w, int64_t height, int64_t width,
                      bool bidirectional, int64_t max_distance) {
  return dispatch::t5_bias_2d(table_h, table_w, height, width, bidirectional, max_distance);
}

}  // namespace ops
}  // namespace posenc::nn
