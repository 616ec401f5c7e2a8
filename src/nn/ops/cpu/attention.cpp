// CPU kernel of posenc::attention_fused (kernels/attention.h): the terms of
// posenc::nn::AttentionTerms become the kernel's pointers. Everything is
// checked first (detail::check_attention, shared with the composed path, and
// the gradient refusal: this op has no backward). Inputs are converted to the
// compute dtype (float32, float64 for float64); q, k, v and a dense bias keep
// their strides when the last dimension has unit stride (a transposed
// (B, T, H, D) projection needs no copy); the small tables are made
// contiguous; outputs are rounded once to q's dtype.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <cmath>
#include <cstdint>
#include <tuple>
#include <type_traits>

#include "dispatch.h"
#include "op_support.h"
#include "posenc/kernels/attention.h"
#include "posenc/nn/attention_ops.h"

namespace posenc::nn {
namespace {

using kernels::BatchedMatrix;

at::Tensor value_of(const c10::optional<at::Tensor>& t) { return detail::given(t) ? *t : at::Tensor(); }

// (B, H, rows, cols) in `compute` with unit column stride: a view when it already is one.
at::Tensor kernel_view(const at::Tensor& t, at::ScalarType compute) {
  const at::Tensor c = t.to(compute);
  return c.stride(3) == 1 || c.size(3) <= 1 ? c : c.contiguous();
}

template <class T>
BatchedMatrix<T> matrix_of(const at::Tensor& t) {
  using U = std::remove_const_t<T>;
  return {t.data_ptr<U>(), t.size(0), t.size(1), t.size(2), t.size(3), t.stride(0), t.stride(1), t.stride(2)};
}

// A contiguous table in `compute`, or undefined.
at::Tensor table_in(const at::Tensor& t, at::ScalarType compute) {
  return t.defined() ? t.to(compute).contiguous() : t;
}

// The kernel takes one table count for a pair (rel_k/rel_v, grid_h/grid_w):
// a shared table beside per-head ones is repeated per head (O(H * rows * D)).
void match_tables(at::Tensor& a, at::Tensor& b, int64_t heads) {
  if (!a.defined() || !b.defined() || a.dim() == b.dim()) return;
  at::Tensor& shared = a.dim() == 2 ? a : b;
  shared = shared.unsqueeze(0).expand({heads, shared.size(0), shared.size(1)}).contiguous();
}

int64_t tables_of(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor& t = a.defined() ? a : b;
  return t.defined() && t.dim() == 3 ? t.size(0) : 1;
}

template <class T>
const T* data_of(const at::Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}

std::tuple<at::Tensor, at::Tensor> attention_fused(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const c10::optional<at::Tensor>& offset_bias,
    const c10::optional<at::Tensor>& grid_bias, const c10::optional<at::Tensor>& bias,
    const c10::optional<at::Tensor>& rel_k, const c10::optional<at::Tensor>& rel_v, int64_t max_distance,
    const c10::optional<at::Tensor>& content_shift, const c10::optional<at::Tensor>& relative_shift,
    const c10::optional<at::Tensor>& grid_h, const c10::optional<at::Tensor>& grid_w, int64_t grid_height,
    int64_t grid_width, bool causal, const c10::optional<at::Tensor>& key_padding_mask, c10::optional<double> scale,
    bool return_weights) {
  AttentionTerms terms;
  terms.offset_bias = value_of(offset_bias);
  terms.grid_bias = value_of(grid_bias);
  terms.bias = value_of(bias);
  terms.rel_k = value_of(rel_k);
  terms.rel_v = value_of(rel_v);
  terms.max_distance = max_distance;
  terms.content_shift = value_of(content_shift);
  terms.relative_shift = value_of(relative_shift);
  terms.grid_h = value_of(grid_h);
  terms.grid_w = value_of(grid_w);
  terms.grid_height = grid_height;
  terms.grid_width = grid_width;
  AttentionCall call;
  call.causal = causal;
  if (detail::given(key_padding_mask)) call.key_padding_mask = *key_padding_mask;
  if (scale) call.scale = *scale;
  call.return_weights = return_weights;
  detail::check_attention(q, k, v, terms, call);
  detail::refuse_grad(q, k, v, terms);

  const int64_t batch = q.size(0), heads = q.size(1), q_len = q.size(2), k_len = k.size(2);
  const int64_t head_dim = q.size(3), value_dim = v.size(3);
  const at::ScalarType compute = detail::compute_dtype(q.scalar_type());
  const at::Tensor qc = kernel_view(q, compute), kc = kernel_view(k, compute), vc = kernel_view(v, compute);

  at::Tensor rk = table_in(terms.rel_k, compute), rv = table_in(terms.rel_v, compute);
  match_tables(rk, rv, heads);
  at::Tensor gh = table_in(terms.grid_h, compute), gw = table_in(terms.grid_w, compute);
  match_tables(gh, gw, heads);
  const at::Tensor u = table_in(terms.content_shift, compute), w = table_in(terms.relative_shift, compute);
  const at::Tensor ob = table_in(terms.offset_bias, compute), gb = table_in(terms.grid_bias, compute);
  // A dense bias as (B, H, Tq, Tk) strides: broadcast dimensions get stride 0, a
  // broadcast (or strided) last dimension is written out along the keys only.
  at::Tensor db;
  if (terms.bias.defined()) {
    db = terms.bias.to(compute);
    while (db.dim() < 4) db = db.unsqueeze(0);
    if (k_len > 1 && (db.size(3) != k_len || db.stride(3) != 1)) {
      db = db.expand({db.size(0), db.size(1), db.size(2), k_len}).contiguous();
    }
    db = db.expand({batch, heads, q_len, k_len});
  }
  at::Tensor padding;  // (B, Tk) bytes, non-zero = padding
  if (call.key_padding_mask) padding = call.key_padding_mask->to(at::kByte).contiguous();

  kernels::AttentionParams params;
  params.scale = call.scale.value_or(head_dim > 0 ? 1.0 / std::sqrt(static_cast<double>(head_dim)) : 1.0);
  params.causal = causal;
  if (padding.defined()) {
    params.key_padding = padding.data_ptr<uint8_t>();
    params.key_padding_stride = k_len;
  }

  const auto options = q.options().dtype(compute);
  at::Tensor out = at::empty({batch, heads, q_len, value_dim}, options);
  at::Tensor weights = return_weights ? at::empty({batch, heads, q_len, k_len}, options) : at::Tensor();
  detail::translate_errors([&] {
    const auto run = [&](auto tag) {
      using T = decltype(tag);
      kernels::AttentionTerms<T> t;
      t.content_shift = data_of<T>(u);
      t.rel_k = data_of<T>(rk);
      t.rel_v = data_of<T>(rv);
      t.rel_tables = tables_of(rk, rv);
      t.max_distance = max_distance;
      t.relative_shift = data_of<T>(w);
      t.grid_h = data_of<T>(gh);
      t.grid_w = data_of<T>(gw);
      t.grid_tables = tables_of(gh, gw);
      t.grid_height = grid_height;
      t.grid_width = grid_width;
      t.offset_bias = data_of<T>(ob);
      t.grid_bias = data_of<T>(gb);
      if (db.defined()) {
        t.bias = db.data_ptr<T>();
        t.bias_stride_b = db.stride(0);
        t.bias_stride_h = db.stride(1);
        t.bias_stride_r = db.stride(2);
      }
      kernels::attention_forward<T>(params, matrix_of<const T>(qc), matrix_of<const T>(kc), matrix_of<const T>(vc),
                                    t, matrix_of<T>(out),
                                    weights.defined() ? matrix_of<T>(weights) : BatchedMatrix<T>{}, "attention");
    };
    compute == at::kDouble ? run(double{}) : run(float{});
  });
  return {out.to(q.scalar_type()), weights.defined() ? weights.to(q.scalar_type()) : at::empty({0}, q.options())};
}

}  // namespace

TORCH_LIBRARY_IMPL(posenc, CPU, m) { m.impl("attention_fused", attention_fused); }

}  // namespace posenc::nn
