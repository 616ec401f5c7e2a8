// Private helpers shared by the op kernels and the modules of posenc::nn:
// turning the kernels' exceptions into torch's, checking tensor arguments,
// and allocating an output in a compute dtype the kernels support.
#pragma once

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/kernels/positions.h"
#include "posenc/nn/torch_errors.h"

namespace posenc::nn::detail {

using posenc::nn::translate_errors;

// An optional tensor argument that was passed (not None, not undefined).
inline bool given(const c10::optional<at::Tensor>& t) noexcept { return t.has_value() && t->defined(); }

// The tensor of an optional argument, or an undefined tensor.
inline at::Tensor value_of(const c10::optional<at::Tensor>& t) { return given(t) ? *t : at::Tensor(); }

// False for a tensor whose values a tracer holds back (torch 2's fake and functional tensors under
// torch.compile / torch.export, meta tensors): code that reads values (checks, a table's length) takes
// its shape-only path there, and the traced op reads them when the graph runs.
inline bool holds_data(const at::Tensor& t) {
  return !t.is_meta() && !t.unsafeGetTensorImpl()->is_python_dispatch();
}

// t (B, H, rows, cols) in `compute` with unit column stride, as the kernels'
// BatchedMatrix wants: a view when it already is one, else a copy (a stride-0
// column, an expanded gradient, is copied).
inline at::Tensor kernel_view(const at::Tensor& t, at::ScalarType compute) {
  const at::Tensor c = t.to(compute);
  return c.stride(3) == 1 || c.size(3) <= 1 ? c : c.contiguous();
}

inline std::string_view to_std(c10::string_view s) noexcept { return {s.data(), s.size()}; }

// The dtype's Python name (torch.float32 -> "float32"), as messages write it.
inline std::string dtype_name(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return "float32";
    case at::kDouble: return "float64";
    case at::kBFloat16: return "bfloat16";
    case at::kHalf: return "float16";
    default: return c10::toString(t);
  }
}

// "(1, 8, 16)": sizes as the messages spell them; "*" for -1 (any extent).
inline std::string tuple_of(at::IntArrayRef sizes) {
  std::string s = "(";
  for (size_t i = 0; i < sizes.size(); ++i) {
    s += i ? ", " : "";
    s += sizes[i] < 0 ? "*" : std::to_string(sizes[i]);
  }
  return s + ")";
}

inline bool is_float_dtype(at::ScalarType t) noexcept {
  return t == at::kFloat || t == at::kDouble || t == at::kBFloat16 || t == at::kHalf;
}

// The dtype the kernels compute in for an output (or input) dtype: double for
// float64, float for float32, bfloat16 and float16 (rounded once at the end).
inline at::ScalarType compute_dtype(at::ScalarType t) noexcept {
  return t == at::kDouble ? at::kDouble : at::kFloat;
}

// Resolves an optional output dtype (default float32) and checks it is one of
// the four floating dtypes.
inline at::ScalarType output_dtype(std::string_view op, c10::optional<at::ScalarType> dtype) {
  const at::ScalarType t = dtype.value_or(at::kFloat);
  TORCH_CHECK_TYPE(is_float_dtype(t), "[", op, "] dtype must be one of float32, float64, bfloat16, float16, got ",
                   t);
  return t;
}

// A floating tensor argument (omega, table, grad_out) on the CPU.
inline void check_float_tensor(std::string_view op, std::string_view name, const at::Tensor& t) {
  TORCH_CHECK_VALUE(t.defined(), "[", op, "] ", name, " must be a tensor, got None");
  TORCH_CHECK_TYPE(is_float_dtype(t.scalar_type()), "[", op, "] ", name,
                   " must be float32, float64, bfloat16 or float16, got ", t.scalar_type());
  TORCH_CHECK_VALUE(t.device().is_cpu(), "[", op, "] ", name, " must be on the CPU, got ", t.device());
}

