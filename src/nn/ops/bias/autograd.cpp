// Autograd kernels of the T5 biases (1D and 2D) and of their backwards.
//   t5_bias:           out[h, i, j] = table[bucket(j - i'), h]
//   t5_bias_backward:  grad_table[b, h] = sum over bucket(j - i') = b of grad[h, i, j]
// Both are linear, and each is the other's adjoint, so the backward of one is
// the other (through the dispatcher, so every order of derivative works); the
// backward of t5_bias_backward takes q_len, k_len from the grad it was given.
// Likewise t5_bias_2d and t5_bias_2d_backward. The ALiBi biases have no
// learned parameter and no autograd kernel.
#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <tuple>

#include "dispatch.h"

namespace posenc::nn {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

void save_bucket_params(AutogradContext* ctx, bool bidirectional, int64_t max_distance) {
  ctx->saved_data["bidirectional"] = bidirectional;
  ctx->saved_data["max_distance"] = max_distance;
}

class T5BiasBackwardFunction : public torch::autograd::Function<T5BiasBackwardFunction> {
 public:
  // grad: [H, q_len, k_len] -> [num_buckets, H]
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& grad, int64_t num_buckets, bool bidirectional,
                            int64_t max_distance) {
    at::AutoDispatchBelowADInplaceOrView guard;
    at::Tensor grad_table = dispatch::t5_bias_backward(grad, num_buckets, bidirectional, max_distance);
    save_bucket_params(ctx, bidirectional, max_distance);
    ctx->saved_data["q_len"] = grad.size(1);
    ctx->saved_data["k_len"] = grad.size(2);
    return grad_table;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto& d = ctx->saved_data;
    return {dispatch::t5_bias(grads[0], d.at("q_len").toInt(), d.at("k_len").toInt(), d.at("bidirectional").toBool(),
                              d.at("max_distance").toInt()),
            at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

class T5BiasFunction : public torch::autograd::Function<T5BiasFunction> {
 public:
  // table: [num_buckets, H] -> [H, q_len, k_len]
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& table, int64_t q_len, int64_t k_len,
                            bool bidirectional, int64_t max_distance) {
    at::AutoDispatchBelowADInplaceOrView guard;
    at::Tensor out = dispatch::t5_bias(table, q_len, k_len, bidirectional, max_distance);  // validates
    save_bucket_params(ctx, bidirectional, max_distance);
    ctx->saved_data["num_buckets"] = table.size(0);
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto& d = ctx->saved_data;
    return {dispatch::t5_bias_backward(grads[0], d.at("num_buckets").toInt(), d.at("bidirectional").toBool(),
                                       d.at("max_distance").toInt()),
            at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

void save_grid(AutogradContext* ctx, int64_t height, int64_t width, bool bidirectional, int64_t max_distance) {
  save_bucket_params(ctx, bidirectional, max_distance);
  ctx->saved_data["height"] = height;
  ctx->saved_data["width"] = width;
}

class T5Bias2dBackwardFunction : public torch::autograd::Function<T5Bias2dBackwardFunction> {
 public:
  // grad: [H, HW, HW] -> (grad_table_h, grad_table_w), each [num_buckets, H]
  static variable_list forward(AutogradContext* ctx, const at::Tensor& grad, int64_t num_buckets, int64_t height,
                               int64_t width, bool bidirectional, int64_t max_distance) {
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [grad_h, grad_w] =
        dispatch::t5_bias_2d_backward(grad, num_buckets, height, width, bidirectional, max_distance);
    save_grid(ctx, height, width, bidirectional, max_distance);
    return {grad_h, grad_w};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto& d = ctx->saved_data;
    return {dispatch::t5_bias_2d(grads[0], grads[1], d.at("height").toInt(), d.at("width").toInt(),
                                 d.at("bidirectional").toBool(), d.at("max_distance").toInt()),
            at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

class T5Bias2dFunction : public torch::autograd::Function<T5Bias2dFunction> {
 public:
  // table_h, table_w: [num_buckets, H] -> [H, HW, HW]
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& table_h, const at::Tensor& table_w,
                            int64_t height, int64_t width, bool bidirectional, int64_t max_distance) {
    at::AutoDispatchBelowADInplaceOrView guard;
    at::Tensor out = dispatch::t5_bias_2d(table_h, table_w, height, width, bidirectional, max_distance);
    save_grid(ctx, height, width, bidirectional, max_distance);
    ctx->saved_data["num_buckets"] = table_h.size(0);
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto& d = ctx->saved_data;
    auto [grad_h, grad_w] = dispatch::t5_bias_2d_backward(grads[0], d.at("num_buckets").toInt(),
                                                          d.at("height").toInt(), d.at("width").toInt(),
                                                          d.at("bidirectional").toBool(), d.at("max_distance").toInt());
    return {grad_h, grad_w, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor t5_bias(const at::Tensor& table, int64_t q_len, int64_t k_len, bool bidirectional, int64_t max_distance) {
  return T5BiasFunction::apply(table, q_len, k_len, bidirectional, max_distance);
}

at::Tensor t5_bias_backward(const at::Tensor& grad, int64_t num_buckets, bool bidirectional, int64_t max_distance) {
  return T5BiasBackwardFunction::apply(grad, num_buckets, bidirectional, max_distance);
}

at::Tensor t5_bias_2d(const at::Tensor& table_h, const at::Tensor& table_w, int64_t height, int64_t width,
                      bool bidirectional, int64_t max_distance) {
  return T5Bias2dFunction::apply(table_h, table_w, height, width, bidirectional, max_distance);
}

std::tuple<at::Tensor, at::Tensor> t5_bias_2d_backward(const at::Tensor& grad, int64_t num_buckets, int64_t height,
                                                       int64_t width, bool bidirectional, int64_t max_distance) {
  const variable_list grads =
      T5Bias2dBackwardFunction::apply(grad, num_buckets, height, width, bidirectional, max_distance);
  return {grads[0], grads[1]};
}

}  // namespace

TORCH_LIBRARY_IMPL(posenc, Autograd, m) {
  m.impl("t5_bias", t5_bias);
  m.impl("t5_bias_backward", t5_bias_backward);
  m.impl("t5_bias_2d", t5_bias_2d);
  m.impl("t5_bias_2d_backward", t5_bias_2d_backward);
}

}  // namespace posenc::nn
