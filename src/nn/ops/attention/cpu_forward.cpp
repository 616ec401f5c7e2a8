// CPU kernel of posenc::attention_streamed without a gradient (kernels/attention.h):
// the term list unpacked by its spec's text; the Autograd kernel
// (ops/attention/autograd.cpp) comes here when no input needs one.
// Everything is checked first (detail::check_attention, shared with the
// composed path); outputs are rounded once to q's dtype, the log-sum-exp kept
// in the compute dtype. attention_fused, the same op with the spec as an
// object, is its CompositeImplicitAutograd front.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <cstdint>
#include <string>
#include <tuple>

#include "ops/attention/cpu_inputs.h"
#include "ops/attention/term_spec_object.h"
#include "dispatch.h"
#include "op_support.h"
#include "posenc/nn/attention_ops.h"

namespace posenc::nn {
namespace {

std::tuple<at::Tensor, at::Tensor, at::Tensor> attention_streamed(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, at::TensorList term_tensors, c10::string_view spec,
    bool causal, const c10::optional<at::Tensor>& key_padding_mask, c10::optional<double> scale,
    bool return_weights) {
  using detail::value_of;
  const AttentionTerms terms = unpack_terms(term_tensors.vec(), TermSpec::parse({spec.data(), spec.size()}));
  const AttentionCall call = detail::fused_call(causal, value_of(key_padding_mask), scale, return_weights);
  detail::check_attention(q, k, v, terms, call);

  const detail::FusedForward f =
      detail::fused_forward(detail::fused_inputs(q, k, v, terms, call), return_weights, /*logsumexp=*/true);
  return {f.out.to(q.scalar_type()), return_weights ? f.weights.to(q.scalar_type()) : at::empty({0}, q.options()),
          f.logsumexp};
}

std::tuple<at::Tensor, at::Tensor> attention_fused(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                   at::TensorList terms, const detail::TermSpecArg& spec,
                                                   bool causal, const c10::optional<at::Tensor>& key_padding_mask,
                                                   c10::optional<double> scale, bool return_weights) {
  const std::string text = spec->spec.describe();
  auto [out, weights, logsumexp] =
      dispatch::attention_streamed(q, k, v, terms, text, causal, key_padding_mask, scale, return_weights);
  return {out, weights};
}

}  // namespace

TORCH_LIBRARY_IMPL(posenc, CPU, m) { m.impl("attention_streamed", attention_streamed); }
TORCH_LIBRARY_IMPL(posenc, CompositeImplicitAutograd, m) { m.impl("attention_fused", attention_fused); }

}  // namespace posenc::nn
