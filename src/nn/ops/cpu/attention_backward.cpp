// The fused attention's backward call (attention_inputs.h): outputs allocated
// in the kernel's shapes, the kernel run, then each gradient put back in the
// shape its term was given in.
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>

#include <array>
#include <cstdint>

#include "ops/cpu/attention_inputs.h"
#include "op_support.h"
#include "posenc/kernels/attention_backward.h"

namespace posenc::nn::detail {
namespace {

template <class T>
T* data_or_null(const at::Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}

}  // namespace

FusedGradients fused_backward(const FusedInputs& in, const at::Tensor& out, const at::Tensor& logsumexp,
                              const at::Tensor& grad_out, const std::array<bool, kSlots>& needs) {
  const auto options = in.q.options().dtype(in.compute);
  const auto like = [&](GradSlot slot, const at::Tensor& term) {
    return needs[slot] && term.defined() ? at::empty(term.sizes(), options) : at::Tensor();
  };
  FusedGradients g;
  g[kQ] = like(kQ, in.q), g[kK] = like(kK, in.k), g[kV] = like(kV, in.v);
  g[kOffsetBias] = like(kOffsetBias, in.offset_bias);
  g[kGridBias] = like(kGridBias, in.grid_bias);
  g[kBias] = like(kBias, in.bias);  // (B, H, Tq, Tk), summed to the bias's shape below
  g[kRelK] = like(kRelK, in.rel_k), g[kRelV] = like(kRelV, in.rel_v);
  g[kContentShift] = like(kContentShift, in.content_shift);
  g[kRelativeShift] = like(kRelativeShift, in.relative_shift);
  g[kGridH] = like(kGridH, in.grid_h), g[kGridW] = like(kGridW, in.grid_w);
  const at::Tensor go = kernel_view(grad_out, in.compute);
  const at::Tensor o = out.contiguous(), lse = logsumexp.contiguous();

  translate_errors([&] {
    const auto run = [&](auto tag) {
      using T = decltype(tag);
      kernels::AttentionGradients<T> grads;
      const auto matrix = [](const at::Tensor& t) {
        return t.defined() ? matrix_of<T>(t) : kernels::BatchedMatrix<T>{};
      };
      grads.q = matrix(g[kQ]), grads.k = matrix(g[kK]), grads.v = matrix(g[kV]), grads.bias = matrix(g[kBias]);
      grads.offset_bias = data_or_null<T>(g[kOffsetBias]);
      grads.grid_bias = data_or_null<T>(g[kGridBias]);
      grads.rel_k = data_or_null<T>(g[kRelK]);
      grads.rel_v = data_or_null<T>(g[kRelV]);
      grads.content_shift = data_or_null<T>(g[kContentShift]);
      grads.relative_shift = data_or_null<T>(g[kRelativeShift]);
      grads.grid_h = data_or_null<T>(g[kGridH]);
      grads.grid_w = data_or_null<T>(g[kGridW]);
      kernels::attention_backward<T>(in.params, matrix_of<const T>(in.q), matrix_of<const T>(in.k),
                                     matrix_of<const T>(in.v), in.terms<T>(), matrix_of<const T>(o),
                                     lse.data_ptr<T>(), matrix_of<const T>(go), grads, "attention");
    };
    in.compute == at::kDouble ? run(double{}) : run(float{});
  });

  if (g[kBias].defined()) g[kBias] = at::sum_to(g[kBias], in.bias_sizes);
  const auto unrepeat = [&](GradSlot slot, bool repeated) {
    if (repeated && g[slot].defined()) g[slot] = g[slot].sum(0);
  };
  unrepeat(kRelK, in.rel_k_repeated);
  unrepeat(kRelV, in.rel_v_repeated);
  unrepeat(kGridH, in.grid_h_repeated);
  unrepeat(kGridW, in.grid_w_repeated);
  return g;
}

}  // namespace posenc::nn::detail
