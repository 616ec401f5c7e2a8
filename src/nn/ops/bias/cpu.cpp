// Kernels of the attention-bias ops (kernels/alibi.h, kernels/t5.h):
//   alibi_slopes   -> [H]
//   alibi_bias     -> [H, q_len, k_len]   -m_h |i' - j|, causal: -inf for j > i'
//   alibi_bias_2d  -> [H, HW, HW]         -m_h dist((y,x), (y',x'))
//   t5_bucket      S (integer) -> S (int64)
//   t5_bias        table [num_buckets, H] -> [H, q_len, k_len], and its backward
//   t5_bias_2d     table_h, table_w [num_buckets, H] -> [H, HW, HW], and its backward
// Queries are the last q_len of the k_len keys: i' = i + k_len - q_len.
// float32 / float64 are computed directly; bfloat16 / float16 in float32 and
// rounded once. The ALiBi ops take no tensor (the .out form excepted) and are
// registered as CompositeExplicitAutograd; the T5 ops are CPU kernels (their
// autograd is in ops/bias/autograd.cpp).
#include <ATen/ATen.h>
#include <torch/library.h>

#include <string>
#include <tuple>
#include <vector>

#include "op_support.h"
#include "posenc/kernels/alibi.h"
#include "posenc/kernels/t5.h"