// Positions are signed integers: bool and uint8 (torch's old mask type, which
// wraps at 256) are refused rather than read as positions.
inline bool is_position_dtype(at::ScalarType t) noexcept {
  return at::isIntegralType(t, /*includeBool=*/false) && t != at::kByte;
}
inline constexpr const char* kPositionDtypes = "a signed integer tensor (int64, int32, int16 or int8)";

// Positions as a contiguous int64 CPU tensor (any signed integer dtype is widened).
inline at::Tensor int64_positions(std::string_view op, const at::Tensor& positions) {
  TORCH_CHECK_VALUE(positions.defined(), "[", op, "] positions must be a tensor, got None");
  TORCH_CHECK_TYPE(is_position_dtype(positions.scalar_type()), "[", op, "] positions must be ", kPositionDtypes,
                   ", got ", positions.scalar_type());
  TORCH_CHECK_VALUE(positions.device().is_cpu(), "[", op, "] positions must be on the CPU, got ",
                    positions.device());
  return positions.to(at::kLong).contiguous();
}

// positions: contiguous int64, as made by int64_positions.
inline kernels::Positions as_positions(const at::Tensor& positions) noexcept {
  return kernels::Positions::list({positions.data_ptr<int64_t>(), static_cast<size_t>(positions.numel())});
}

template <class T>
std::span<T> span_of(const at::Tensor& t) {
  return {t.data_ptr<T>(), static_cast<size_t>(t.numel())};
}
template <class T>
std::span<const T> const_span_of(const at::Tensor& t) {
  return {t.data_ptr<T>(), static_cast<size_t>(t.numel())};
}

// Sizes of a table over positions of shape S: S + [dim].
inline std::vector<int64_t> table_sizes(at::IntArrayRef positions_shape, int64_t dim) {
  std::vector<int64_t> sizes(positions_shape.begin(), positions_shape.end());
  sizes.push_back(dim);
  return sizes;
}

// Whether the kernels may fill a table of these sizes: every extent >= 0 and
// at most kernels::kMaxTableValues values in all.
inline bool allocatable(at::IntArrayRef sizes) noexcept {
  int64_t total = 1;
  for (int64_t s : sizes) {
    if (s < 0 || (s != 0 && total > kernels::kMaxTableValues / s)) return false;
    total *= s;
  }
  return true;
}

// Allocates `sizes` as T (float or double) and calls fill(std::span<T>)
// inside translate_errors. Impossible sizes (a negative count, a huge dim) get
// an empty buffer instead, so the kernel rejects the bad argument in its own words.
template <class T, class Fill>
at::Tensor make_table_as(at::IntArrayRef sizes, Fill&& fill) {
  const bool ok = allocatable(sizes);
  const std::vector<int64_t> nothing{0};
  at::Tensor out = at::empty(ok ? sizes : at::IntArrayRef(nothing), at::TensorOptions().dtype<T>());
  translate_errors([&] { fill(span_of<T>(out)); });
  TORCH_INTERNAL_ASSERT(ok, "a kernel accepted the impossible table sizes ", sizes);
  return out;
}

// make_table_as<float> or <double> by `compute`; fill takes either span.
template <class Fill>
at::Tensor make_table(at::IntArrayRef sizes, at::ScalarType compute, Fill&& fill) {
  TORCH_INTERNAL_ASSERT(compute == at::kFloat || compute == at::kDouble);
  return compute == at::kDouble ? make_table_as<double>(sizes, fill) : make_table_as<float>(sizes, fill);
}

// Positions start .. start+count-1 as an int64 tensor, once the kernels accept
// the count ("[op] positions must be at least 1, got 0").
inline at::Tensor range_positions(const char* op, int64_t start, int64_t count) {
  translate_errors([&] { kernels::validate_table_size(op, kernels::Positions::range(start, count), 1); });
  return at::arange(start, start + count, at::TensorOptions().dtype(at::kLong));
}

}  // namespace posenc::nn::detail
