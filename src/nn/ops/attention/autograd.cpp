// Autograd kernel of posenc::attention_streamed: the forward op also returns
// each row's log-sum-exp, and the backward is the op attention_streamed_backward
// (kernels/attention_backward.h): no (Tq, Tk) buffer on either pass, and both
// go through the dispatcher, so torch 2's tracers record the two ops. The term
// tensors come as one list with their spec's text, and their gradients go back
// in that list's order. Without an input that needs a gradient it goes
// straight to the CPU kernel. The weights, when returned, carry no gradient
// (the composed path has one); the backward is not differentiable again, and
// create_graph is refused.
#include <ATen/ATen.h>
#include <ATen/core/List.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "dispatch.h"

namespace posenc::nn {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class StreamedAttentionFunction : public torch::autograd::Function<StreamedAttentionFunction> {
 public:
  // The list's tensors are inputs one by one (autograd expands a TensorList).
  static variable_list forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               at::TensorList term_tensors, const std::string& spec, bool causal,
                               const c10::optional<at::Tensor>& key_padding_mask, double scale,
                               bool return_weights) {
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [out, weights, logsumexp] =
        dispatch::attention_streamed(q, k, v, term_tensors, spec, causal, key_padding_mask, scale, return_weights);
    // q, k, v, the term list, then key_padding_mask (undefined when None), out, logsumexp.
    std::vector<at::Tensor> saved{q, k, v};
    saved.insert(saved.end(), term_tensors.begin(), term_tensors.end());
    saved.insert(saved.end(), {key_padding_mask.value_or(at::Tensor()), out, logsumexp});
    ctx->save_for_backward(saved);
    ctx->saved_data["spec"] = spec;
    ctx->saved_data["causal"] = causal;
    ctx->saved_data["scale"] = scale;
    ctx->mark_non_differentiable({weights, logsumexp});
    return {out, weights, logsumexp};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    TORCH_CHECK_VALUE(!at::GradMode::is_enabled(), "[attention] the fused backward has no backward of its own "
                                                   "(create_graph); use path='composed' for higher derivatives");
    const variable_list s = ctx->get_saved_variables();
    const size_t count = s.size() - 6;  // the term list
    const std::vector<at::Tensor> tensors(s.begin() + 3, s.begin() + 3 + static_cast<std::ptrdiff_t>(count));
    const at::Tensor &mask = s[3 + count], &out = s[4 + count], &logsumexp = s[5 + count];
    c10::List<bool> needs;
    for (size_t i = 0; i < 3 + count; ++i) needs.push_back(ctx->needs_input_grad(i));
    const std::vector<at::Tensor> g = dispatch::attention_streamed_backward(
        grads[0].defined() ? grads[0] : at::zeros_like(out), s[0], s[1], s[2], tensors,
        ctx->saved_data["spec"].toStringRef(), ctx->saved_data["causal"].toBool(),
        mask.defined() ? c10::optional<at::Tensor>(mask) : c10::nullopt, ctx->saved_data["scale"].toDouble(), out,
        logsumexp, needs);
    // One per forward argument: q, k, v, each list tensor, then spec, causal, mask, scale, return_weights.
    variable_list result(3 + count + 5);
    size_t next = 0;
    for (size_t i = 0; i < 3 + count; ++i) {
      if (needs.get(i)) result[i] = g[next++];
    }
    return result;
  }
};

std::tuple<at::Tensor, at::Tensor, at::Tensor> attention_streamed_autograd(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, at::TensorList terms, c10::string_view spec,
    bool causal, const c10::optional<at::Tensor>& key_padding_mask, c10::optional<double> scale,
    bool return_weights) {
  bool grad = q.requires_grad() || k.requires_grad() || v.requires_grad();
  for (const at::Tensor& t : terms) grad = grad || (t.defined() && t.requires_grad());
  if (!grad || !at::GradMode::is_enabled()) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return dispatch::attention_streamed(q, k, v, terms, spec, causal, key_padding_mask, scale, return_weights);
  }
  // The scale is resolved here (it is saved for the backward); the forward checks it.
  const int64_t head_dim = q.dim() == 4 ? q.size(3) : 0;
  const double s = scale.value_or(head_dim > 0 ? 1.0 / std::sqrt(static_cast<double>(head_dim)) : 1.0);
  const variable_list out = StreamedAttentionFunction::apply(q, k, v, terms, std::string(spec.data(), spec.size()),
                                                             causal, key_padding_mask, s, return_weights);
  return {out[0], out[1], out[2]};
}

}  // namespace

TORCH_LIBRARY_IMPL(posenc, Autograd, m) { m.impl("attention_streamed", attention_streamed_autograd); }

}  // namespace posenc::nn
