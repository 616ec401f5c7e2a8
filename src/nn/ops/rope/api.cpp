// The RoPE dispatcher calls (dispatch.h) and the typed C++ API on top
// (posenc/nn/rope_ops.h): the kernels' structs become the schemas' arguments, a
// kernels::RopeScaling a torch.classes.posenc.RopeScaling.
#include <ATen/core/class_type.h>
#include <ATen/core/custom_class.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <string_view>

#include "dispatch.h"
#include "posenc/nn/rope_ops.h"
#include "ops/rope/support.h"

namespace posenc::nn {
namespace dispatch {
namespace {

template <class Signature>
c10::TypedOperatorHandle<Signature> find_op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Signature>();
}

// The ops taking a list of scalings are called boxed: libtorch 1.13 cannot
// box a C++ list of custom-class objects (c10::List<intrusive_ptr<T>>).
c10::OperatorHandle find_boxed_op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "");
}

c10::IValue scaling_list_ivalue(const ScalingListArg& scaling) {
  if (!scaling.has_value()) return c10::IValue();
  c10::impl::GenericList list(c10::TypePtr(c10::getCustomClassType<c10::intrusive_ptr<detail::RopeScalingObject>>()));
  for (const auto& s : *scaling) list.push_back(c10::IValue(s));
  return c10::IValue(list);
}

}  // namespace

std::vector<std::string> rope_scaling_keys() {
  static const auto op = find_op<decltype(rope_scaling_keys)>("posenc::rope_scaling_keys");
  return op.call();
}

std::tuple<at::Tensor, double> rope_inv_freq(int64_t dim, double base, const ScalingArg& scaling,
                                             c10::optional<int64_t> seq_len) {
  static const auto op = find_op<decltype(rope_inv_freq)>("posenc::rope_inv_freq");
  return op.call(dim, base, scaling, seq_len);
}

Tables rope_cos_sin(const at::Tensor& positions, int64_t dim, double base, const ScalingArg& scaling,
                    c10::optional<int64_t> seq_len, c10::string_view precision, c10::optional<at::ScalarType> dtype) {
  static const auto op = find_op<decltype(rope_cos_sin)>("posenc::rope_cos_sin");
  return op.call(positions, dim, base, scaling, seq_len, precision, dtype);
}

Tables rope_cos_sin_range(int64_t start, int64_t count, int64_t dim, double base, const ScalingArg& scaling,
                          c10::optional<int64_t> seq_len, c10::string_view precision,
                          c10::optional<at::ScalarType> dtype) {
  static const auto op = find_op<decltype(rope_cos_sin_range)>("posenc::rope_cos_sin_range");
  return op.call(start, count, dim, base, scaling, seq_len, precision, dtype);
}

Tables rope_axial_cos_sin(const at::Tensor& coords, int64_t rotary_dim, at::IntArrayRef dims_per_axis, double base,
                          const ScalingListArg& scaling, at::OptionalIntArrayRef seq_len,
                          c10::string_view precision, c10::optional<at::ScalarType> dtype) {
  static const c10::OperatorHandle op = find_boxed_op("posenc::rope_axial_cos_sin");
  torch::jit::Stack stack{coords,
                          rotary_dim,
                          dims_per_axis,
                          base,
                          scaling_list_ivalue(scaling),
                          seq_len,
                          std::string(precision.data(), precision.size()),
                          dtype};
  op.callBoxed(&stack);
  return {stack.at(0).toTensor(), stack.at(1).toTensor()};
}

Tables mrope_cos_sin(const at::Tensor& positions3, int64_t rotary_dim, at::IntArrayRef mrope_section,
                     bool interleaved, double base, const ScalingArg& scaling, c10::optional<int64_t> seq_len,
                     c10::string_view precision, c10::optional<at::ScalarType> dtype) {
  static const auto op = find_op<decltype(mrope_cos_sin)>("posenc::mrope_cos_sin");
  return op.call(positions3, rotary_dim, mrope_section, interleaved, base, scaling, seq_len, precision, dtype);
}

Tables xpos_cos_sin(const at::Tensor& positions, int64_t rotary_dim, double scale_base, double gamma,
                    double center, bool keys, double base, c10::string_view precision,
                    c10::optional<at::ScalarType> dtype) {
  static const auto op = find_op<decltype(xpos_cos_sin)>("posenc::xpos_cos_sin");
  return op.call(positions, rotary_dim, scale_base, gamma, center, keys, base, precision, dtype);
}

