// The composite relative-vector ops, built from other ops through the
// dispatcher so autograd flows through them (CompositeImplicitAutograd):
//   relative_logits_2d         q (B, H, HW, Dh) -> (B, H, HW, HW): rel_h = q . table_h^T and
//                              rel_w = q . table_w^T (at::matmul), then relative_2d_expand.
//   sinusoidal_relative_table  [2k+1, dim], row r the sinusoid of offset r - k: the fixed table
//                              from sinusoidal over -k..k, or learnable_sinusoidal with omega.
// sinusoidal_relative_table may have no tensor argument at all; the dispatcher
// then runs the CompositeImplicitAutograd kernel for the Undefined key.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <cstdint>
#include <string>

#include "dispatch.h"
#include "op_support.h"
#include "posenc/kernels/positions.h"
#include "posenc/kernels/sinusoidal.h"

namespace posenc::nn {
namespace {

using detail::given;

using detail::dtype_name;

// table_h / table_w: [rows, Dh] or [H, rows, Dh] with rows = 2*extent-1, q's dtype, on the CPU.
void check_table_2d(const char* op, const char* name, const char* extent_name, int64_t extent,
                    const at::Tensor& table, const at::Tensor& q) {
  TORCH_CHECK_VALUE(table.dim() == 2 || table.dim() == 3, "[", op, "] ", name, " must be 2-D [2*", extent_name,
                    "-1, Dh] or 3-D [H, 2*", extent_name, "-1, Dh], got ", table.dim(), "-D");
  TORCH_CHECK_TYPE(table.scalar_type() == q.scalar_type(), "[", op, "] ", name, " must have q's dtype (",
                   dtype_name(q.scalar_type()), "), got ", dtype_name(table.scalar_type()));
  TORCH_CHECK_VALUE(table.device().is_cpu(), "[", op, "] ", name, " must be on the CPU, got ", table.device());
  TORCH_CHECK_VALUE(table.size(-2) == 2 * extent - 1, "[", op, "] ", name, " must have 2*", extent_name,
                    "-1 = ", 2 * extent - 1, " rows, got ", table.size(-2));
  TORCH_CHECK_VALUE(table.size(-1) == q.size(3), "[", op, "] ", name, " must have head_dim = ", q.size(3),
                    " columns, got ", table.size(-1));
  const int64_t tables = table.dim() == 3 ? table.size(0) : 1;
  TORCH_CHECK_VALUE(tables == 1 || tables == q.size(1), "[", op, "] ", name,
                    " must be shared (1 table) or one per head (", q.size(1), " tables), got ", tables);
}

// q (B, H, HW, Dh), table_h [2*height-1, Dh] | [H, ..], table_w [2*width-1, Dh] | [H, ..] -> (B, H, HW, HW)
at::Tensor relative_logits_2d(const at::Tensor& q, const at::Tensor& table_h, const at::Tensor& table_w,
                              int64_t height, int64_t width) {
  constexpr const char* kOp = "relative_logits_2d";
  detail::check_float_tensor(kOp, "q", q);
  TORCH_CHECK_VALUE(q.dim() == 4, "[", kOp, "] q must be 4-D (B, H, HW, Dh), got ", q.dim(), "-D");
  TORCH_CHECK_VALUE(height >= 1, "[", kOp, "] height must be >= 1, got ", height);
  TORCH_CHECK_VALUE(width >= 1, "[", kOp, "] width must be >= 1, got ", width);
  int64_t cells = 0;
  const bool overflow = __builtin_mul_overflow(height, width, &cells);
  TORCH_CHECK_VALUE(!overflow && q.size(2) == cells, "[", kOp, "] q must have height*width = ",
                    overflow ? std::to_string(height) + "*" + std::to_string(width) : std::to_string(cells),
                    " rows, got ", q.size(2));
  // height, width <= HW = q's rows from here, so 2*extent-1 cannot overflow.
  check_table_2d(kOp, "table_h", "height", height, table_h, q);
  check_table_2d(kOp, "table_w", "width", width, table_w, q);
  // The products in float32 (float64 for float64): a 16-bit input is converted first and the logits rounded once.
  const at::ScalarType compute = detail::compute_dtype(q.scalar_type());
  const at::Tensor qc = q.to(compute);
  const at::Tensor rel_h = at::matmul(qc, table_h.to(compute).transpose(-1, -2));  // (B, H, HW, 2*height-1)
  const at::Tensor rel_w = at::matmul(qc, table_w.to(compute).transpose(-1, -2));  // (B, H, HW, 2*width-1)
  return dispatch::relative_2d_expand(rel_h, rel_w, height, width).to(q.scalar_type());
}

// -> [2k+1, dim], row r the sinusoid of offset r - k (interleaved (sin, cos) by default)
at::Tensor sinusoidal_relative_table(int64_t max_distance, int64_t dim, double base,
                                     const c10::optional<at::Tensor>& omega, c10::string_view layout,
                                     c10::optional<at::ScalarType> dtype) {
  constexpr const char* kOp = "sinusoidal_relative_table";
  TORCH_CHECK_VALUE(max_distance >= 0, "[", kOp, "] max_distance must be >= 0, got ", max_distance);
  // 2k+1 saturates where it would overflow: such a table is refused by size anyway.
  const int64_t rows = max_distance < (int64_t{1} << 62) ? 2 * max_distance + 1 : INT64_MAX;
  detail::translate_errors([&] {
    // base only matters without omega; dim must be even and positive either way.
    kernels::SinusoidalParams params;
    params.dim = dim;
    if (!given(omega)) params.base = base;
    kernels::validate(params, kOp);
    kernels::parse_layout(detail::to_std(layout), kOp);
    kernels::validate_table_size(kOp, kernels::Positions::range(-max_distance, rows), dim);
  });
  if (dtype.has_value()) detail::output_dtype(kOp, dtype);
  const at::Tensor offsets = at::arange(-max_distance, max_distance + 1, at::TensorOptions().dtype(at::kLong));
  if (!given(omega)) {
    // Each offset evaluated on its own (not sinusoidal_range's rotation recurrence, which drifts
    // by ulps): the table is then exactly odd in the sine channels and row k is exactly [0, 1, ...].
    return dispatch::sinusoidal(offsets, dim, base, 1.0, layout, "exact", detail::output_dtype(kOp, dtype));
  }
  detail::check_float_tensor(kOp, "omega", *omega);
  TORCH_CHECK_VALUE(omega->dim() == 1 && 2 * omega->size(0) == dim, "[", kOp, "] omega must have shape [dim/2] = [",
                    dim / 2, "] for dim ", dim, ", got ", omega->sizes());
  const at::Tensor out = dispatch::learnable_sinusoidal(offsets, *omega, layout, 1.0);
  return dtype.has_value() ? out.to(*dtype) : out;
}

}  // namespace

TORCH_LIBRARY_IMPL(posenc, CompositeImplicitAutograd, m) {
  m.impl("relative_logits_2d", relative_logits_2d);
  m.impl("sinusoidal_relative_table", sinusoidal_relative_table);
}

}  // namespace posenc::nn
