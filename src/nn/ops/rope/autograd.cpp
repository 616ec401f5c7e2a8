// Autograd kernels of the RoPE rotations.
//   rope_rotate:  y = rotate(x; cos, sin). The gradient wrt x is the transpose,
//                 the inverse rotation by the same tables (linear in the
//                 incoming gradient, so it is differentiable again); wrt the
//                 tables, per pair (a, b) summed over the heads,
//                   dL/dcos = g_a x_a + g_b x_b,  dL/dsin = +-(g_b x_a - g_a x_b)
//                 (minus for the inverse rotation).
//   rope_rotate_: in place, so not differentiable: refused while anything requires grad.
//   rope_rotate_omega: angle p * omega; the gradient wrt omega comes from
//                 kernels::rope_angle_grad (rope_rotate_omega_backward). Its
//                 double backward is refused rather than silently zero.
#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/library.h>

#include <initializer_list>
#include <string>
#include <utility>

#include "dispatch.h"

namespace posenc::nn {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

c10::string_view view_of(const std::string& s) { return c10::string_view(s.data(), s.size()); }

// The pairs (a, b) of the first R channels of t (..., T, D).
std::pair<at::Tensor, at::Tensor> pairs_of(const at::Tensor& t, int64_t half, bool interleaved) {
  const at::Tensor r = t.narrow(-1, 0, 2 * half);
  if (interleaved) return {r.slice(-1, 0, 2 * half, 2), r.slice(-1, 1, 2 * half, 2)};
  return {r.narrow(-1, 0, half), r.narrow(-1, half, half)};
}

// Sums a per-head term (..., T, R/2) down to the tables' shape (T, R/2) | (B, T, R/2).
at::Tensor sum_to_table(const at::Tensor& term, const at::Tensor& table) {
  const int64_t tokens = term.size(-2);
  const int64_t half = term.size(-1);
  int64_t lead = 1;
  for (int64_t d = 0; d < term.dim() - 2; ++d) lead *= term.size(d);
  if (table.dim() == 3 && table.size(0) > 1) {
    const int64_t batch = table.size(0);
    return term.reshape({batch, lead / batch, tokens, half}).sum(1);
  }
  return term.reshape({lead, tokens, half}).sum(0).reshape(table.sizes());
}

// dL/dcos, dL/dsin for y = rotate(x), incoming gradient g.
std::pair<at::Tensor, at::Tensor> table_grads(const at::Tensor& x, const at::Tensor& g, const at::Tensor& cos,
                                              const std::string& layout, bool inverse) {
  const at::ScalarType compute = at::promote_types(x.scalar_type(), cos.scalar_type());
  const int64_t half = cos.size(-1);
  const bool interleaved = layout == "interleaved";
  const auto [xa, xb] = pairs_of(x.to(compute), half, interleaved);
  const auto [ga, gb] = pairs_of(g.to(compute), half, interleaved);
  const at::Tensor d_cos = ga * xa + gb * xb;
  const at::Tensor d_sin = inverse ? ga * xb - gb * xa : gb * xa - ga * xb;
  return {sum_to_table(d_cos, cos).to(cos.scalar_type()), sum_to_table(d_sin, cos).to(cos.scalar_type())};
}

class RopeRotateFunction : public torch::autograd::Function<RopeRotateFunction> {
 public:
  // x (..., T, D), cos/sin (T, R/2) | (B, T, R/2) -> (..., T, D)
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin,
                            c10::string_view layout, bool inverse) {
    at::AutoDispatchBelowADInplaceOrView guard;
    at::Tensor out = dispatch::rope_rotate(x, cos, sin, layout, inverse);
    const bool table_grad = cos.requires_grad() || sin.requires_grad();
    ctx->save_for_backward({cos, sin, table_grad ? x : at::Tensor()});
    ctx->saved_data["layout"] = std::string(layout.data(), layout.size());
    ctx->saved_data["inverse"] = inverse;
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const std::string layout = ctx->saved_data["layout"].toStringRef();
    const bool inverse = ctx->saved_data["inverse"].toBool();
    const at::Tensor& g = grads[0];
    at::Tensor grad_x, grad_cos, grad_sin;
    if (ctx->needs_input_grad(0)) grad_x = dispatch::rope_rotate(g, saved[0], saved[1], view_of(layout), !inverse);
    if (ctx->needs_input_grad(1) || ctx->needs_input_grad(2)) {
      std::tie(grad_cos, grad_sin) = table_grads(saved[2], g, saved[0], layout, inverse);
    }
    return {grad_x, grad_cos, grad_sin, at::Tensor(), at::Tensor()};
  }
};