Tables rope_rerotate_cos_sin(const at::Tensor& from_positions, const at::Tensor& to_positions, int64_t dim,
                             double base, const ScalingArg& scaling, c10::optional<int64_t> seq_len,
                             c10::optional<double> to_base, const ScalingArg& to_scaling,
                             c10::optional<int64_t> to_seq_len, c10::string_view precision,
                             c10::optional<at::ScalarType> dtype) {
  static const auto op = find_op<decltype(rope_rerotate_cos_sin)>("posenc::rope_rerotate_cos_sin");
  return op.call(from_positions, to_positions, dim, base, scaling, seq_len, to_base, to_scaling, to_seq_len,
                 precision, dtype);
}

at::Tensor rope_rotate(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, c10::string_view layout,
                       bool inverse) {
  static const auto op = find_op<decltype(rope_rotate)>("posenc::rope_rotate");
  return op.call(x, cos, sin, layout, inverse);
}

at::Tensor& rope_rotate_(at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, c10::string_view layout,
                         bool inverse) {
  static const auto op = find_op<decltype(rope_rotate_)>("posenc::rope_rotate_");
  return op.call(x, cos, sin, layout, inverse);
}

at::Tensor rope_rotate_omega(const at::Tensor& x, const at::Tensor& positions, const at::Tensor& omega,
                             c10::string_view layout, bool inverse, c10::string_view precision) {
  static const auto op = find_op<decltype(rope_rotate_omega)>("posenc::rope_rotate_omega");
  return op.call(x, positions, omega, layout, inverse, precision);
}

at::Tensor& rope_rotate_omega_(at::Tensor& x, const at::Tensor& positions, const at::Tensor& omega,
                               c10::string_view layout, bool inverse, c10::string_view precision) {
  static const auto op = find_op<decltype(rope_rotate_omega_)>("posenc::rope_rotate_omega_");
  return op.call(x, positions, omega, layout, inverse, precision);
}

std::tuple<at::Tensor, at::Tensor> rope_rotate_omega_backward(const at::Tensor& grad, const at::Tensor& x,
                                                              const at::Tensor& positions, const at::Tensor& omega,
                                                              c10::string_view layout, bool inverse,
                                                              c10::string_view precision,
                                                              std::array<bool, 2> output_mask) {
  static const auto op = find_op<decltype(rope_rotate_omega_backward)>("posenc::rope_rotate_omega_backward");
  return op.call(grad, x, positions, omega, layout, inverse, precision, output_mask);
}

at::Tensor rope(const at::Tensor& x, const at::Tensor& positions, double base, c10::string_view layout,
                c10::optional<int64_t> rotary_dim, const ScalingArg& scaling, c10::optional<int64_t> seq_len,
                bool inverse, c10::string_view precision, const c10::optional<at::Tensor>& omega) {
  static const auto op = find_op<decltype(rope)>("posenc::rope");
  return op.call(x, positions, base, layout, rotary_dim, scaling, seq_len, inverse, precision, omega);
}

at::Tensor& rope_(at::Tensor& x, const at::Tensor& positions, double base, c10::string_view layout,
                  c10::optional<int64_t> rotary_dim, const ScalingArg& scaling, c10::optional<int64_t> seq_len,
                  bool inverse, c10::string_view precision, const c10::optional<at::Tensor>& omega) {
  static const auto op = find_op<decltype(rope_)>("posenc::rope_");
  return op.call(x, positions, base, layout, rotary_dim, scaling, seq_len, inverse, precision, omega);
}

at::Tensor rope_axial(const at::Tensor& x, const at::Tensor& coords, at::IntArrayRef dims_per_axis, double base,
                      c10::string_view layout, c10::optional<int64_t> rotary_dim, const ScalingListArg& scaling,
                      at::OptionalIntArrayRef seq_len, bool inverse, c10::string_view precision) {
  static const c10::OperatorHandle op = find_boxed_op("posenc::rope_axial");
  torch::jit::Stack stack{x,
                          coords,
                          dims_per_axis,
                          base,
                          std::string(layout.data(), layout.size()),
                          rotary_dim,
                          scaling_list_ivalue(scaling),
                          seq_len,
                          inverse,
                          std::string(precision.data(), precision.size())};
  op.callBoxed(&stack);
  return stack.at(0).toTensor();
}

at::Tensor mrope(const at::Tensor& x, const at::Tensor& positions3, at::IntArrayRef mrope_section, bool interleaved,
                 double base, c10::string_view layout, c10::optional<int64_t> rotary_dim, const ScalingArg& scaling,
                 c10::optional<int64_t> seq_len, bool inverse, c10::string_view precision) {
  static const auto op = find_op<decltype(mrope)>("posenc::mrope");
  return op.call(x, positions3, mrope_section, interleaved, base, layout, rotary_dim, scaling, seq_len, inverse,
                 precision);
}