namespace posenc::nn {
namespace {

using detail::dtype_name;

using detail::to_std;
using detail::translate_errors;

constexpr const char* kSlopes = "alibi_slopes";
constexpr const char* kAlibi = "alibi_bias";
constexpr const char* kAlibi2d = "alibi_bias_2d";
constexpr const char* kBucket = "t5_bucket";
constexpr const char* kT5 = "t5_bias";
constexpr const char* kT52d = "t5_bias_2d";

// k_len - q_len, or 0 when an extent is negative (the kernels then name it;
// the difference of two arbitrary int64 could overflow).
int64_t last_keys_offset(int64_t q_len, int64_t k_len) noexcept {
  return q_len >= 0 && k_len >= 0 ? k_len - q_len : 0;
}

// ---- ALiBi -------------------------------------------------------------------------------------

at::Tensor alibi_slopes(int64_t num_heads, c10::optional<at::ScalarType> dtype) {
  const at::ScalarType out_dtype = detail::output_dtype(kSlopes, dtype);
  // The bias ops bound num_heads by their size limit; alone, the slopes need a bound of their own.
  TORCH_CHECK_VALUE(num_heads <= kernels::kMaxTableValues, "[", kSlopes, "] num_heads must be at most 2^31, got ",
                    num_heads);
  std::vector<double> slopes = translate_errors([&] { return kernels::alibi_slopes(num_heads, kSlopes); });
  return at::tensor(slopes, at::TensorOptions().dtype(at::kDouble)).to(detail::compute_dtype(out_dtype)).to(out_dtype);
}

kernels::AlibiParams alibi_params(int64_t num_heads, int64_t q_len, int64_t k_len, bool causal) {
  // Checked here because the kernel would phrase it as a negative query_offset.
  TORCH_CHECK_VALUE(!(causal && q_len > k_len && k_len >= 0), "[", kAlibi,
                    "] causal needs q_len <= k_len (the queries are the last q_len keys), got q_len ", q_len,
                    " and k_len ", k_len);
  kernels::AlibiParams params{num_heads, q_len, k_len, last_keys_offset(q_len, k_len), causal};
  translate_errors([&] { kernels::validate(params, kAlibi); });
  return params;
}

// out: contiguous [num_heads, q_len, k_len] float32 or float64 (params validated).
void fill_alibi(const kernels::AlibiParams& params, at::Tensor& out) {
  // An empty bias does not bound num_heads, so there may be too many slopes to hold.
  if (out.numel() == 0) return;
  const std::vector<double> slopes = translate_errors([&] { return kernels::alibi_slopes(params.num_heads, kAlibi); });
  translate_errors([&] {
    if (out.scalar_type() == at::kDouble) {
      kernels::alibi_bias(params, slopes.data(), out.data_ptr<double>(), kAlibi);
    } else {
      kernels::alibi_bias(params, slopes.data(), out.data_ptr<float>(), kAlibi);
    }
  });
}

at::Tensor alibi_bias(int64_t num_heads, int64_t q_len, int64_t k_len, bool causal,
                      c10::optional<at::ScalarType> dtype) {
  const at::ScalarType out_dtype = detail::output_dtype(kAlibi, dtype);
  const kernels::AlibiParams params = alibi_params(num_heads, q_len, k_len, causal);
  at::Tensor out = at::empty({num_heads, q_len, k_len}, at::TensorOptions().dtype(detail::compute_dtype(out_dtype)));
  fill_alibi(params, out);
  return out.to(out_dtype);
}

at::Tensor& alibi_bias_out(int64_t num_heads, int64_t q_len, int64_t k_len, bool causal, at::Tensor& out) {
  const kernels::AlibiParams params = alibi_params(num_heads, q_len, k_len, causal);
  TORCH_CHECK_VALUE(out.defined(), "[", kAlibi, "] out must be a tensor, got None");
  const std::vector<int64_t> shape{num_heads, q_len, k_len};
  const bool dtype_ok = out.scalar_type() == at::kFloat || out.scalar_type() == at::kDouble;
  TORCH_CHECK_VALUE(dtype_ok && out.is_contiguous() && out.sizes() == at::IntArrayRef(shape), "[", kAlibi,
                    "] out must be a contiguous float32 or float64 tensor of shape ", at::IntArrayRef(shape),
                    ", got a ", out.is_contiguous() ? "contiguous " : "non-contiguous ",
                    dtype_name(out.scalar_type()), " tensor of shape ", out.sizes());
  TORCH_CHECK_VALUE(out.device().is_cpu(), "[", kAlibi, "] out must be on the CPU, got ", out.device());
  fill_alibi(params, out);
  return out;
}

at::Tensor alibi_bias_2d(int64_t num_heads, int64_t height, int64_t width, c10::string_view distance,
                         c10::optional<at::ScalarType> dtype) {
  const at::ScalarType out_dtype = detail::output_dtype(kAlibi2d, dtype);
  const kernels::Alibi2dParams params = translate_errors([&] {
    const kernels::Alibi2dParams p{num_heads, height, width, kernels::parse_grid_distance(to_std(distance), kAlibi2d)};
    kernels::validate(p, kAlibi2d);
    return p;
  });
  const std::vector<double> slopes = translate_errors([&] { return kernels::alibi_slopes(num_heads, kAlibi2d); });
  const int64_t cells = height * width;  // validated: H * (HW)^2 <= 2^31
  at::Tensor out = at::empty({num_heads, cells, cells}, at::TensorOptions().dtype(detail::compute_dtype(out_dtype)));
  translate_errors([&] {
    if (out.scalar_type() == at::kDouble) {
      kernels::alibi_bias_2d(params, slopes.data(), out.data_ptr<double>(), kAlibi2d);
    } else {
      kernels::alibi_bias_2d(params, slopes.data(), out.data_ptr<float>(), kAlibi2d);
    }
  });
  return out.to(out_dtype);
}

// ---- T5 -----------------------------------------------------------------------------------------

at::Tensor t5_bucket(const at::Tensor& relative_position, bool bidirectional, int64_t num_buckets,
                     int64_t max_distance) {
  const at::Tensor& r = relative_position;
  TORCH_CHECK_VALUE(r.defined(), "[", kBucket, "] relative_position must be a tensor, got None");
  TORCH_CHECK_TYPE(detail::is_position_dtype(r.scalar_type()), "[", kBucket, "] relative_position must be ",
                   detail::kPositionDtypes, ", got ", r.scalar_type());
  TORCH_CHECK_VALUE(r.device().is_cpu(), "[", kBucket, "] relative_position must be on the CPU, got ", r.device());
  const kernels::T5BucketParams params{bidirectional, num_buckets, max_distance};
  translate_errors([&] { kernels::validate(params, kBucket); });
  const at::Tensor rel = r.to(at::kLong).contiguous();
  at::Tensor out = at::empty(rel.sizes(), at::TensorOptions().dtype(at::kLong));
  translate_errors([&] {
    kernels::t5_buckets(params, detail::const_span_of<int64_t>(rel), detail::span_of<int64_t>(out), kBucket);
  });
  return out;
}

// A [num_buckets, heads] table argument (a float CPU tensor of rank 2).
void check_table(const char* op, const char* name, const at::Tensor& table) {
  detail::check_float_tensor(op, name, table);
  TORCH_CHECK_VALUE(table.dim() == 2, "[", op, "] ", name, " must be 2-D [num_buckets, heads], got ", table.dim(),
                    "-D");
}

at::Tensor t5_bias(const at::Tensor& table, int64_t q_len, int64_t k_len, bool bidirectional, int64_t max_distance) {
  check_table(kT5, "table", table);
  const kernels::T5BucketParams params{bidirectional, table.size(0), max_distance};
  const kernels::T5BiasShape shape{table.size(1), q_len, k_len, last_keys_offset(q_len, k_len)};
  translate_errors([&] { kernels::validate(params, shape, kT5); });
  const at::ScalarType compute = detail::compute_dtype(table.scalar_type());
  const at::Tensor t = table.to(compute).contiguous();
  at::Tensor out = at::empty({shape.heads, q_len, k_len}, at::TensorOptions().dtype(compute));
  translate_errors([&] {
    if (compute == at::kDouble) {
      kernels::t5_bias(params, shape, t.data_ptr<double>(), out.data_ptr<double>(), kT5);
    } else {
      kernels::t5_bias(params, shape, t.data_ptr<float>(), out.data_ptr<float>(), kT5);
    }
  });
  return out.to(table.scalar_type());
}

// grad: [heads, q_len, k_len] -> [num_buckets, heads], grad's dtype.
at::Tensor t5_bias_backward(const at::Tensor& grad, int64_t num_buckets, bool bidirectional, int64_t max_distance) {
  detail::check_float_tensor(kT5, "grad", grad);
  TORCH_CHECK_VALUE(grad.dim() == 3, "[", kT5, "] grad must be 3-D [heads, q_len, k_len], got ", grad.dim(), "-D");
  const int64_t q_len = grad.size(1), k_len = grad.size(2);
  const kernels::T5BucketParams params{bidirectional, num_buckets, max_distance};
  const kernels::T5BiasShape shape{grad.size(0), q_len, k_len, k_len - q_len};
  translate_errors([&] { kernels::validate(params, shape, kT5); });
  const at::ScalarType compute = detail::compute_dtype(grad.scalar_type());
  const at::Tensor g = grad.to(compute).contiguous();
  at::Tensor grad_table = at::empty({num_buckets, shape.heads}, at::TensorOptions().dtype(compute));
  translate_errors([&] {
    if (compute == at::kDouble) {
      kernels::t5_bias_backward(params, shape, g.data_ptr<double>(), grad_table.data_ptr<double>(), kT5);
    } else {
      kernels::t5_bias_backward(params, shape, g.data_ptr<float>(), grad_table.data_ptr<float>(), kT5);
    }
  });
  return grad_table.to(grad.scalar_type());
}

at::Tensor t5_bias_2d(const at::Tensor& table_h, const at::Tensor& table_w, int64_t height, int64_t width,
                      bool bidirectional, int64_t max_distance) {
  check_table(kT52d, "table_h", table_h);
  check_table(kT52d, "table_w", table_w);
  TORCH_CHECK_TYPE(table_w.scalar_type() == table_h.scalar_type(), "[", kT52d, "] table_w must have table_h's dtype (",
                   dtype_name(table_h.scalar_type()), "), got ", dtype_name(table_w.scalar_type()));
  TORCH_CHECK_VALUE(table_w.sizes() == table_h.sizes(), "[", kT52d, "] table_w must have table_h's shape ",
                    table_h.sizes(), ", got ", table_w.sizes());
  const kernels::T5BucketParams params{bidirectional, table_h.size(0), max_distance};
  const kernels::T5Bias2dShape shape{table_h.size(1), height, width};
  translate_errors([&] { kernels::validate(params, shape, kT52d); });
  const at::ScalarType compute = detail::compute_dtype(table_h.scalar_type());
  const at::Tensor th = table_h.to(compute).contiguous();
  const at::Tensor tw = table_w.to(compute).contiguous();
  const int64_t cells = height * width;  // validated: heads * (HW)^2 <= 2^31
  at::Tensor out = at::empty({shape.heads, cells, cells}, at::TensorOptions().dtype(compute));
  translate_errors([&] {
    if (compute == at::kDouble) {
      kernels::t5_bias_2d(params, shape, th.data_ptr<double>(), tw.data_ptr<double>(), out.data_ptr<double>(), kT52d);
    } else {
      kernels::t5_bias_2d(params, shape, th.data_ptr<float>(), tw.data_ptr<float>(), out.data_ptr<float>(), kT52d);
    }
  });
  return out.to(table_h.scalar_type());
}

// grad: [heads, HW, HW] -> (grad_table_h, grad_table_w), each [num_buckets, heads], grad's dtype.
std::tuple<at::Tensor, at::Tensor> t5_bias_2d_backward(const at::Tensor& grad, int64_t num_buckets, int64_t height,
                                                       int64_t width, bool bidirectional, int64_t max_distance) {
  detail::check_float_tensor(kT52d, "grad", grad);
  TORCH_CHECK_VALUE(grad.dim() == 3, "[", kT52d, "] grad must be 3-D [heads, HW, HW], got ", grad.dim(), "-D");
  const kernels::T5BucketParams params{bidirectional, num_buckets, max_distance};
  const kernels::T5Bias2dShape shape{grad.size(0), height, width};
  translate_errors([&] { kernels::validate(params, shape, kT52d); });
  const int64_t cells = height * width;
  TORCH_CHECK_VALUE(grad.size(1) == cells && grad.size(2) == cells, "[", kT52d, "] grad must have shape [heads, ",
                    cells, ", ", cells, "] for a ", height, "x", width, " grid, got ", grad.sizes());
  const at::ScalarType compute = detail::compute_dtype(grad.scalar_type());
  const at::Tensor g = grad.to(compute).contiguous();
  const auto options = at::TensorOptions().dtype(compute);
  at::Tensor grad_h = at::empty({num_buckets, shape.heads}, options);
  at::Tensor grad_w = at::empty({num_buckets, shape.heads}, options);
  translate_errors([&] {
    if (compute == at::kDouble) {
      kernels::t5_bias_2d_backward(params, shape, g.data_ptr<double>(), grad_h.data_ptr<double>(),
                                   grad_w.data_ptr<double>(), kT52d);
    } else {
      kernels::t5_bias_2d_backward(params, shape, g.data_ptr<float>(), grad_h.data_ptr<float>(),
                                   grad_w.data_ptr<float>(), kT52d);
    }
  });
  return {grad_h.to(grad.scalar_type()), grad_w.to(grad.scalar_type())};
}

}  // namespace

TORCH_LIBRARY_IMPL(posenc, CompositeExplicitAutograd, m) {
  m.impl("alibi_slopes", alibi_slopes);
  m.impl("alibi_bias", alibi_bias);
  m.impl("alibi_bias.out", alibi_bias_out);
  m.impl("alibi_bias_2d", alibi_bias_2d);
}

TORCH_LIBRARY_IMPL(posenc, CPU, m) {
  m.impl("t5_bucket", t5_bucket);
  m.impl("t5_bias", t5_bias);
  m.impl("t5_bias_backward", t5_bias_backward);
  m.impl("t5_bias_2d", t5_bias_2d);
  m.impl("t5_bias_2d_backward", t5_bias_2d_backward);
}

}  // namespace posenc::nn
