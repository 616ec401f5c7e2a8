// Autograd kernel of learnable_sinusoidal: the gradient with respect to omega
// is learnable_sinusoidal_backward,
//   dL/domega_i = sum_p p * s * (g[p, sin_col] cos(p omega_i) - g[p, cos_col] sin(p omega_i)).
// The backward itself is not differentiable: a double backward is refused
// rather than silently returning zero.
#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <string>

#include "dispatch.h"

namespace posenc::nn {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class LearnableSinusoidalFunction : public torch::autograd::Function<LearnableSinusoidalFunction> {
 public:
  // positions: S, omega: [D/2] -> S + [D]
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& positions, const at::Tensor& omega,
                            c10::string_view layout, double scale) {
    at::AutoDispatchBelowADInplaceOrView guard;
    at::Tensor out = dispatch::learnable_sinusoidal(positions, omega, layout, scale);
    ctx->save_for_backward({positions, omega});
    ctx->saved_data["layout"] = std::string(layout.data(), layout.size());
    ctx->saved_data["scale"] = scale;
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    TORCH_CHECK(!at::GradMode::is_enabled(),
                "[learnable-sinusoidal] the gradient is not differentiable: double backward is not supported");
    const variable_list saved = ctx->get_saved_variables();
    const std::string layout = ctx->saved_data["layout"].toStringRef();
    const at::Tensor grad_omega = dispatch::learnable_sinusoidal_backward(
        grads[0], saved[0], saved[1], c10::string_view(layout.data(), layout.size()),
        ctx->saved_data["scale"].toDouble());
    return {at::Tensor(), grad_omega, at::Tensor(), at::Tensor()};
  }
};

at::Tensor learnable_sinusoidal(const at::Tensor& positions, const at::Tensor& omega, c10::string_view layout,
                                double scale) {
  return LearnableSinusoidalFunction::apply(positions, omega, layout, scale);
}

}  // namespace

TORCH_LIBRARY_IMPL(posenc, Autograd, m) { m.impl("learnable_sinusoidal", learnable_sinusoidal); }

}  // namespace posenc::nn
