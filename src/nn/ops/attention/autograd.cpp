// Autograd kernel of posenc::attention_fused: the fused forward saves each
// row's log-sum-exp, and the backward is the fused backward
// (kernels/attention_backward.h): no (Tq, Tk) buffer on either pass. Without
// an input that needs a gradient it goes straight to the CPU kernel. The
// weights, when returned, carry no gradient (the composed path has one); the
// backward is not differentiable again, and create_graph is refused.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <tuple>

#include "ops/attention/cpu_inputs.h"
#include "dispatch.h"
#include "op_support.h"
#include "posenc/nn/attention_ops.h"

namespace posenc::nn {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

using detail::value_of;

// The differentiable inputs, in GradSlot order.
constexpr int kTensorArgs = detail::kSlots;

class FusedAttentionFunction : public torch::autograd::Function<FusedAttentionFunction> {
 public:
  // Optional tensors as c10::optional: autograd counts only the given ones as inputs.
  using Opt = c10::optional<at::Tensor>;
  static variable_list forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const Opt& offset_bias_arg, const Opt& grid_bias_arg, const Opt& bias_arg,
                               const Opt& rel_k_arg, const Opt& rel_v_arg, const Opt& content_shift_arg,
                               const Opt& relative_shift_arg, const Opt& grid_h_arg, const Opt& grid_w_arg,
                               const Opt& fire_w1, const Opt& fire_b1, const Opt& fire_w2, const Opt& fire_b2,
                               const Opt& fire_c, const Opt& fire_threshold, const Opt& cope_e,
                               const Opt& rel_q_arg, int64_t max_distance,
                               int64_t grid_height, int64_t grid_width, bool causal,
                               const Opt& key_padding_mask_arg, const Opt& rel_index_arg, double scale,
                               bool return_weights) {
    const at::Tensor offset_bias = value_of(offset_bias_arg), grid_bias = value_of(grid_bias_arg);
    const at::Tensor bias = value_of(bias_arg), rel_k = value_of(rel_k_arg), rel_v = value_of(rel_v_arg);
    const at::Tensor content_shift = value_of(content_shift_arg), relative_shift = value_of(relative_shift_arg);
    const at::Tensor grid_h = value_of(grid_h_arg), grid_w = value_of(grid_w_arg);
    const at::Tensor key_padding_mask = value_of(key_padding_mask_arg);
    const FireTerm fire{value_of(fire_w1), value_of(fire_b1), value_of(fire_w2),
                        value_of(fire_b2), value_of(fire_c),  value_of(fire_threshold)};
    const AttentionTerms terms = detail::fused_terms(offset_bias, grid_bias, bias, rel_k, rel_v, max_distance,
                                                     content_shift, relative_shift, grid_h, grid_w, grid_height,
                                                     grid_width, fire, CopeTerm{value_of(cope_e)},
                                                     value_of(rel_q_arg), value_of(rel_index_arg));
    const AttentionCall call = detail::fused_call(causal, key_padding_mask, scale, return_weights);
    detail::check_attention(q, k, v, terms, call);
    const detail::FusedForward f =
        detail::fused_forward(detail::fused_inputs(q, k, v, terms, call), return_weights, /*logsumexp=*/true);
    ctx->save_for_backward({q, k, v, offset_bias, grid_bias, bias, rel_k, rel_v, content_shift, relative_shift,
                            grid_h, grid_w, fire.w1, fire.b1, fire.w2, fire.b2, fire.c, fire.threshold,
                            value_of(cope_e), value_of(rel_q_arg), key_padding_mask, f.out, f.logsumexp,
                            value_of(rel_index_arg)});
    ctx->saved_data["max_distance"] = max_distance;
    ctx->saved_data["grid_height"] = grid_height;
    ctx->saved_data["grid_width"] = grid_width;
    ctx->saved_data["causal"] = causal;
    ctx->saved_data["scale"] = scale;
    at::Tensor weights = return_weights ? f.weights.to(q.scalar_type()) : at::empty({0}, q.options());
    ctx->mark_non_differentiable({weights});
    return {f.out.to(q.scalar_type()), weights};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    TORCH_CHECK_VALUE(!at::GradMode::is_enabled(), "[attention] the fused backward has no backward of its own "
                                                   "(create_graph); use path='composed' for higher derivatives");
    const variable_list s = ctx->get_saved_variables();
    const AttentionTerms terms = detail::fused_terms(
        s[3], s[4], s[5], s[6], s[7], ctx->saved_data["max_distance"].toInt(), s[8], s[9], s[10], s[11],
        ctx->saved_data["grid_height"].toInt(), ctx->saved_data["grid_width"].toInt(),
        FireTerm{s[12], s[13], s[14], s[15], s[16], s[17]}, CopeTerm{s[detail::kCopeE]}, s[detail::kRelQ],
        s[kTensorArgs + 3]);
    // After the kSlots term tensors: key_padding_mask, out, logsumexp, rel_index.
    const AttentionCall call = detail::fused_call(ctx->saved_data["causal"].toBool(), s[kTensorArgs],
                                                  ctx->saved_data["scale"].toDouble(), /*return_weights=*/false);
    // needs_input_grad counts the given tensors only.
    std::array<bool, detail::kSlots> needs{};
    for (int i = 0, edge = 0; i < kTensorArgs; ++i) {
      if (s[i].defined()) needs[i] = ctx->needs_input_grad(edge++);
    }
    const detail::FusedGradients g =
        detail::fused_backward(detail::fused_inputs(s[0], s[1], s[2], terms, call), s[kTensorArgs + 1],
                               s[kTensorArgs + 2], grads[0], needs);
    variable_list result(kTensorArgs + 8);  // one per forward argument; the trailing ones have none
    for (int i = 0; i < kTensorArgs; ++i) {
      if (g[i].defined()) result[i] = g[i].to(s[i].scalar_type());
    }
    return result;
  }

};

