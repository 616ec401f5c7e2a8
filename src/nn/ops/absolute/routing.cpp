// The routing ops behind posenc.absolute: every absolute kind under one name.
// The parameter-only kinds go to absolute_table(_range) (CPU); "learned" to
// learned(table, positions) and "learnable-sinusoidal" to
// learnable_sinusoidal(positions, omega), through the dispatcher, so they stay
// differentiable: hence CompositeImplicitAutograd.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <string>
#include <vector>

#include "dispatch.h"
#include "op_support.h"
#include "posenc/kernels/absolute.h"

namespace posenc::nn {
namespace {

using detail::given;

constexpr const char* kOp = "absolute";
constexpr std::string_view kLearned = "learned";
constexpr std::string_view kLearnable = "learnable-sinusoidal";

std::vector<std::string> absolute_kinds() {
  std::vector<std::string> names;
  for (const kernels::AbsoluteKindInfo& info : kernels::absolute_kinds()) names.emplace_back(info.name);
  names.emplace_back(kLearned);
  names.emplace_back(kLearnable);
  return names;
}

void check_kind(std::string_view kind) {
  const std::vector<std::string> names = absolute_kinds();
  std::string known;
  for (const std::string& name : names) {
    if (name == kind) return;
    known += known.empty() ? "" : ", ";
    known += name;
  }
  TORCH_CHECK_VALUE(false, "[", kOp, "] kind must be one of ", known, ", got '", kind, "'");
}

// Shared by absolute and absolute_range once positions exist. dtype None keeps
// the table's / omega's dtype for the tensor kinds.
at::Tensor tensor_kind(std::string_view kind, const at::Tensor& positions, int64_t dim, double base, double scale,
                       c10::string_view layout, c10::optional<at::ScalarType> dtype,
                       const c10::optional<at::Tensor>& table, const c10::optional<at::Tensor>& omega) {
  at::Tensor out;
  if (kind == kLearned) {
    TORCH_CHECK_VALUE(!given(omega), "[", kOp, "] omega is only used by kind 'learnable-sinusoidal', got kind '",
                      kind, "'");
    TORCH_CHECK_VALUE(given(table), "[", kOp, "] kind 'learned' needs a table of shape [rows, dim], got None");
    TORCH_CHECK_VALUE(table->dim() == 2 && table->size(1) == dim, "[", kOp, "] table must have shape [rows, ", dim,
                      "] for dim ", dim, ", got ", table->sizes());
    out = dispatch::learned(*table, positions);
  } else {
    TORCH_CHECK_VALUE(!given(table), "[", kOp, "] table is only used by kind 'learned', got kind '", kind, "'");
    const at::Tensor w = given(omega) ? *omega
                                      : dispatch::sinusoidal_frequencies(dim, base)
                                            .to(detail::output_dtype(kOp, dtype));
    TORCH_CHECK_VALUE(w.dim() == 1 && 2 * w.size(0) == dim, "[", kOp, "] omega must have shape [dim/2] = [",
                      dim / 2, "] for dim ", dim, ", got ", w.sizes());
    out = dispatch::learnable_sinusoidal(positions, w, layout, scale);
  }
  return dtype.has_value() ? out.to(detail::output_dtype(kOp, dtype)) : out;
}

at::Tensor absolute(c10::string_view kind, const at::Tensor& positions, int64_t dim, double base, double scale,
                    c10::string_view layout, c10::string_view precision, int64_t length,
                    c10::optional<at::ScalarType> dtype, const c10::optional<at::Tensor>& table,
                    const c10::optional<at::Tensor>& omega) {
  const std::string_view name = detail::to_std(kind);
  check_kind(name);
  if (name == kLearned || name == kLearnable) {
    return tensor_kind(name, positions, dim, base, scale, layout, dtype, table, omega);
  }
  TORCH_CHECK_VALUE(!given(table) && !given(omega), "[", kOp, "] table and omega are only used by kinds 'learned' ",
                    "and 'learnable-sinusoidal', got kind '", name, "'");
  return dispatch::absolute_table(kind, positions, dim, base, scale, layout, precision, length, dtype);
}

at::Tensor absolute_range(c10::string_view kind, int64_t start, int64_t count, int64_t dim, double base,
                          double scale, c10::string_view layout, c10::string_view precision, int64_t length,
                          c10::optional<at::ScalarType> dtype, const c10::optional<at::Tensor>& table,
                          const c10::optional<at::Tensor>& omega) {
  const std::string_view name = detail::to_std(kind);
  check_kind(name);
  if (name == kLearned || name == kLearnable) {
    const at::Tensor positions = detail::range_positions(std::string(name).c_str(), start, count);
    return tensor_kind(name, positions, dim, base, scale, layout, dtype, table, omega);
  }
  TORCH_CHECK_VALUE(!given(table) && !given(omega), "[", kOp, "] table and omega are only used by kinds 'learned' ",
                    "and 'learnable-sinusoidal', got kind '", name, "'");
  return dispatch::absolute_table_range(kind, start, count, dim, base, scale, layout, precision, length, dtype);
}

}  // namespace

TORCH_LIBRARY_IMPL(posenc, CompositeImplicitAutograd, m) {
  m.impl("absolute", absolute);
  m.impl("absolute_range", absolute_range);
  m.impl("absolute_kinds", absolute_kinds);
}

}  // namespace posenc::nn
