// The fused attention's inputs and forward call (attention_inputs.h).
#include "ops/attention/cpu_inputs.h"

#include <ATen/ATen.h>

#include <cmath>
#include <cstdint>

#include "op_support.h"
#include "ops/attention/checks.h"
#include "posenc/kernels/attention.h"

namespace posenc::nn::detail {
namespace {

// A contiguous table in `compute`, or undefined.
at::Tensor table_in(const at::Tensor& t, at::ScalarType compute) {
  return t.defined() ? t.to(compute).contiguous() : t;
}

// The kernel takes one table count for a pair (rel_k/rel_v, grid_h/grid_w):
// a shared table beside per-head ones is repeated per head (O(H * rows * D)).
void match_tables(at::Tensor& a, bool& a_repeated, at::Tensor& b, bool& b_repeated, int64_t heads) {
  if (!a.defined() || !b.defined() || a.dim() == b.dim()) return;
  const bool a_shared = a.dim() == 2;
  at::Tensor& shared = a_shared ? a : b;
  shared = shared.unsqueeze(0).expand({heads, shared.size(0), shared.size(1)}).contiguous();
  (a_shared ? a_repeated : b_repeated) = true;
}

int64_t tables_of(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor& t = a.defined() ? a : b;
  return t.defined() && t.dim() == 3 ? t.size(0) : 1;
}

template <class T>
const T* data_of(const at::Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}

}  // namespace

AttentionCall fused_call(bool causal, const at::Tensor& key_padding_mask, c10::optional<double> scale,
                         bool return_weights) {
  AttentionCall call;
  call.causal = causal;
  if (key_padding_mask.defined()) call.key_padding_mask = key_padding_mask;
  if (scale) call.scale = *scale;
  call.return_weights = return_weights;
  return call;
}

FusedInputs fused_inputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionTerms& terms,
                         const AttentionCall& call) {
  FusedInputs in;
  const at::ScalarType compute = compute_dtype(q.scalar_type());
  in.compute = compute;
  in.q = kernel_view(q, compute), in.k = kernel_view(k, compute), in.v = kernel_view(v, compute);
  const int64_t batch = q.size(0), heads = q.size(1), q_len = q.size(2), k_len = k.size(2), head_dim = q.size(3);
  in.rel_k = table_in(terms.rel_k, compute), in.rel_v = table_in(terms.rel_v, compute);
  match_tables(in.rel_k, in.rel_k_repeated, in.rel_v, in.rel_v_repeated, heads);
  in.rel_q = table_in(terms.rel_q, compute);
  if (in.rel_q.defined()) {  // one table count for rel_k, rel_v and rel_q
    if (in.rel_k.defined()) match_tables(in.rel_q, in.rel_q_repeated, in.rel_k, in.rel_k_repeated, heads);
    if (in.rel_v.defined()) match_tables(in.rel_q, in.rel_q_repeated, in.rel_v, in.rel_v_repeated, heads);
  }
  if (terms.rel_index.defined()) {
    in.rel_index = terms.rel_index.to(at::kLong).contiguous();
    in.rel_rows = (in.rel_k.defined() ? in.rel_k : in.rel_q).size(-2);
  }
  in.grid_h = table_in(terms.grid_h, compute), in.grid_w = table_in(terms.grid_w, compute);
  match_tables(in.grid_h, in.grid_h_repeated, in.grid_w, in.grid_w_repeated, heads);
  in.content_shift = table_in(terms.content_shift, compute);
  in.relative_shift = table_in(terms.relative_shift, compute);
  in.offset_bias = table_in(terms.offset_bias, compute);
  in.grid_bias = table_in(terms.grid_bias, compute);
  // A dense bias as (B, H, Tq, Tk) strides: broadcast dimensions get stride 0, a
  // broadcast (or strided) last dimension is written out along the keys only.
  if (terms.bias.defined()) {
    in.bias_sizes = terms.bias.sizes().vec();
    at::Tensor db = terms.bias.to(compute);
    while (db.dim() < 4) db = db.unsqueeze(0);
    if (k_len > 1 && (db.size(3) != k_len || db.stride(3) != 1)) {
      db = db.expand({db.size(0), db.size(1), db.size(2), k_len}).contiguous();
    }
    in.bias = db.expand({batch, heads, q_len, k_len});
  }
  if (call.key_padding_mask && call.key_padding_mask->defined()) {
    in.padding = call.key_padding_mask->to(at::kByte).contiguous();
    in.params.key_padding = in.padding.data_ptr<uint8_t>();
    in.params.key_padding_stride = k_len;
  }
  if (!terms.tiles.empty()) {
    // At most one (check_attention); the term reads q and k through in.q / in.k (kept alive by in).
    const TileTerm& tile = terms.tiles.front();
    in.tile_kind = &tile_kind(tile.kind);
    for (const at::Tensor& t : tile.tensors) in.tile_tensors.push_back(table_in(t, compute));
    const TileInputs inputs{in.tile_tensors, in.q, in.k,
                            scale_of(call, head_dim),
                            in.params.key_padding, in.params.key_padding_stride};
    translate_errors([&] {
      if (compute == at::kDouble) {
        in.tile_bias_d = in.tile_kind->fused_double(inputs);
      } else {
        in.tile_bias_f = in.tile_kind->fused_float(inputs);
      }
    });
  }
  in.max_distance = terms.max_distance;
  in.grid_height = terms.grid_height, in.grid_width = terms.grid_width;
  in.params.scale = scale_of(call, head_dim);
  in.params.causal = call.causal || terms.causal;
  return in;
}

