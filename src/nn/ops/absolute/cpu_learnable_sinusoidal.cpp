// CPU kernels of learnable_sinusoidal and its backward
// (kernels/learnable_sinusoidal.h). bfloat16 / float16 omega is computed in
// float32 and the result rounded once to omega's dtype.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "op_support.h"
#include "posenc/kernels/learnable_sinusoidal.h"

namespace posenc::nn {
namespace {

constexpr const char* kOp = "learnable-sinusoidal";

kernels::LearnableSinusoidalParams learnable_params(c10::string_view layout, double scale) {
  return detail::translate_errors([&] {
    return kernels::LearnableSinusoidalParams{kernels::parse_layout(detail::to_std(layout), kOp), scale};
  });
}

void check_omega(const at::Tensor& omega) {
  detail::check_float_tensor(kOp, "omega", omega);
  TORCH_CHECK_VALUE(omega.dim() == 1, "[", kOp, "] omega must be 1-D [dim/2], got shape ", omega.sizes());
}

// positions: S (integers), omega: [D/2] -> S + [D], omega's dtype
at::Tensor learnable_sinusoidal(const at::Tensor& positions, const at::Tensor& omega, c10::string_view layout,
                                double scale) {
  const at::Tensor p = detail::int64_positions(kOp, positions);
  check_omega(omega);
  const kernels::LearnableSinusoidalParams params = learnable_params(layout, scale);
  const at::ScalarType compute = detail::compute_dtype(omega.scalar_type());
  const at::Tensor w = omega.to(compute).contiguous();
  return detail::make_table(detail::table_sizes(p.sizes(), 2 * w.numel()), compute,
                            [&](auto out) {
                              using T = typename decltype(out)::element_type;
                              kernels::learnable_sinusoidal_forward(params, detail::as_positions(p),
                                                                    detail::const_span_of<T>(w), out);
                            })
      .to(omega.scalar_type());
}

// grad_out: S + [D], positions: S, omega: [D/2] -> grad_omega [D/2], omega's dtype
at::Tensor learnable_sinusoidal_backward(const at::Tensor& grad_out, const at::Tensor& positions,
                                         const at::Tensor& omega, c10::string_view layout, double scale) {
  const at::Tensor p = detail::int64_positions(kOp, positions);
  check_omega(omega);
  detail::check_float_tensor(kOp, "grad_out", grad_out);
  const std::vector<int64_t> expected = detail::table_sizes(p.sizes(), 2 * omega.numel());
  TORCH_CHECK_VALUE(grad_out.sizes() == at::IntArrayRef(expected), "[", kOp, "] grad_out must have shape ",
                    at::IntArrayRef(expected), ", got ", grad_out.sizes());
  const kernels::LearnableSinusoidalParams params = learnable_params(layout, scale);
  const at::ScalarType compute = detail::compute_dtype(omega.scalar_type());
  const at::Tensor w = omega.to(compute).contiguous();
  const at::Tensor g = grad_out.to(compute).contiguous();
  return detail::make_table({w.numel()}, compute,
                            [&](auto grad_omega) {
                              using T = typename decltype(grad_omega)::element_type;
                              kernels::learnable_sinusoidal_backward(params, detail::as_positions(p),
                                                                     detail::const_span_of<T>(w),
                                                                     detail::const_span_of<T>(g), grad_omega);
                            })
      .to(omega.scalar_type());
}

}  // namespace

TORCH_LIBRARY_IMPL(posenc, CPU, m) {
  m.impl("learnable_sinusoidal", learnable_sinusoidal);
  m.impl("learnable_sinusoidal_backward", learnable_sinusoidal_backward);
}

}  // namespace posenc::nn
