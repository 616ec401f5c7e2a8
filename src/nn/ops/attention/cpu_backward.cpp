// The fused attention's backward call (cpu_inputs.h): outputs allocated
// in the kernel's shapes, the kernel run, then each gradient put back in the
// shape its term was given in.
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>

#include <cstdint>
#include <vector>

#include "ops/attention/cpu_inputs.h"
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
                              const at::Tensor& grad_out, bool want_q, bool want_k, bool want_v,
                              const AttentionTerms& wanted) {
  const auto options = in.q.options().dtype(in.compute);
  // A gradient in the kernel's layout (the input as fused_inputs laid it out) when asked for.
  const auto like = [&](const at::Tensor& asked, const at::Tensor& term) {
    return asked.defined() && term.defined() ? at::empty(term.sizes(), options) : at::Tensor();
  };
  FusedGradients g;
  AttentionTerms& t = g.terms;
  g.q = want_q ? at::empty(in.q.sizes(), options) : at::Tensor();
  g.k = want_k ? at::empty(in.k.sizes(), options) : at::Tensor();
  g.v = want_v ? at::empty(in.v.sizes(), options) : at::Tensor();
  t.offset_bias = like(wanted.offset_bias, in.offset_bias);
  t.grid_bias = like(wanted.grid_bias, in.grid_bias);
  t.bias = like(wanted.bias, in.bias);  // (B, H, Tq, Tk), summed to the bias's shape below
  t.rel_k = like(wanted.rel_k, in.rel_k), t.rel_v = like(wanted.rel_v, in.rel_v);
  t.rel_q = like(wanted.rel_q, in.rel_q);
  t.content_shift = like(wanted.content_shift, in.content_shift);
  t.relative_shift = like(wanted.relative_shift, in.relative_shift);
  t.grid_h = like(wanted.grid_h, in.grid_h), t.grid_w = like(wanted.grid_w, in.grid_w);
  // The tile term's parameters: one double buffer in the term's layout, split by its kind below.
  std::vector<bool> tile_needs;
  bool tile_grad = false;
  if (in.tile_kind != nullptr && !wanted.tiles.empty()) {
    for (const at::Tensor& asked : wanted.tiles.front().tensors) tile_needs.push_back(asked.defined());
    for (const bool need : tile_needs) tile_grad = tile_grad || need;
  }
  at::Tensor tile_buffer;
  if (tile_grad) {
    const int64_t size =
        in.compute == at::kDouble ? in.tile_bias_d->gradient_size() : in.tile_bias_f->gradient_size();
    tile_buffer = at::empty({size}, options.dtype(at::kDouble));
  }
  const at::Tensor go = kernel_view(grad_out, in.compute);
  const at::Tensor o = out.contiguous(), lse = logsumexp.contiguous();

  translate_errors([&] {
    const auto run = [&](auto tag) {
      using T = decltype(tag);
      kernels::AttentionGradients<T> grads;
      const auto matrix = [](const at::Tensor& x) {
        return x.defined() ? matrix_of<T>(x) : kernels::BatchedMatrix<T>{};
      };
      grads.q = matrix(g.q), grads.k = matrix(g.k), grads.v = matrix(g.v), grads.bias = matrix(t.bias);
      grads.offset_bias = data_or_null<T>(t.offset_bias);
      grads.grid_bias = data_or_null<T>(t.grid_bias);
      grads.rel_k = data_or_null<T>(t.rel_k);
      grads.rel_v = data_or_null<T>(t.rel_v);
      grads.rel_q = data_or_null<T>(t.rel_q);
      grads.content_shift = data_or_null<T>(t.content_shift);
      grads.relative_shift = data_or_null<T>(t.relative_shift);
      grads.grid_h = data_or_null<T>(t.grid_h);
      grads.grid_w = data_or_null<T>(t.grid_w);
      grads.tile_bias = tile_buffer.defined() ? tile_buffer.data_ptr<double>() : nullptr;
      kernels::attention_backward<T>(in.params, matrix_of<const T>(in.q), matrix_of<const T>(in.k),
                                     matrix_of<const T>(in.v), in.terms<T>(), matrix_of<const T>(o),
                                     lse.data_ptr<T>(), matrix_of<const T>(go), grads, "attention");
    };
    in.compute == at::kDouble ? run(double{}) : run(float{});
  });

  if (t.bias.defined()) t.bias = at::sum_to(t.bias, in.bias_sizes);
  if (tile_buffer.defined()) {
    t.tiles.push_back(TileTerm{wanted.tiles.front().kind,
                               in.tile_kind->gradients(tile_buffer, in.tile_tensors, tile_needs, in.compute)});
  }
  const auto unrepeat = [](at::Tensor& grad, bool repeated) {
    if (repeated && grad.defined()) grad = grad.sum(0);
  };
  unrepeat(t.rel_k, in.rel_k_repeated);
  unrepeat(t.rel_v, in.rel_v_repeated);
  unrepeat(t.rel_q, in.rel_q_repeated);
  unrepeat(t.grid_h, in.grid_h_repeated);
  unrepeat(t.grid_w, in.grid_w_repeated);
  return g;
}

}  // namespace posenc::nn::detail
