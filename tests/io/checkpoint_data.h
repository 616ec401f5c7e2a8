// The files of tests/io/data, written by make_checkpoint_files.py (numpy's
// np.save, and .safetensors assembled from the format's definition), and the
// generator's value formula restated here on its own.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/io/tensor_file.h"

namespace posenc::io::testing {

inline std::string data_file(std::string_view name) { return std::string(POSENC_IO_TEST_DATA) + "/" + std::string(name); }

// Element i of the generator's tensor with seed s:
//   k = (37 i + 11 s) mod 201; unsigned: k; signed: k - 100; floats: (k - 100) / 8; bool: k mod 3 == 0.
inline double formula_value(ElementType type, int64_t i, int64_t seed) {
  const int64_t k = (37 * i + 11 * seed) % 201;
  switch (type) {
    case ElementType::kBool:
      return k % 3 == 0 ? 1.0 : 0.0;
    case ElementType::kUInt8:
    case ElementType::kUInt16:
    case ElementType::kUInt32:
    case ElementType::kUInt64:
      return static_cast<double>(k);
    case ElementType::kInt8:
    case ElementType::kInt16:
    case ElementType::kInt32:
    case ElementType::kInt64:
      return static_cast<double>(k - 100);
    default:
      return static_cast<double>(k - 100) / 8.0;
  }
}

inline std::vector<double> formula_values(ElementType type, int64_t count, int64_t seed) {
  std::vector<double> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) v[static_cast<size_t>(i)] = formula_value(type, i, seed);
  return v;
}

// numpy type codes in the generator's order (its seed is the index), with their element types.
struct TypeCode {
  const char* code;
  ElementType type;
};
inline constexpr TypeCode kTypeCodes[] = {
    {"b1", ElementType::kBool},    {"u1", ElementType::kUInt8},   {"i1", ElementType::kInt8},
    {"u2", ElementType::kUInt16},  {"i2", ElementType::kInt16},   {"u4", ElementType::kUInt32},
    {"i4", ElementType::kInt32},   {"u8", ElementType::kUInt64},  {"i8", ElementType::kInt64},
    {"f2", ElementType::kFloat16}, {"f4", ElementType::kFloat32}, {"f8", ElementType::kFloat64},
};

}  // namespace posenc::io::testing