std::tuple<at::Tensor, at::Tensor> attention_fused_autograd(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const c10::optional<at::Tensor>& offset_bias,
    const c10::optional<at::Tensor>& grid_bias, const c10::optional<at::Tensor>& bias,
    const c10::optional<at::Tensor>& rel_k, const c10::optional<at::Tensor>& rel_v, int64_t max_distance,
    const c10::optional<at::Tensor>& content_shift, const c10::optional<at::Tensor>& relative_shift,
    const c10::optional<at::Tensor>& grid_h, const c10::optional<at::Tensor>& grid_w, int64_t grid_height,
    int64_t grid_width, bool causal, const c10::optional<at::Tensor>& key_padding_mask, c10::optional<double> scale,
    bool return_weights, const c10::optional<at::Tensor>& fire_w1, const c10::optional<at::Tensor>& fire_b1,
    const c10::optional<at::Tensor>& fire_w2, const c10::optional<at::Tensor>& fire_b2,
    const c10::optional<at::Tensor>& fire_c, const c10::optional<at::Tensor>& fire_threshold,
    const c10::optional<at::Tensor>& cope_e, const c10::optional<at::Tensor>& rel_q,
    const c10::optional<at::Tensor>& rel_index) {
  bool grad = q.requires_grad() || k.requires_grad() || v.requires_grad();
  for (const auto* t : {&offset_bias, &grid_bias, &bias, &rel_k, &rel_v, &content_shift, &relative_shift, &grid_h,
                        &grid_w, &fire_w1, &fire_b1, &fire_w2, &fire_b2, &fire_c, &fire_threshold, &cope_e, &rel_q}) {
    grad = grad || (detail::given(*t) && (*t)->requires_grad());
  }
  if (!grad || !at::GradMode::is_enabled()) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return dispatch::attention_fused(q, k, v, offset_bias, grid_bias, bias, rel_k, rel_v, max_distance,
                                     content_shift, relative_shift, grid_h, grid_w, grid_height, grid_width, causal,
                                     key_padding_mask, scale, return_weights, fire_w1, fire_b1, fire_w2, fire_b2,
                                     fire_c, fire_threshold, cope_e, rel_q, rel_index);
  }
  // The scale is resolved here (it is saved for the backward); the forward checks it.
  const int64_t head_dim = q.dim() == 4 ? q.size(3) : 0;
  const double s = scale.value_or(head_dim > 0 ? 1.0 / std::sqrt(static_cast<double>(head_dim)) : 1.0);
  const variable_list out =
      FusedAttentionFunction::apply(q, k, v, offset_bias, grid_bias, bias, rel_k, rel_v, content_shift, relative_shift,
                                    grid_h, grid_w, fire_w1, fire_b1, fire_w2, fire_b2, fire_c, fire_threshold,
                                    cope_e, rel_q, max_distance, grid_height, grid_width, causal,
                                    key_padding_mask, rel_index, s, return_weights);
  return {out[0], out[1]};
}

}  // namespace

TORCH_LIBRARY_IMPL(posenc, Autograd, m) { m.impl("attention_fused", attention_fused_autograd); }

}  // namespace posenc::nn
