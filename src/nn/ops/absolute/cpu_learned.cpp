// CPU kernels of learned and its backward (kernels/learned.h). A
// bfloat16 / float16 table is gathered through float32 (exact either way);
// the backward accumulates in float32 and rounds once.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>

#include "op_support.h"
#include "posenc/kernels/learned.h"

namespace posenc::nn {
namespace {

constexpr const char* kOp = "learned";

// table: [rows, dim], positions: S (integers in [0, rows)) -> S + [dim], table's dtype
at::Tensor learned(const at::Tensor& table, const at::Tensor& positions) {
  detail::check_float_tensor(kOp, "table", table);
  TORCH_CHECK_VALUE(table.dim() == 2, "[", kOp, "] table must be 2-D [rows, dim], got shape ", table.sizes());
  const at::Tensor p = detail::int64_positions(kOp, positions);
  const at::ScalarType compute = detail::compute_dtype(table.scalar_type());
  const at::Tensor t = table.to(compute).contiguous();
  return detail::make_table(detail::table_sizes(p.sizes(), t.size(1)), compute,
                            [&](auto out) {
                              using T = typename decltype(out)::element_type;
                              kernels::learned_forward(detail::const_span_of<T>(t), t.size(0), t.size(1),
                                                       detail::const_span_of<int64_t>(p), out);
                            })
      .to(table.scalar_type());
}

// grad_out: S + [dim], positions: S -> grad_table [rows, dim], grad_out's dtype
at::Tensor learned_backward(const at::Tensor& grad_out, const at::Tensor& positions, int64_t rows) {
  detail::check_float_tensor(kOp, "grad_out", grad_out);
  const at::Tensor p = detail::int64_positions(kOp, positions);
  TORCH_CHECK_VALUE(grad_out.dim() == p.dim() + 1 && grad_out.sizes().slice(0, p.dim()) == p.sizes(), "[", kOp,
                    "] grad_out must have shape positions.shape + [dim] = ", p.sizes(), " + [dim], got ",
                    grad_out.sizes());
  const int64_t dim = grad_out.size(-1);
  const at::ScalarType compute = detail::compute_dtype(grad_out.scalar_type());
  const at::Tensor g = grad_out.to(compute).contiguous();
  return detail::make_table({rows, dim}, compute,
                            [&](auto grad_table) {
                              using T = typename decltype(grad_table)::element_type;
                              std::fill(grad_table.begin(), grad_table.end(), T{0});
                              kernels::learned_backward(detail::const_span_of<T>(g),
                                                        detail::const_span_of<int64_t>(p), rows, dim, grad_table);
                            })
      .to(grad_out.scalar_type());
}

}  // namespace

TORCH_LIBRARY_IMPL(posenc, CPU, m) {
  m.impl("learned", learned);
  m.impl("learned_backward", learned_backward);
}

}  // namespace posenc::nn