std::tuple<at::Tensor, at::Tensor> xpos(const at::Tensor& q, const at::Tensor& k, const at::Tensor& positions,
                                        double scale_base, double gamma, double center, double base,
                                        c10::string_view layout, c10::optional<int64_t> rotary_dim,
                                        c10::string_view precision) {
  static const auto op = find_op<decltype(xpos)>("posenc::xpos");
  return op.call(q, k, positions, scale_base, gamma, center, base, layout, rotary_dim, precision);
}

at::Tensor rerotate(const at::Tensor& k, const at::Tensor& from_positions, const at::Tensor& to_positions,
                    double base, c10::string_view layout, c10::optional<int64_t> rotary_dim,
                    const ScalingArg& scaling, c10::optional<int64_t> seq_len, c10::optional<double> to_base,
                    const ScalingArg& to_scaling, c10::optional<int64_t> to_seq_len, c10::string_view precision) {
  static const auto op = find_op<decltype(rerotate)>("posenc::rerotate");
  return op.call(k, from_positions, to_positions, base, layout, rotary_dim, scaling, seq_len, to_base, to_scaling,
                 to_seq_len, precision);
}

at::Tensor& rerotate_(at::Tensor& k, const at::Tensor& from_positions, const at::Tensor& to_positions, double base,
                      c10::string_view layout, c10::optional<int64_t> rotary_dim, const ScalingArg& scaling,
                      c10::optional<int64_t> seq_len, c10::optional<double> to_base, const ScalingArg& to_scaling,
                      c10::optional<int64_t> to_seq_len, c10::string_view precision) {
  static const auto op = find_op<decltype(rerotate_)>("posenc::rerotate_");
  return op.call(k, from_positions, to_positions, base, layout, rotary_dim, scaling, seq_len, to_base, to_scaling,
                 to_seq_len, precision);
}

}  // namespace dispatch

