// Autograd kernel of posenc::attention_fused: the fused forward saves each
// row's log-sum-exp, and the backward is the fused backward
// (kernels/attention_backward.h): no (Tq, Tk) buffer on either pass. The term
// tensors come as one list with their spec, and their gradients go back in
// that list's order. Without an input that needs a gradient it goes straight
// to the CPU kernel. The weights, when returned, carry no gradient (the
// composed path has one); the backward is not differentiable again, and
// create_graph is refused.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <cmath>
#include <cstdint>
#include <tuple>
#include <vector>

#include "dispatch.h"
#include "op_support.h"
#include "ops/attention/cpu_inputs.h"
#include "ops/attention/term_spec_object.h"
#include "posenc/nn/attention_ops.h"

namespace posenc::nn {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

using detail::value_of;

class FusedAttentionFunction : public torch::autograd::Function<FusedAttentionFunction> {
 public:
  // The list's tensors are inputs one by one (autograd expands a TensorList).
  static variable_list forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               at::TensorList term_tensors, const detail::TermSpecArg& spec, bool causal,
                               const c10::optional<at::Tensor>& key_padding_mask_arg, double scale,
                               bool return_weights) {
    const std::vector<at::Tensor> tensors = term_tensors.vec();
    const AttentionTerms terms = unpack_terms(tensors, spec->spec);
    const at::Tensor key_padding_mask = value_of(key_padding_mask_arg);
    const AttentionCall call = detail::fused_call(causal, key_padding_mask, scale, return_weights);
    detail::check_attention(q, k, v, terms, call);
    const detail::FusedForward f =
        detail::fused_forward(detail::fused_inputs(q, k, v, terms, call), return_weights, /*logsumexp=*/true);
    // q, k, v, the term list, then key_padding_mask, out, logsumexp.
    std::vector<at::Tensor> saved{q, k, v};
    saved.insert(saved.end(), tensors.begin(), tensors.end());
    saved.insert(saved.end(), {key_padding_mask, f.out, f.logsumexp});
    ctx->save_for_backward(saved);
    ctx->saved_data["spec"] = spec;
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
    const auto spec = ctx->saved_data["spec"].toCustomClass<detail::TermSpecObject>();
    const size_t count = s.size() - 6;  // the term list
    const std::vector<at::Tensor> tensors(s.begin() + 3, s.begin() + 3 + static_cast<std::ptrdiff_t>(count));
    const at::Tensor &key_padding_mask = s[3 + count], &out = s[4 + count], &logsumexp = s[5 + count];
    const AttentionTerms terms = unpack_terms(tensors, spec->spec);
    const AttentionCall call = detail::fused_call(ctx->saved_data["causal"].toBool(), key_padding_mask,
                                                  ctx->saved_data["scale"].toDouble(), /*return_weights=*/false);
    // The terms whose gradient is asked for; edges count the list's tensors after q, k, v.
    std::vector<at::Tensor> asked(count);
    for (size_t i = 0; i < count; ++i) {
      if (ctx->needs_input_grad(3 + i)) asked[i] = tensors[i];
    }
    const AttentionTerms wanted = unpack_terms(asked, spec->spec);
    detail::FusedGradients g =
        detail::fused_backward(detail::fused_inputs(s[0], s[1], s[2], terms, call), out, logsumexp, grads[0],
                               ctx->needs_input_grad(0), ctx->needs_input_grad(1), ctx->needs_input_grad(2), wanted);
    // One per forward argument: q, k, v, each list tensor, then spec, causal, mask, scale, return_weights.
    variable_list result(3 + count + 5);
    const auto back = [](const at::Tensor& grad, const at::Tensor& input) {
      return grad.defined() ? grad.to(input.scalar_type()) : at::Tensor();
    };
    result[0] = back(g.q, s[0]), result[1] = back(g.k, s[1]), result[2] = back(g.v, s[2]);
    const std::vector<at::Tensor*> slots = term_slots(g.terms, spec->spec);
    for (size_t i = 0; i < count; ++i) result[3 + i] = back(*slots[i], tensors[i]);
    return result;
  }
};

std::tuple<at::Tensor, at::Tensor> attention_fused_autograd(const at::Tensor& q, const at::Tensor& k,
                                                            const at::Tensor& v, at::TensorList terms,
                                                            const detail::TermSpecArg& spec, bool causal,
                                                            const c10::optional<at::Tensor>& key_padding_mask,
                                                            c10::optional<double> scale, bool return_weights) {
  bool grad = q.requires_grad() || k.requires_grad() || v.requires_grad();
  for (const at::Tensor& t : terms) grad = grad || (t.defined() && t.requires_grad());
  if (!grad || !at::GradMode::is_enabled()) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return dispatch::attention_fused(q, k, v, terms, spec, causal, key_padding_mask, scale, return_weights);
  }
  // The scale is resolved here (it is saved for the backward); the forward checks it.
  const int64_t head_dim = q.dim() == 4 ? q.size(3) : 0;
  const double s = scale.value_or(head_dim > 0 ? 1.0 / std::sqrt(static_cast<double>(head_dim)) : 1.0);
  const variable_list out =
      FusedAttentionFunction::apply(q, k, v, terms, spec, causal, key_padding_mask, s, return_weights);
  return {out[0], out[1]};
}

}  // namespace

TORCH_LIBRARY_IMPL(posenc, Autograd, m) { m.impl("attention_fused", attention_fused_autograd); }

}  // namespace posenc::nn