template <class T>
kernels::AttentionTerms<T> FusedInputs::terms() const {
  kernels::AttentionTerms<T> t;
  t.content_shift = data_of<T>(content_shift);
  t.rel_k = data_of<T>(rel_k);
  t.rel_v = data_of<T>(rel_v);
  t.rel_q = data_of<T>(rel_q);
  t.rel_tables = tables_of(rel_k.defined() ? rel_k : rel_q, rel_v);
  t.rel_index = rel_index.defined() ? rel_index.data_ptr<int64_t>() : nullptr;
  t.rel_rows = rel_rows;
  t.max_distance = max_distance;
  t.relative_shift = data_of<T>(relative_shift);
  t.grid_h = data_of<T>(grid_h);
  t.grid_w = data_of<T>(grid_w);
  t.grid_tables = tables_of(grid_h, grid_w);
  t.grid_height = grid_height;
  t.grid_width = grid_width;
  t.offset_bias = data_of<T>(offset_bias);
  t.grid_bias = data_of<T>(grid_bias);
  if (bias.defined()) {
    t.bias = bias.data_ptr<T>();
    t.bias_stride_b = bias.stride(0);
    t.bias_stride_h = bias.stride(1);
    t.bias_stride_r = bias.stride(2);
  }
  if constexpr (std::is_same_v<T, double>) {
    t.tile_bias = tile_bias_d.get();
  } else {
    t.tile_bias = tile_bias_f.get();
  }
  return t;
}

template kernels::AttentionTerms<float> FusedInputs::terms<float>() const;
template kernels::AttentionTerms<double> FusedInputs::terms<double>() const;

FusedForward fused_forward(const FusedInputs& in, bool weights, bool logsumexp) {
  const int64_t batch = in.q.size(0), heads = in.q.size(1), q_len = in.q.size(2), k_len = in.k.size(2);
  const auto options = in.q.options().dtype(in.compute);
  FusedForward f;
  f.out = at::empty({batch, heads, q_len, in.v.size(3)}, options);
  if (weights) f.weights = at::empty({batch, heads, q_len, k_len}, options);
  if (logsumexp) f.logsumexp = at::empty({batch, heads, q_len}, options);
  translate_errors([&] {
    const auto run = [&](auto tag) {
      using T = decltype(tag);
      kernels::attention_forward<T>(in.params, matrix_of<const T>(in.q), matrix_of<const T>(in.k),
                                    matrix_of<const T>(in.v), in.terms<T>(), matrix_of<T>(f.out),
                                    weights ? matrix_of<T>(f.weights) : kernels::BatchedMatrix<T>{}, "attention",
                                    logsumexp ? f.logsumexp.data_ptr<T>() : nullptr);
    };
    in.compute == at::kDouble ? run(double{}) : run(float{});
  });
  return f;
}

}  // namespace posenc::nn::detail
