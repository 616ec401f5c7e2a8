// CPU kernel of posenc::attention_fused without a gradient (kernels/attention.h):
// the term list unpacked by its spec;
// the Autograd kernel (ops/attention/autograd.cpp) comes here when no input
// needs one. Everything is checked first (detail::check_attention, shared
// with the composed path); outputs are rounded once to q's dtype.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <cstdint>
#include <tuple>

#include "ops/attention/cpu_inputs.h"
#include "ops/attention/term_spec_object.h"
#include "dispatch.h"
#include "op_support.h"
#include "posenc/nn/attention_ops.h"

namespace posenc::nn {
namespace {

std::tuple<at::Tensor, at::Tensor> attention_fused(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                   at::TensorList term_tensors, const detail::TermSpecArg& spec,
                                                   bool causal, const c10::optional<at::Tensor>& key_padding_mask,
                                                   c10::optional<double> scale, bool return_weights) {
  using detail::value_of;
  const AttentionTerms terms = unpack_terms(term_tensors.vec(), spec->spec);
  const AttentionCall call = detail::fused_call(causal, value_of(key_padding_mask), scale, return_weights);
  detail::check_attention(q, k, v, terms, call);

  const detail::FusedForward f =
      detail::fused_forward(detail::fused_inputs(q, k, v, terms, call), return_weights, /*logsumexp=*/false);
  return {f.out.to(q.scalar_type()),
          return_weights ? f.weights.to(q.scalar_type()) : at::empty({0}, q.options())};
}

}  // namespace

TORCH_LIBRARY_IMPL(posenc, CPU, m) { m.impl("attention_fused", attention_fused); }

}  // namespace posenc::nn
