// CPU kernel of posenc::attention_fused without a gradient (kernels/attention.h);
// the Autograd kernel (ops/attention/autograd.cpp) comes here when no input
// needs one. Everything is checked first (detail::check_attention, shared
// with the composed path); outputs are rounded once to q's dtype.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <cstdint>
#include <tuple>

#include "ops/attention/cpu_inputs.h"
#include "dispatch.h"
#include "op_support.h"
#include "posenc/nn/attention_ops.h"

namespace posenc::nn {
namespace {

std::tuple<at::Tensor, at::Tensor> attention_fused(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const c10::optional<at::Tensor>& offset_bias,
    const c10::optional<at::Tensor>& grid_bias, const c10::optional<at::Tensor>& bias,
    const c10::optional<at::Tensor>& rel_k, const c10::optional<at::Tensor>& rel_v, int64_t max_distance,
    const c10::optional<at::Tensor>& content_shift, const c10::optional<at::Tensor>& relative_shift,
    const c10::optional<at::Tensor>& grid_h, const c10::optional<at::Tensor>& grid_w, int64_t grid_height,
    int64_t grid_width, bool causal, const c10::optional<at::Tensor>& key_padding_mask, c10::optional<double> scale,
    bool return_weights,
    const c10::optional<at::Tensor>& fire_w1, const c10::optional<at::Tensor>& fire_b1,
    const c10::optional<at::Tensor>& fire_w2, const c10::optional<at::Tensor>& fire_b2,
    const c10::optional<at::Tensor>& fire_c, const c10::optional<at::Tensor>& fire_threshold,
    const c10::optional<at::Tensor>& cope_e, const c10::optional<at::Tensor>& rel_q,
    const c10::optional<at::Tensor>& rel_index) {
  using detail::value_of;
  const FireTerm fire{value_of(fire_w1), value_of(fire_b1), value_of(fire_w2),
                      value_of(fire_b2), value_of(fire_c),  value_of(fire_threshold)};
  const AttentionTerms terms = detail::fused_terms(
      value_of(offset_bias), value_of(grid_bias), value_of(bias), value_of(rel_k), value_of(rel_v), max_distance,
      value_of(content_shift), value_of(relative_shift), value_of(grid_h), value_of(grid_w), grid_height, grid_width,
      fire, CopeTerm{value_of(cope_e)}, value_of(rel_q), value_of(rel_index));
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
