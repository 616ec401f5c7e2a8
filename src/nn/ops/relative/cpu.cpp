// CPU kernels of the relative-vector ops (kernels/relative.h, relative_2d.h):
// relative_logits, relative_values, relative_table_grad and the 2D pair
// relative_2d_expand / relative_2d_reduce. The torch layer checks ranks,
// dtypes and devices; the kernels check the values and the sizes against one
// another, in their own words, with the op's name. float32 / float64 views
// whose last dimension has unit stride go to the kernels as they are (a
// transposed (B, T, H, D) projection needs no copy); 16-bit inputs are
// computed in float32 and the result is rounded once.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include "op_support.h"
#include "posenc/kernels/relative.h"
#include "posenc/kernels/relative_2d.h"

namespace posenc::nn {
namespace {

using detail::dtype_name;

using kernels::BatchedMatrix;
using kernels::RelativeTable;
using detail::kernel_view;
using detail::tuple_of;

// A floating (B, H, rows, cols) tensor on the CPU; `shape` spells its dimensions.
void check_4d(const char* op, const char* name, const char* shape, const at::Tensor& t) {
  detail::check_float_tensor(op, name, t);
  TORCH_CHECK_VALUE(t.dim() == 4, "[", op, "] ", name, " must be 4-D ", shape, ", got ", t.dim(), "-D");
}

// `t` must share the dtype of `like` (TypeError) and be on the CPU.
void check_like(const char* op, const char* name, const at::Tensor& t, const char* like_name, const at::Tensor& like) {
  const bool plural = std::string_view(like_name).ends_with('s');  // "probs' dtype", "q's dtype"
  TORCH_CHECK_TYPE(t.scalar_type() == like.scalar_type(), "[", op, "] ", name, " must have ", like_name,
                   plural ? "'" : "'s", " dtype (", dtype_name(like.scalar_type()), "), got ",
                   dtype_name(t.scalar_type()));
  TORCH_CHECK_VALUE(t.device().is_cpu(), "[", op, "] ", name, " must be on the CPU, got ", t.device());
}

void check_table(const char* op, const at::Tensor& table, const char* like_name, const at::Tensor& like) {
  TORCH_CHECK_VALUE(table.dim() == 2 || table.dim() == 3, "[", op,
                    "] table must be 2-D [2k+1, Dh] or 3-D [H, 2k+1, Dh], got ", table.dim(), "-D");
  check_like(op, "table", table, like_name, like);
}

template <class T>
BatchedMatrix<T> matrix_of(const at::Tensor& t) {
  using U = std::remove_const_t<T>;
  return {t.data_ptr<U>(), t.size(0), t.size(1), t.size(2), t.size(3), t.stride(0), t.stride(1), t.stride(2)};
}

// A contiguous [2k+1, Dh] (one shared table) or [tables, 2k+1, Dh].
template <class T>
RelativeTable<T> table_of(const at::Tensor& t) {
  using U = std::remove_const_t<T>;
  return {t.data_ptr<U>(), t.dim() == 3 ? t.size(0) : 1, t.size(-2), t.size(-1)};
}

// Calls body(T{}) with T = float or double by `compute`, kernel errors translated.
template <class Body>
void with_compute(at::ScalarType compute, Body&& body) {
  TORCH_INTERNAL_ASSERT(compute == at::kFloat || compute == at::kDouble);
  detail::translate_errors([&] { compute == at::kDouble ? body(double{}) : body(float{}); });
}

// q: (B, H, Tq, Dh), table: [2k+1, Dh] | [H, 2k+1, Dh] -> (B, H, Tq, Tk), q's dtype
at::Tensor relative_logits(const at::Tensor& q, const at::Tensor& table, int64_t max_distance,
                           c10::optional<int64_t> k_len, int64_t query_offset) {
  constexpr const char* kOp = "relative_logits";
  check_4d(kOp, "q", "(B, H, Tq, Dh)", q);
  check_table(kOp, table, "q", q);
  const int64_t keys = k_len.value_or(q.size(2));
  TORCH_CHECK_VALUE(keys >= 0, "[", kOp, "] k_len must be >= 0, got ", keys);
  const at::ScalarType compute = detail::compute_dtype(q.scalar_type());
  const at::Tensor qc = kernel_view(q, compute);
  const at::Tensor tc = table.to(compute).contiguous();
  at::Tensor out = at::empty({q.size(0), q.size(1), q.size(2), keys}, q.options().dtype(compute));
  const kernels::RelativeParams params{max_distance, query_offset};
  with_compute(compute, [&](auto tag) {
    using T = decltype(tag);
    kernels::relative_logits<T>(params, matrix_of<const T>(qc), table_of<const T>(tc), matrix_of<T>(out), kOp);
  });
  return out.to(q.scalar_type());
}

// probs: (B, H, Tq, Tk), table: [2k+1, Dh] | [H, 2k+1, Dh] -> (B, H, Tq, Dh), probs' dtype
at::Tensor relative_values(const at::Tensor& probs, const at::Tensor& table, int64_t max_distance,
                           int64_t query_offset) {
  constexpr const char* kOp = "relative_values";
  check_4d(kOp, "probs", "(B, H, Tq, Tk)", probs);
  check_table(kOp, table, "probs", probs);
  const at::ScalarType compute = detail::compute_dtype(probs.scalar_type());
  const at::Tensor pc = kernel_view(probs, compute);
  const at::Tensor tc = table.to(compute).contiguous();
  at::Tensor out =
      at::empty({probs.size(0), probs.size(1), probs.size(2), table.size(-1)}, probs.options().dtype(compute));
  const kernels::RelativeParams params{max_distance, query_offset};
  with_compute(compute, [&](auto tag) {
    using T = decltype(tag);
    kernels::relative_values<T>(params, matrix_of<const T>(pc), table_of<const T>(tc), matrix_of<T>(out), kOp);
  });
  return out.to(probs.scalar_type());
}

// weights: (B, H, Tq, Tk), x: (B, H, Tq, Dh) -> [tables, 2k+1, Dh], weights' dtype
at::Tensor relative_table_grad(const at::Tensor& weights, const at::Tensor& x, int64_t max_distance, int64_t tables,
                               int64_t query_offset) {
  constexpr const char* kOp = "relative_table_grad";
  check_4d(kOp, "weights", "(B, H, Tq, Tk)", weights);
  check_4d(kOp, "x", "(B, H, Tq, Dh)", x);
  check_like(kOp, "x", x, "weights", weights);
  const kernels::RelativeParams params{max_distance, query_offset};
  const int64_t heads = weights.size(1), dim = x.size(3);
  // The gradient's sizes come from the arguments: the kernels vet them before
  // anything is allocated (2k+1 computed only where it cannot overflow).
  const int64_t rows = max_distance >= 0 && max_distance < (int64_t{1} << 61) ? 2 * max_distance + 1 : 0;
  detail::translate_errors([&] { kernels::validate_relative(kOp, params, tables, rows, dim, heads, dim); });
  const at::ScalarType compute = detail::compute_dtype(weights.scalar_type());
  const at::Tensor wc = kernel_view(weights, compute);
  const at::Tensor xc = kernel_view(x, compute);
  at::Tensor grad = at::empty({tables, rows, dim}, weights.options().dtype(compute));
  with_compute(compute, [&](auto tag) {
    using T = decltype(tag);
    kernels::relative_table_grad<T>(params, matrix_of<const T>(wc), matrix_of<const T>(xc), table_of<T>(grad),
                                    kOp);
  });
  return grad.to(weights.scalar_type());
}

// Whether height x width is a grid of `rows` cells (no overflow on the way).
bool grid_of(int64_t height, int64_t width, int64_t rows) {
  return height >= 1 && width >= 1 && height <= rows && rows % height == 0 && rows / height == width;
}

// rel_h: (B, H, HW, 2*height-1), rel_w: (B, H, HW, 2*width-1) -> (B, H, HW, HW), rel_h's dtype
at::Tensor relative_2d_expand(const at::Tensor& rel_h, const at::Tensor& rel_w, int64_t height, int64_t width) {
  constexpr const char* kOp = "relative_2d_expand";
  check_4d(kOp, "rel_h", "(B, H, HW, 2*height-1)", rel_h);
  check_4d(kOp, "rel_w", "(B, H, HW, 2*width-1)", rel_w);
  check_like(kOp, "rel_w", rel_w, "rel_h", rel_h);
  const int64_t cells = rel_h.size(2);
  // A grid that does not match rel_h gets an empty output, so the kernel
  // rejects the arguments in its own words before (B, H, HW, HW) is allocated.
  const bool ok = grid_of(height, width, cells);
  const at::ScalarType compute = detail::compute_dtype(rel_h.scalar_type());
  const at::Tensor hc = kernel_view(rel_h, compute);
  const at::Tensor wc = kernel_view(rel_w, compute);
  at::Tensor out = at::empty({rel_h.size(0), rel_h.size(1), ok ? cells : 0, ok ? cells : 0},
                             rel_h.options().dtype(compute));
  with_compute(compute, [&](auto tag) {
    using T = decltype(tag);
    kernels::relative_2d_expand<T>({height, width}, matrix_of<const T>(hc), matrix_of<const T>(wc),
                                   matrix_of<T>(out), kOp);
  });
  TORCH_INTERNAL_ASSERT(ok, "relative_2d_expand accepted a ", height, "x", width, " grid for ", cells, " rows");
  return out.to(rel_h.scalar_type());
}

// grad: (B, H, HW, HW) -> rel_h (B, H, HW, 2*height-1), rel_w (B, H, HW, 2*width-1), grad's dtype
std::tuple<at::Tensor, at::Tensor> relative_2d_reduce(const at::Tensor& grad, int64_t height, int64_t width) {
  constexpr const char* kOp = "relative_2d_reduce";
  check_4d(kOp, "grad", "(B, H, HW, HW)", grad);
  const int64_t cells = grad.size(2);
  int64_t hw = 0;
  if (height >= 1 && width >= 1 && !__builtin_mul_overflow(height, width, &hw)) {
    // grad is the one input here: its shape is this layer's to check (the kernel sees only views we allocate).
    TORCH_CHECK_VALUE(cells == hw && grad.size(3) == hw, "[", kOp, "] grad must be (B, H, HW, HW) = ",
                      tuple_of({grad.size(0), grad.size(1), hw, hw}), ", got ", tuple_of(grad.sizes()));
  }
  // Otherwise (a bad grid) empty outputs, so the kernel rejects height or width in its own words.
  const bool ok = grid_of(height, width, cells) && grad.size(3) == cells;
  const at::ScalarType compute = detail::compute_dtype(grad.scalar_type());
  const at::Tensor gc = kernel_view(grad, compute);
  const auto options = grad.options().dtype(compute);
  at::Tensor rel_h = at::empty({grad.size(0), grad.size(1), ok ? cells : 0, ok ? 2 * height - 1 : 0}, options);
  at::Tensor rel_w = at::empty({grad.size(0), grad.size(1), ok ? cells : 0, ok ? 2 * width - 1 : 0}, options);
  with_compute(compute, [&](auto tag) {
    using T = decltype(tag);
    kernels::relative_2d_reduce<T>({height, width}, matrix_of<const T>(gc), matrix_of<T>(rel_h), matrix_of<T>(rel_w),
                                   kOp);
  });
  TORCH_INTERNAL_ASSERT(ok, "relative_2d_reduce accepted a ", height, "x", width, " grid for ", grad.sizes());
  return {rel_h.to(grad.scalar_type()), rel_w.to(grad.scalar_type())};
}

}  // namespace

TORCH_LIBRARY_IMPL(posenc, CPU, m) {
  m.impl("relative_logits", relative_logits);
  m.impl("relative_values", relative_values);
  m.impl("relative_table_grad", relative_table_grad);
  m.impl("relative_2d_expand", relative_2d_expand);
  m.impl("relative_2d_reduce", relative_2d_reduce);
}

}  // namespace posenc::nn
