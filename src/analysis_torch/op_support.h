// Private helpers of the analysis ops: tensors to and from the float64
// matrices of posenc::analysis, argument checks in the house style, and the
// translation of posenc's exceptions into torch's (Python ValueError /
// RuntimeError with the message unchanged).
#pragma once

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include "posenc/analysis/matrix.h"
#include "posenc/nn/torch_errors.h"

namespace posenc::analysis_torch {

using posenc::nn::translate_errors;

inline std::string_view to_std(c10::string_view s) noexcept { return {s.data(), s.size()}; }

// The dtype's Python name: torch.float32 -> "float32".
inline std::string dtype_name(at::ScalarType t) {
  switch (t) {
    case at::kBool: return "bool";
    case at::kByte: return "uint8";
    case at::kChar: return "int8";
    case at::kShort: return "int16";
    case at::kInt: return "int32";
    case at::kLong: return "int64";
    case at::kHalf: return "float16";
    case at::kBFloat16: return "bfloat16";
    case at::kFloat: return "float32";
    case at::kDouble: return "float64";
    case at::kComplexHalf: return "complex32";
    case at::kComplexFloat: return "complex64";
    case at::kComplexDouble: return "complex128";
    default: return c10::toString(t);
  }
}

// "(3,)", "(2, 4)", "()": a shape as Python prints it.
inline std::string shape_of(at::IntArrayRef sizes) {
  std::string s = "(";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + std::to_string(sizes[i]);
  return s + (sizes.size() == 1 ? ",)" : ")");
}

// Numbers only: integers and floating point. A bool table would be read as
// 0 / 1 silently; the caller says so with .float().
inline bool is_real_dtype(at::ScalarType t) noexcept {
  return !at::isComplexType(t) && !at::isQIntType(t) && t != at::ScalarType::Undefined && t != at::kBool;
}

// A 2-D real tensor (any dtype that converts exactly or by rounding to
// float64, any strides) as a float64 matrix; values are checked later by the
// analysis entry point (finite, non-empty, square).
//   "[proximity] table must be 2-D, got shape (3,)"
//   "[proximity] table must be a real tensor (integer or floating point; a bool one: convert it with .float()), got bool"
inline analysis::Matrix matrix_of(std::string_view op, std::string_view what, const at::Tensor& t) {
  TORCH_CHECK_VALUE(t.defined(), "[", op, "] ", what, " must be a tensor, got None");
  TORCH_CHECK_TYPE(is_real_dtype(t.scalar_type()), "[", op, "] ", what,
                   " must be a real tensor (integer or floating point; a bool one: convert it with .float()), got ",
                   dtype_name(t.scalar_type()));
  TORCH_CHECK_VALUE(t.dim() == 2, "[", op, "] ", what, " must be 2-D, got shape ", shape_of(t.sizes()));
  const at::Tensor d = t.detach().to(at::kCPU).to(at::kDouble).contiguous();
  analysis::Matrix m(d.size(0), d.size(1));
  const double* p = d.data_ptr<double>();
  std::copy(p, p + d.numel(), m.values.begin());
  return m;
}

// A float64 [rows, cols] tensor holding `m`.
inline at::Tensor tensor_of(const analysis::Matrix& m) {
  at::Tensor t = at::empty({m.rows, m.cols}, at::TensorOptions().dtype(at::kDouble));
  std::copy(m.values.begin(), m.values.end(), t.data_ptr<double>());
  return t;
}

}  // namespace posenc::analysis_torch
