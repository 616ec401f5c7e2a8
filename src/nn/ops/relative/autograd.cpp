// Autograd kernels of the relative-vector ops. The trio is bilinear and
// closed under differentiation (kernels/relative.h), so every backward is a
// call of the others through the dispatcher, and differentiable again:
//   logits(q, T):      dq = values(g, T),               dT = table_grad(g, q)
//   values(p, T):      dp = logits(g, T, k_len = Tk),   dT = table_grad(p, g)
//   table_grad(w, x):  dw = logits(x, G, k_len = Tk),   dx = values(w, G)
// A shared table [2k+1, Dh] is tables = 1 and gets a [2k+1, Dh] gradient;
// [H, 2k+1, Dh] gets [H, 2k+1, Dh]. The 2D pair relative_2d_expand /
// relative_2d_reduce are linear and each other's adjoint.
#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <tuple>
#include <vector>

#include "dispatch.h"

namespace posenc::nn {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Each input's gradient needs only the other input (the ops are bilinear): keep
// a only when b will get a gradient, and b only when a will.
variable_list cross_saved(const at::Tensor& a, const at::Tensor& b) {
  return {b.requires_grad() ? a : at::Tensor(), a.requires_grad() ? b : at::Tensor()};
}

// Everything but the saved tensors: the table's sizes (its gradient's shape, even
// when the table itself is not saved) and Tk (that of a logits gradient).
void save_params(AutogradContext* ctx, int64_t max_distance, int64_t query_offset, at::IntArrayRef table_sizes,
                 int64_t k_len) {
  ctx->saved_data["max_distance"] = max_distance;
  ctx->saved_data["query_offset"] = query_offset;
  ctx->saved_data["table_sizes"] = table_sizes.vec();
  ctx->saved_data["k_len"] = k_len;
}

struct Params {
  int64_t max_distance, query_offset, k_len;
  std::vector<int64_t> table_sizes;
};

Params params_of(AutogradContext* ctx) {
  return {ctx->saved_data["max_distance"].toInt(), ctx->saved_data["query_offset"].toInt(),
          ctx->saved_data["k_len"].toInt(), ctx->saved_data["table_sizes"].toIntVector()};
}

// dL/dtable in the table's own shape: [tables, 2k+1, Dh] from the op, [2k+1, Dh] for a shared 2-D table.
at::Tensor table_grad_like(const at::Tensor& weights, const at::Tensor& x, const Params& p) {
  const int64_t tables = p.table_sizes.size() == 3 ? p.table_sizes[0] : 1;
  return dispatch::relative_table_grad(weights, x, p.max_distance, tables, p.query_offset).reshape(p.table_sizes);
}

class RelativeLogitsFunction : public torch::autograd::Function<RelativeLogitsFunction> {
 public:
  // q: (B, H, Tq, Dh), table: [2k+1, Dh] | [H, 2k+1, Dh] -> (B, H, Tq, Tk)
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& table, int64_t max_distance,
                            c10::optional<int64_t> k_len, int64_t query_offset) {
    at::AutoDispatchBelowADInplaceOrView guard;
    at::Tensor out = dispatch::relative_logits(q, table, max_distance, k_len, query_offset);  // validates
    ctx->save_for_backward(cross_saved(q, table));
    save_params(ctx, max_distance, query_offset, table.sizes(), out.size(3));
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &table = saved[1];
    const Params p = params_of(ctx);
    const at::Tensor& g = grads[0];  // (B, H, Tq, Tk)
    at::Tensor grad_q, grad_table;
    if (ctx->needs_input_grad(0)) grad_q = dispatch::relative_values(g, table, p.max_distance, p.query_offset);
    if (ctx->needs_input_grad(1)) grad_table = table_grad_like(g, q, p);
    return {grad_q, grad_table, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

class RelativeValuesFunction : public torch::autograd::Function<RelativeValuesFunction> {
 public:
  // probs: (B, H, Tq, Tk), table: [2k+1, Dh] | [H, 2k+1, Dh] -> (B, H, Tq, Dh)
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& probs, const at::Tensor& table,
                            int64_t max_distance, int64_t query_offset) {
    at::AutoDispatchBelowADInplaceOrView guard;
    at::Tensor out = dispatch::relative_values(probs, table, max_distance, query_offset);
    ctx->save_for_backward(cross_saved(probs, table));
    save_params(ctx, max_distance, query_offset, table.sizes(), probs.size(3));
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &probs = saved[0], &table = saved[1];
    const Params p = params_of(ctx);
    const at::Tensor& g = grads[0];  // (B, H, Tq, Dh)
    at::Tensor grad_probs, grad_table;
    if (ctx->needs_input_grad(0)) {
      grad_probs = dispatch::relative_logits(g, table, p.max_distance, p.k_len, p.query_offset);
    }
    if (ctx->needs_input_grad(1)) grad_table = table_grad_like(probs, g, p);
    return {grad_probs, grad_table, at::Tensor(), at::Tensor()};
  }
};

class RelativeTableGradFunction : public torch::autograd::Function<RelativeTableGradFunction> {
 public:
  // weights: (B, H, Tq, Tk), x: (B, H, Tq, Dh) -> [tables, 2k+1, Dh]
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& weights, const at::Tensor& x,
                            int64_t max_distance, int64_t tables, int64_t query_offset) {
    at::AutoDispatchBelowADInplaceOrView guard;
    at::Tensor grad = dispatch::relative_table_grad(weights, x, max_distance, tables, query_offset);
    ctx->save_for_backward(cross_saved(weights, x));
    save_params(ctx, max_distance, query_offset, grad.sizes(), weights.size(3));
    return grad;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &weights = saved[0], &x = saved[1];
    const Params p = params_of(ctx);
    const at::Tensor& g = grads[0];  // [tables, 2k+1, Dh], a table in its own right
    at::Tensor grad_weights, grad_x;
    if (ctx->needs_input_grad(0)) {
      grad_weights = dispatch::relative_logits(x, g, p.max_distance, p.k_len, p.query_offset);
    }
    if (ctx->needs_input_grad(1)) grad_x = dispatch::relative_values(weights, g, p.max_distance, p.query_offset);
    return {grad_weights, grad_x, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

class Relative2dExpandFunction : public torch::autograd::Function<Relative2dExpandFunction> {
 public:
  // rel_h: (B, H, HW, 2*height-1), rel_w: (B, H, HW, 2*width-1) -> (B, H, HW, HW)
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& rel_h, const at::Tensor& rel_w, int64_t height,
                            int64_t width) {
    at::AutoDispatchBelowADInplaceOrView guard;
    at::Tensor out = dispatch::relative_2d_expand(rel_h, rel_w, height, width);
    ctx->saved_data["height"] = height;
    ctx->saved_data["width"] = width;
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const int64_t height = ctx->saved_data["height"].toInt();
    const int64_t width = ctx->saved_data["width"].toInt();
    auto [grad_h, grad_w] = dispatch::relative_2d_reduce(grads[0], height, width);
    return {grad_h, grad_w, at::Tensor(), at::Tensor()};
  }
};

class Relative2dReduceFunction : public torch::autograd::Function<Relative2dReduceFunction> {
 public:
  // grad: (B, H, HW, HW) -> (B, H, HW, 2*height-1), (B, H, HW, 2*width-1)
  static variable_list forward(AutogradContext* ctx, const at::Tensor& grad, int64_t height, int64_t width) {
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [rel_h, rel_w] = dispatch::relative_2d_reduce(grad, height, width);
    ctx->saved_data["height"] = height;
    ctx->saved_data["width"] = width;
    return {rel_h, rel_w};
  }

  // An unused output's gradient arrives as zeros (materialized), so expand always has both.
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const int64_t height = ctx->saved_data["height"].toInt();
    const int64_t width = ctx->saved_data["width"].toInt();
    return {dispatch::relative_2d_expand(grads[0], grads[1], height, width), at::Tensor(), at::Tensor()};
  }
};

at::Tensor relative_logits(const at::Tensor& q, const at::Tensor& table, int64_t max_distance,
                           c10::optional<int64_t> k_len, int64_t query_offset) {
  return RelativeLogitsFunction::apply(q, table, max_distance, k_len, query_offset);
}

at::Tensor relative_values(const at::Tensor& probs, const at::Tensor& table, int64_t max_distance,
                           int64_t query_offset) {
  return RelativeValuesFunction::apply(probs, table, max_distance, query_offset);
}

at::Tensor relative_table_grad(const at::Tensor& weights, const at::Tensor& x, int64_t max_distance, int64_t tables,
                               int64_t query_offset) {
  return RelativeTableGradFunction::apply(weights, x, max_distance, tables, query_offset);
}

at::Tensor relative_2d_expand(const at::Tensor& rel_h, const at::Tensor& rel_w, int64_t height, int64_t width) {
  return Relative2dExpandFunction::apply(rel_h, rel_w, height, width);
}

std::tuple<at::Tensor, at::Tensor> relative_2d_reduce(const at::Tensor& grad, int64_t height, int64_t width) {
  const variable_list out = Relative2dReduceFunction::apply(grad, height, width);
  return {out[0], out[1]};
}

}  // namespace

TORCH_LIBRARY_IMPL(posenc, Autograd, m) {
  m.impl("relative_logits", relative_logits);
  m.impl("relative_values", relative_values);
  m.impl("relative_table_grad", relative_table_grad);
  m.impl("relative_2d_expand", relative_2d_expand);
  m.impl("relative_2d_reduce", relative_2d_reduce);
}

}  // namespace posenc::nn
