// Autograd kernels of learned and learned_backward.
//   forward:  out[k, :] = table[positions[k], :]
//   backward: grad_table[positions[k], :] += grad_out[k, :]   (learned_backward)
// learned_backward is linear in grad_out and its adjoint is the gather again,
// so the double backward is learned(grad_grad_table, positions).
#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include "dispatch.h"

namespace posenc::nn {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class LearnedBackwardFunction : public torch::autograd::Function<LearnedBackwardFunction> {
 public:
  // grad_out: S + [dim], positions: S -> [rows, dim]
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& grad_out, const at::Tensor& positions,
                            int64_t rows) {
    at::AutoDispatchBelowADInplaceOrView guard;
    at::Tensor grad_table = dispatch::learned_backward(grad_out, positions, rows);
    ctx->save_for_backward({positions});
    return grad_table;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor positions = ctx->get_saved_variables()[0];
    return {dispatch::learned(grads[0], positions), at::Tensor(), at::Tensor()};
  }
};

class LearnedFunction : public torch::autograd::Function<LearnedFunction> {
 public:
  // table: [rows, dim], positions: S -> S + [dim]
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& table, const at::Tensor& positions) {
    at::AutoDispatchBelowADInplaceOrView guard;
    at::Tensor out = dispatch::learned(table, positions);  // validates table and positions
    ctx->save_for_backward({positions});
    ctx->saved_data["rows"] = table.size(0);
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor positions = ctx->get_saved_variables()[0];
    const int64_t rows = ctx->saved_data["rows"].toInt();
    return {LearnedBackwardFunction::apply(grads[0], positions, rows), at::Tensor()};
  }
};

at::Tensor learned(const at::Tensor& table, const at::Tensor& positions) {
  return LearnedFunction::apply(table, positions);
}

at::Tensor learned_backward(const at::Tensor& grad_out, const at::Tensor& positions, int64_t rows) {
  return LearnedBackwardFunction::apply(grad_out, positions, rows);
}

}  // namespace

TORCH_LIBRARY_IMPL(posenc, Autograd, m) {
  m.impl("learned", learned);
  m.impl("learned_backward", learned_backward);
}

}  // namespace posenc::nn
