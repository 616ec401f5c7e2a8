// CPU kernels of the RoPE rotations (kernels/rope.h rope_apply,
// rope_angle_grad):
//   rope_rotate(_)      x (..., T, D), cos/sin (T, R/2) | (B, T, R/2) -> x rotated
//   rope_rotate_omega   the tables from learned frequencies omega [R/2], angle p*omega
//   rope_rotate_omega_backward  grad_x (the inverse rotation) and
//                       grad_omega[j] = sum_{b,t} p[b,t] * grad_theta[b,t,j]
// x is used in place as a strided (batch, heads, T, D) view when its leading
// dimensions allow (a transposed (B, T, H, D) -> (B, H, T, D) view does), else
// through a contiguous copy. Math in float32 (float64 for float64 x), one rounding.
#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <torch/library.h>

#include <optional>
#include <tuple>
#include <type_traits>
#include <vector>

#include "op_support.h"
#include "posenc/kernels/half_types.h"
#include "posenc/kernels/rope.h"
#include "ops/rope/support.h"

namespace posenc::nn {
namespace {

constexpr const char* kOp = "rope";

// x (..., T, D) as (batch, heads, seq) with strides: dim 0 is the batch when
// x has 3 or more dims, the dims between it and T merge into heads.
struct ViewShape {
  int64_t batch = 1, heads = 1, seq = 0;
  int64_t stride_b = 0, stride_h = 0, stride_t = 0;
};

std::optional<ViewShape> view_shape(const at::Tensor& x) {
  const int64_t n = x.dim();
  if (x.size(-1) > 1 && x.stride(-1) != 1) return std::nullopt;
  ViewShape v;
  v.seq = x.size(-2);
  v.stride_t = x.stride(-2);
  int64_t first_head = 0;
  if (n >= 3) {
    v.batch = x.size(0);
    v.stride_b = x.stride(0);
    first_head = 1;
  }
  bool have_heads = false;
  for (int64_t d = n - 3; d >= first_head; --d) {  // innermost first
    if (x.size(d) == 1) continue;
    if (!have_heads) {
      v.stride_h = x.stride(d);
      have_heads = true;
    } else if (x.stride(d) != v.stride_h * v.heads) {
      return std::nullopt;
    }
    v.heads *= x.size(d);
  }
  return v;
}

template <class T>
kernels::RopeView<T> make_view(T* data, const ViewShape& v) {
  return {data, v.batch, v.heads, v.seq, v.stride_b, v.stride_h, v.stride_t};
}

// Calls f(std::type_identity<T>) with the kernels' storage type of dtype.
template <class F>
void visit_storage(at::ScalarType dtype, F&& f) {
  switch (dtype) {
    case at::kFloat: f(std::type_identity<float>{}); break;
    case at::kDouble: f(std::type_identity<double>{}); break;
    case at::kBFloat16: f(std::type_identity<kernels::bfloat16>{}); break;
    case at::kHalf: f(std::type_identity<kernels::float16>{}); break;
    default: TORCH_INTERNAL_ASSERT(false, "unexpected dtype ", dtype);
  }
}

// The table type for storage T: double for double, else float.
template <class T>
using TableType = std::conditional_t<std::is_same_v<T, double>, double, float>;

// out = rotate(in); in and out are viewable, of x's shape and dtype (out may be
// in); cos/sin contiguous in the compute dtype, [cos_batch, T, R/2].
void rotate(const kernels::RopeApplyParams& params, const at::Tensor& in, const at::Tensor& out,
            const at::Tensor& cos, const at::Tensor& sin, int64_t cos_batch) {
  if (in.numel() == 0) return;
  const ViewShape vin = *view_shape(in);
  const ViewShape vout = *view_shape(out);
  visit_storage(in.scalar_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = TableType<T>;
    detail::translate_errors([&] {
      kernels::rope_apply<T, C>(params, make_view(static_cast<const T*>(in.data_ptr()), vin),
                                make_view(static_cast<T*>(out.data_ptr()), vout), cos.data_ptr<C>(),
                                sin.data_ptr<C>(), cos_batch);
    });
  });
}

at::Tensor viewable(const at::Tensor& x) { return view_shape(x) ? x : x.contiguous(); }

// x = rotate(x), through a contiguous copy when x is not one view.
void rotate_in_place(const kernels::RopeApplyParams& params, at::Tensor& x, const at::Tensor& cos,
                     const at::Tensor& sin, int64_t cos_batch) {
  if (view_shape(x)) {
    rotate(params, x, x, cos, sin, cos_batch);
  } else {
    at::Tensor work = x.contiguous();
    rotate(params, work, work, cos, sin, cos_batch);
    x.copy_(work);
  }
}

// Checks cos/sin against x and returns their batch (1 or B).
int64_t check_tables(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  detail::check_float_tensor(kOp, "cos", cos);
  detail::check_float_tensor(kOp, "sin", sin);
  TORCH_CHECK_VALUE(cos.sizes() == sin.sizes(), "[", kOp, "] cos and sin must have the same shape, got ",
                    detail::shape_string(cos.sizes()), " and ", detail::shape_string(sin.sizes()));
  const int64_t half = cos.dim() >= 1 ? cos.size(-1) : 0;
  detail::RowsShape shape{"cos", "", ", R/2", ", " + std::to_string(half)};
  if (cos.dim() != 2 && cos.dim() != 3) {
    // Not a table at all: report it against the shapes it should have.
    detail::rows_batch(kOp, shape, x, {}, cos.sizes());
  }
  at::IntArrayRef rows = cos.sizes().slice(0, cos.dim() - 1);
  const int64_t shared_rows[1] = {cos.size(-2)};
  if (cos.dim() == 3 && cos.size(0) == 1) rows = shared_rows;  // (1, T, R/2) is shared by every batch row
  return detail::rows_batch(kOp, shape, x, rows, cos.sizes());
}

at::Tensor table_in(const at::Tensor& t, at::ScalarType compute) { return t.to(compute).contiguous(); }

// x (..., T, D), cos/sin (T, R/2) | (B, T, R/2) -> rotated x, contiguous
at::Tensor rope_rotate(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, c10::string_view layout,
                       bool inverse) {
  detail::check_rope_input(kOp, "x", x);
  const int64_t cos_batch = check_tables(x, cos, sin);
  const kernels::RopeApplyParams params = detail::rope_apply_params(kOp, x, 2 * cos.size(-1), layout, inverse);
  const at::ScalarType compute = detail::compute_dtype(x.scalar_type());
  at::Tensor out = at::empty(x.sizes(), x.options().memory_format(at::MemoryFormat::Contiguous));
  rotate(params, viewable(x), out, table_in(cos, compute), table_in(sin, compute), cos_batch);
  return out;
}

at::Tensor& rope_rotate_(at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, c10::string_view layout,
                         bool inverse) {
  detail::check_rope_input(kOp, "x", x);
  const int64_t cos_batch = check_tables(x, cos, sin);
  const kernels::RopeApplyParams params = detail::rope_apply_params(kOp, x, 2 * cos.size(-1), layout, inverse);
  at::assert_no_internal_overlap(x);
  const at::ScalarType compute = detail::compute_dtype(x.scalar_type());
  rotate_in_place(params, x, table_in(cos, compute), table_in(sin, compute), cos_batch);
  return x;
}

// ---------------------------------------------------------------------------
// Learned frequencies

void check_omega(const at::Tensor& omega) {
  detail::check_float_tensor(kOp, "omega", omega);
  TORCH_CHECK_VALUE(omega.dim() == 1, "[", kOp, "] omega must be 1-D [rotary_dim/2], got shape ",
                    detail::shape_string(omega.sizes()));
}

// The tables of angle p*omega: p.shape + [R/2] in `compute`.
std::pair<at::Tensor, at::Tensor> omega_tables(const at::Tensor& p, const at::Tensor& omega,
                                               c10::string_view precision, at::ScalarType compute) {
  const at::Tensor w = omega.to(at::kDouble).contiguous();
  kernels::RopeTableSpec spec;
  spec.omega = detail::const_span_of<double>(w);
  spec.precision = detail::translate_errors([&] { return kernels::parse_precision(detail::to_std(precision), kOp); });
  detail::translate_errors([&] { kernels::validate(spec, kOp); });
  const std::vector<int64_t> sizes = detail::table_sizes(p.sizes(), w.numel());
  at::Tensor cos = at::empty(sizes, at::TensorOptions().dtype(compute));
  at::Tensor sin = at::empty(sizes, at::TensorOptions().dtype(compute));
  if (p.numel() > 0) {
    detail::translate_errors([&] {
      if (compute == at::kDouble) {
        kernels::rope_cos_sin(spec, p.data_ptr<int64_t>(), nullptr, p.numel(), cos.data_ptr<double>(),
                              sin.data_ptr<double>());
      } else {
        kernels::rope_cos_sin(spec, p.data_ptr<int64_t>(), nullptr, p.numel(), cos.data_ptr<float>(),
                              sin.data_ptr<float>());
      }
    });
  }
  return {cos, sin};
}

struct OmegaCall {
  at::Tensor positions;  // int64, contiguous, (T) | (B, T)
  int64_t cos_batch = 1;
  kernels::RopeApplyParams params;
};

OmegaCall check_omega_call(const at::Tensor& x, const at::Tensor& positions, const at::Tensor& omega,
                           c10::string_view layout, bool inverse) {
  detail::check_rope_input(kOp, "x", x);
  OmegaCall call;
  call.positions = detail::int64_positions(kOp, positions);
  call.cos_batch = detail::rows_batch(kOp, {}, x, call.positions.sizes(), call.positions.sizes());
  check_omega(omega);
  call.params = detail::rope_apply_params(kOp, x, 2 * omega.numel(), layout, inverse);
  return call;
}

// x (..., T, D), positions (T) | (B, T), omega [R/2] -> rotated x
at::Tensor rope_rotate_omega(const at::Tensor& x, const at::Tensor& positions, const at::Tensor& omega,
                             c10::string_view layout, bool inverse, c10::string_view precision) {
  const OmegaCall call = check_omega_call(x, positions, omega, layout, inverse);
  const auto [cos, sin] = omega_tables(call.positions, omega, precision, detail::compute_dtype(x.scalar_type()));
  at::Tensor out = at::empty(x.sizes(), x.options().memory_format(at::MemoryFormat::Contiguous));
  rotate(call.params, viewable(x), out, cos, sin, call.cos_batch);
  return out;
}

at::Tensor& rope_rotate_omega_(at::Tensor& x, const at::Tensor& positions, const at::Tensor& omega,
                               c10::string_view layout, bool inverse, c10::string_view precision) {
  const OmegaCall call = check_omega_call(x, positions, omega, layout, inverse);
  at::assert_no_internal_overlap(x);
  const auto [cos, sin] = omega_tables(call.positions, omega, precision, detail::compute_dtype(x.scalar_type()));
  rotate_in_place(call.params, x, cos, sin, call.cos_batch);
  return x;
}

// -> (grad_x, grad_omega), each undefined unless asked for by output_mask
std::tuple<at::Tensor, at::Tensor> rope_rotate_omega_backward(const at::Tensor& grad, const at::Tensor& x,
                                                              const at::Tensor& positions, const at::Tensor& omega,
                                                              c10::string_view layout, bool inverse,
                                                              c10::string_view precision,
                                                              std::array<bool, 2> output_mask) {
  const OmegaCall call = check_omega_call(x, positions, omega, layout, inverse);
  detail::check_float_tensor(kOp, "grad", grad);
  TORCH_CHECK_VALUE(grad.sizes() == x.sizes() && grad.scalar_type() == x.scalar_type(), "[", kOp,
                    "] grad must have x's shape ", detail::shape_string(x.sizes()), " and dtype ", x.scalar_type(),
                    ", got ", detail::shape_string(grad.sizes()), " ", grad.scalar_type());
  const at::ScalarType compute = detail::compute_dtype(x.scalar_type());
  const auto [cos, sin] = omega_tables(call.positions, omega, precision, compute);
  at::Tensor grad_x, grad_omega;
  if (output_mask[0]) {
    kernels::RopeApplyParams transpose = call.params;
    transpose.inverse = !transpose.inverse;
    grad_x = at::empty(x.sizes(), x.options().memory_format(at::MemoryFormat::Contiguous));
    rotate(transpose, viewable(grad), grad_x, cos, sin, call.cos_batch);
  }
  if (output_mask[1]) {
    const int64_t half = omega.numel();
    const at::Tensor grad_theta = at::zeros({call.cos_batch, x.size(-2), half}, at::TensorOptions().dtype(compute));
    if (x.numel() > 0) {
      // One view shape for both: contiguous copies when they differ.
      const at::Tensor xc = x.contiguous();
      const at::Tensor gc = grad.contiguous();
      const ViewShape v = *view_shape(xc);
      visit_storage(x.scalar_type(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        using C = TableType<T>;
        detail::translate_errors([&] {
          kernels::rope_angle_grad<T, C>(call.params, make_view(static_cast<const T*>(xc.data_ptr()), v),
                                         make_view(static_cast<const T*>(gc.data_ptr()), v), cos.data_ptr<C>(),
                                         sin.data_ptr<C>(), call.cos_batch, grad_theta.data_ptr<C>());
        });
      });
    }
    // dtheta/domega_j = p; summed in float64.
    const at::Tensor p = call.positions.to(at::kDouble).reshape({-1, 1});
    grad_omega = (p * grad_theta.to(at::kDouble).reshape({-1, half})).sum(0).to(omega.scalar_type());
  }
  return {grad_x, grad_omega};
}

}  // namespace

TORCH_LIBRARY_IMPL(posenc, CPU, m) {
  m.impl("rope_rotate", rope_rotate);
  m.impl("rope_rotate_", rope_rotate_);
  m.impl("rope_rotate_omega", rope_rotate_omega);
  m.impl("rope_rotate_omega_", rope_rotate_omega_);
  m.impl("rope_rotate_omega_backward", rope_rotate_omega_backward);
}

}  // namespace posenc::nn
