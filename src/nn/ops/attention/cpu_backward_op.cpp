// CPU kernel of posenc::attention_streamed_backward: the fused backward
// (cpu_backward.cpp) as an op, so that the autograd function's backward goes
// through the dispatcher (and torch.compile's tracers see it, with its fake
// kernel from posenc/_fake.py). The gradients come back for the `needs`
// entries only, each in its input's dtype.
#include <ATen/ATen.h>
#include <ATen/core/List.h>
#include <torch/library.h>

#include <cstdint>
#include <vector>

#include "dispatch.h"
#include "ops/attention/cpu_inputs.h"
#include "op_support.h"
#include "posenc/nn/attention_ops.h"

namespace posenc::nn {
namespace {

std::vector<at::Tensor> attention_streamed_backward(const at::Tensor& grad_out, const at::Tensor& q,
                                                    const at::Tensor& k, const at::Tensor& v,
                                                    at::TensorList term_tensors, c10::string_view spec_text,
                                                    bool causal, const c10::optional<at::Tensor>& key_padding_mask,
                                                    double scale, const at::Tensor& out, const at::Tensor& logsumexp,
                                                    const c10::List<bool>& needs) {
  const std::vector<at::Tensor> tensors = term_tensors.vec();
  TORCH_CHECK_VALUE(needs.size() == 3 + tensors.size(), "[attention] needs must have 3 + len(terms) = ",
                    3 + tensors.size(), " entries (q, k, v, then the term list), got ", needs.size());
  const TermSpec spec = TermSpec::parse({spec_text.data(), spec_text.size()});
  const AttentionTerms terms = unpack_terms(tensors, spec);
  const AttentionCall call =
      detail::fused_call(causal, detail::value_of(key_padding_mask), scale, /*return_weights=*/false);
  detail::check_attention(q, k, v, terms, call);
  std::vector<at::Tensor> asked(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (needs.get(3 + i)) asked[i] = tensors[i];
  }
  const AttentionTerms wanted = unpack_terms(asked, spec);
  const detail::FusedInputs in = detail::fused_inputs(q, k, v, terms, call);
  detail::FusedGradients g = detail::fused_backward(in, out.to(in.compute), logsumexp.to(in.compute), grad_out,
                                                    needs.get(0), needs.get(1), needs.get(2), wanted);
  std::vector<at::Tensor> result;
  const auto back = [&](const at::Tensor& grad, const at::Tensor& input) {
    // A term the kernel has no gradient for (an index) answers zeros rather than a hole in the list.
    result.push_back(grad.defined() ? grad.to(input.scalar_type()) : at::zeros_like(input));
  };
  if (needs.get(0)) back(g.q, q);
  if (needs.get(1)) back(g.k, k);
  if (needs.get(2)) back(g.v, v);
  const std::vector<at::Tensor*> slots = term_slots(g.terms, spec);
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (needs.get(3 + i)) back(*slots[i], tensors[i]);
  }
  return result;
}

}  // namespace

TORCH_LIBRARY_IMPL(posenc, CPU, m) { m.impl("attention_streamed_backward", attention_streamed_backward); }

}  // namespace posenc::nn