namespace ops {
namespace {

using detail::scaling_arg;
using detail::view_of;

c10::string_view layout_of(kernels::RopeLayout layout) { return view_of(kernels::rope_layout_name(layout)); }
c10::string_view precision_of(kernels::Precision precision) { return view_of(kernels::precision_name(precision)); }

template <class T>
c10::optional<T> opt(const std::optional<T>& v) {
  return v ? c10::optional<T>(*v) : c10::nullopt;
}

template <class Pair>
std::pair<at::Tensor, at::Tensor> as_pair(Pair&& t) {
  return {std::get<0>(t), std::get<1>(t)};
}

}  // namespace

std::pair<at::Tensor, double> rope_inv_freq(int64_t dim, double base, const kernels::RopeScaling& scaling,
                                            std::optional<int64_t> seq_len) {
  auto [inv_freq, factor] = dispatch::rope_inv_freq(dim, base, scaling_arg(scaling), opt(seq_len));
  return {inv_freq, factor};
}

std::pair<at::Tensor, at::Tensor> rope_cos_sin(const at::Tensor& positions, int64_t dim, const RopeOptions& options,
                                               at::ScalarType dtype) {
  return as_pair(dispatch::rope_cos_sin(positions, dim, options.base, scaling_arg(options.scaling),
                                        opt(options.seq_len), precision_of(options.precision), dtype));
}

std::pair<at::Tensor, at::Tensor> rope_cos_sin_range(int64_t start, int64_t count, int64_t dim,
                                                     const RopeOptions& options, at::ScalarType dtype) {
  return as_pair(dispatch::rope_cos_sin_range(start, count, dim, options.base, scaling_arg(options.scaling),
                                              opt(options.seq_len), precision_of(options.precision), dtype));
}

at::Tensor rope_rotate(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, kernels::RopeLayout layout,
                       bool inverse) {
  return dispatch::rope_rotate(x, cos, sin, layout_of(layout), inverse);
}

at::Tensor& rope_rotate_(at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, kernels::RopeLayout layout,
                         bool inverse) {
  return dispatch::rope_rotate_(x, cos, sin, layout_of(layout), inverse);
}

at::Tensor rope(const at::Tensor& x, const at::Tensor& positions, const RopeOptions& o) {
  return dispatch::rope(x, positions, o.base, layout_of(o.layout), opt(o.rotary_dim), scaling_arg(o.scaling),
                        opt(o.seq_len), o.inverse, precision_of(o.precision), c10::nullopt);
}

at::Tensor& rope_(at::Tensor& x, const at::Tensor& positions, const RopeOptions& o) {
  return dispatch::rope_(x, positions, o.base, layout_of(o.layout), opt(o.rotary_dim), scaling_arg(o.scaling),
                         opt(o.seq_len), o.inverse, precision_of(o.precision), c10::nullopt);
}

at::Tensor rope_learned(const at::Tensor& x, const at::Tensor& positions, const at::Tensor& omega,
                        const RopeOptions& o) {
  return dispatch::rope(x, positions, o.base, layout_of(o.layout), opt(o.rotary_dim), scaling_arg(o.scaling),
                        opt(o.seq_len), o.inverse, precision_of(o.precision), omega);
}

std::pair<at::Tensor, at::Tensor> rope_axial_cos_sin(const at::Tensor& coords, int64_t rotary_dim,
                                                     const RopeAxialOptions& o, at::ScalarType dtype) {
  return as_pair(dispatch::rope_axial_cos_sin(
      coords, rotary_dim, o.dims_per_axis, o.base, detail::scaling_list_arg(o.scaling),
      o.seq_len.empty() ? at::OptionalIntArrayRef() : at::OptionalIntArrayRef(o.seq_len),
      precision_of(o.precision), dtype));
}

at::Tensor rope_axial(const at::Tensor& x, const at::Tensor& coords, const RopeAxialOptions& o) {
  return dispatch::rope_axial(x, coords, o.dims_per_axis, o.base, layout_of(o.layout), opt(o.rotary_dim),
                              detail::scaling_list_arg(o.scaling),
                              o.seq_len.empty() ? at::OptionalIntArrayRef() : at::OptionalIntArrayRef(o.seq_len),
                              o.inverse, precision_of(o.precision));
}

std::pair<at::Tensor, at::Tensor> mrope_cos_sin(const at::Tensor& positions3, int64_t rotary_dim,
                                                const MRopeOptions& o, at::ScalarType dtype) {
  return as_pair(dispatch::mrope_cos_sin(positions3, rotary_dim, o.mrope_section, o.interleaved, o.base,
                                         scaling_arg(o.scaling), opt(o.seq_len), precision_of(o.precision), dtype));
}

at::Tensor mrope(const at::Tensor& x, const at::Tensor& positions3, const MRopeOptions& o) {
  return dispatch::mrope(x, positions3, o.mrope_section, o.interleaved, o.base, layout_of(o.layout),
                         opt(o.rotary_dim), scaling_arg(o.scaling), opt(o.seq_len), o.inverse,
                         precision_of(o.precision));
}

std::pair<at::Tensor, at::Tensor> xpos_cos_sin(const at::Tensor& positions, int64_t rotary_dim, bool keys,
                                               const XposOptions& o, at::ScalarType dtype) {
  return as_pair(dispatch::xpos_cos_sin(positions, rotary_dim, o.scale_base, o.gamma, o.center, keys, o.base,
                                        precision_of(o.precision), dtype));
}

std::pair<at::Tensor, at::Tensor> xpos(const at::Tensor& q, const at::Tensor& k, const at::Tensor& positions,
                                       const XposOptions& o) {
  return as_pair(dispatch::xpos(q, k, positions, o.scale_base, o.gamma, o.center, o.base, layout_of(o.layout),
                                opt(o.rotary_dim), precision_of(o.precision)));
}

namespace {

detail::ScalingArg to_scaling_arg(const RerotateOptions& o) {
  // Unset means the from scaling, which the op reads from None.
  return o.to_scaling ? c10::make_optional(c10::make_intrusive<detail::RopeScalingObject>(*o.to_scaling))
                      : detail::ScalingArg();
}

}  // namespace

std::pair<at::Tensor, at::Tensor> rerotate_cos_sin(const at::Tensor& from_positions, const at::Tensor& to_positions,
                                                   int64_t dim, const RerotateOptions& o, at::ScalarType dtype) {
  return as_pair(dispatch::rope_rerotate_cos_sin(from_positions, to_positions, dim, o.base, scaling_arg(o.scaling),
                                                 opt(o.seq_len), opt(o.to_base), to_scaling_arg(o),
                                                 opt(o.to_seq_len), precision_of(o.precision), dtype));
}

at::Tensor rerotate(const at::Tensor& k, const at::Tensor& from_positions, const at::Tensor& to_positions,
                    const RerotateOptions& o) {
  return dispatch::rerotate(k, from_positions, to_positions, o.base, layout_of(o.layout), opt(o.rotary_dim),
                            scaling_arg(o.scaling), opt(o.seq_len), opt(o.to_base), to_scaling_arg(o),
                            opt(o.to_seq_len), precision_of(o.precision));
}

at::Tensor& rerotate_(at::Tensor& k, const at::Tensor& from_positions, const at::Tensor& to_positions,
                      const RerotateOptions& o) {
  return dispatch::rerotate_(k, from_positions, to_positions, o.base, layout_of(o.layout), opt(o.rotary_dim),
                             scaling_arg(o.scaling), opt(o.seq_len), opt(o.to_base), to_scaling_arg(o),
                             opt(o.to_seq_len), precision_of(o.precision));
}

}  // namespace ops
}  // namespace posenc::nn