at::Tensor rope_rotate(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, c10::string_view layout,
                       bool inverse) {
  return RopeRotateFunction::apply(x, cos, sin, layout, inverse);
}

// The in-place forms: refused while a gradient would be needed.
void refuse_grad(std::initializer_list<std::pair<const char*, const at::Tensor*>> inputs) {
  if (!at::GradMode::is_enabled()) return;
  for (const auto& [name, t] : inputs) {
    TORCH_CHECK(!t->requires_grad(), "[rope] inplace=True is not differentiable, but ", name,
                " requires grad: use inplace=False, or run under torch.no_grad()");
  }
}

at::Tensor& rope_rotate_(at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, c10::string_view layout,
                         bool inverse) {
  refuse_grad({{"x", &x}, {"cos", &cos}, {"sin", &sin}});
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    dispatch::rope_rotate_(x, cos, sin, layout, inverse);
  }
  torch::autograd::impl::bump_version(x);
  return x;
}

class RopeRotateOmegaFunction : public torch::autograd::Function<RopeRotateOmegaFunction> {
 public:
  // x (..., T, D), positions (T) | (B, T), omega [R/2] -> (..., T, D)
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& positions,
                            const at::Tensor& omega, c10::string_view layout, bool inverse,
                            c10::string_view precision) {
    at::AutoDispatchBelowADInplaceOrView guard;
    at::Tensor out = dispatch::rope_rotate_omega(x, positions, omega, layout, inverse, precision);
    ctx->save_for_backward({x, positions, omega});
    ctx->saved_data["layout"] = std::string(layout.data(), layout.size());
    ctx->saved_data["inverse"] = inverse;
    ctx->saved_data["precision"] = std::string(precision.data(), precision.size());
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    TORCH_CHECK(!at::GradMode::is_enabled(),
                "[rope] the gradient of the learned-frequency rotation is not differentiable: double backward is "
                "not supported");
    const variable_list saved = ctx->get_saved_variables();
    const std::string layout = ctx->saved_data["layout"].toStringRef();
    const std::string precision = ctx->saved_data["precision"].toStringRef();
    auto [grad_x, grad_omega] = dispatch::rope_rotate_omega_backward(
        grads[0], saved[0], saved[1], saved[2], view_of(layout), ctx->saved_data["inverse"].toBool(),
        view_of(precision), {ctx->needs_input_grad(0), ctx->needs_input_grad(2)});
    return {grad_x, at::Tensor(), grad_omega, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor rope_rotate_omega(const at::Tensor& x, const at::Tensor& positions, const at::Tensor& omega,
                             c10::string_view layout, bool inverse, c10::string_view precision) {
  return RopeRotateOmegaFunction::apply(x, positions, omega, layout, inverse, precision);
}

at::Tensor& rope_rotate_omega_(at::Tensor& x, const at::Tensor& positions, const at::Tensor& omega,
                               c10::string_view layout, bool inverse, c10::string_view precision) {
  refuse_grad({{"x", &x}, {"omega", &omega}});
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    dispatch::rope_rotate_omega_(x, positions, omega, layout, inverse, precision);
  }
  torch::autograd::impl::bump_version(x);
  return x;
}

}  // namespace

TORCH_LIBRARY_IMPL(posenc, Autograd, m) {
  m.impl("rope_rotate", rope_rotate);
  m.impl("rope_rotate_", rope_rotate_);
  m.impl("rope_rotate_omega", rope_rotate_omega);
  m.impl("rope_rotate_omega_", rope_rotate_omega_);
}

}  // namespace posenc::nn
