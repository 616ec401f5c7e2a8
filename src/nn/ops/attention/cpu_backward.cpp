// The fused attention's backward call (attention_inputs.h): outputs allocated
// in the kernel's shapes, the kernel run, then each gradient put back in the
// shape its term was given in.
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>

#include <array>
#include <cstdint>

#include "ops/attention/cpu_inputs.h"
#include "op_support.h"
#include "posenc/kernels/attention_backward.h"
#include "posenc/kernels/fire.h"

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
  g[kRelK] = like(kRelK, in.rel_k), g[kRelV] = like(kRelV, in.rel_v), g[kRelQ] = like(kRelQ, in.rel_q);
  g[kContentShift] = like(kContentShift, in.content_shift);
  g[kRelativeShift] = like(kRelativeShift, in.relative_shift);
  g[kGridH] = like(kGridH, in.grid_h), g[kGridW] = like(kGridW, in.grid_w);
  // FIRE: one double buffer in the kernel's layout (kernels/fire.h), split into the six below.
  const std::array<const at::Tensor*, 6> fire{&in.fire_w1, &in.fire_b1, &in.fire_w2,
                                              &in.fire_b2, &in.fire_c,  &in.fire_threshold};
  bool fire_grad = false;
  for (int i = 0; i < 6; ++i) fire_grad = fire_grad || (needs[kFireW1 + i] && fire[i]->defined());
  at::Tensor fire_buffer;
  if (fire_grad) {
    fire_buffer = at::empty({kernels::fire_gradient_size(in.fire_w2.size(0), in.fire_w1.size(0))},
                            options.dtype(at::kDouble));
  }
  // CoPE: de in double (the kernel's layout is e's, [npos, Dh]).
  at::Tensor cope_buffer;
  if (needs[kCopeE] && in.cope_e.defined()) cope_buffer = at::empty(in.cope_e.sizes(), options.dtype(at::kDouble));
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
      grads.rel_q = data_or_null<T>(g[kRelQ]);
      grads.content_shift = data_or_null<T>(g[kContentShift]);
      grads.relative_shift = data_or_null<T>(g[kRelativeShift]);
      grads.grid_h = data_or_null<T>(g[kGridH]);
      grads.grid_w = data_or_null<T>(g[kGridW]);
      grads.tile_bias = fire_buffer.defined()   ? fire_buffer.data_ptr<double>()
                        : cope_buffer.defined() ? cope_buffer.data_ptr<double>()
                                                : nullptr;
      kernels::attention_backward<T>(in.params, matrix_of<const T>(in.q), matrix_of<const T>(in.k),
                                     matrix_of<const T>(in.v), in.terms<T>(), matrix_of<const T>(o),
                                     lse.data_ptr<T>(), matrix_of<const T>(go), grads, "attention");
    };
    in.compute == at::kDouble ? run(double{}) : run(float{});
  });

  if (g[kBias].defined()) g[kBias] = at::sum_to(g[kBias], in.bias_sizes);
  if (fire_buffer.defined()) {
    int64_t at = 0;
    for (int i = 0; i < 6; ++i) {
      const int64_t n = fire[i]->numel();
      if (needs[kFireW1 + i]) g[kFireW1 + i] = fire_buffer.narrow(0, at, n).view(fire[i]->sizes()).to(in.compute);
      at += n;
    }
  }
  if (cope_buffer.defined()) g[kCopeE] = cope_buffer.to(in.compute);
  const auto unrepeat = [&](GradSlot slot, bool repeated) {
    if (repeated && g[slot].defined()) g[slot] = g[slot].sum(0);
  };
  unrepeat(kRelK, in.rel_k_repeated);
  unrepeat(kRelV, in.rel_v_repeated);
  unrepeat(kRelQ, in.rel_q_repeated);
  unrepeat(kGridH, in.grid_h_repeated);
  unrepeat(kGridW, in.grid_w_repeated);
  return g;
}

}  // namespace posenc::nn::detail
