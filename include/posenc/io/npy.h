// NumPy .npy files (format 1.0 / 2.0 / 3.0, numpy/lib/format.py): a strict
// reader of every numeric dtype and an atomic writer.
//
// File layout: "\x93NUMPY", major, minor, header length (uint16 LE for 1.0,
// uint32 LE for 2.0/3.0), then a Python dict literal (ASCII; UTF-8 in 3.0)
//   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
// padded with spaces and ended by '\n', then the raw values.
//
// The reader never evaluates the header: a small grammar accepts exactly the
// keys 'descr', 'fortran_order' and 'shape', each once. descr: b1, u1, i1,
// u2, i2, u4, i4, u8, i8, f2, f4, f8 after the byte order numpy writes ('<'
// little, '>' big, '=' native, '|' for 1-byte types); big-endian data is
// swapped to little-endian. Refused: headers over 10000 bytes, Fortran order,
// object (pickle), string, void, structured, complex and datetime dtypes, and
// data shorter or longer than the shape needs. The writer emits what numpy's
// np.save emits (format 1.0, or 2.0 when the header exceeds 65535 bytes; data
// at a multiple of 64 bytes) and replaces the target only once the whole file
// is written.
//
// Errors: std::invalid_argument for a malformed file or a bad argument,
// std::runtime_error for a well-formed but unsupported file (other dtype,
// Fortran order) and for I/O failures. Messages name the file:
//   "[npy] x.npy: header declares 12 float32 values (48 bytes) but the data holds 44 bytes".
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "posenc/error.h"
#include "posenc/io/tensor_file.h"

namespace posenc::io {

// The order matches the alternatives of NpyArray::data.
enum class DType { kFloat32, kFloat64, kInt64 };

// "float32" | "float64" | "int64".
std::string_view dtype_name(DType dtype) noexcept;

template <class T>
constexpr DType dtype_of() noexcept {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, int64_t>,
                "npy supports float, double and int64_t");
  if constexpr (std::is_same_v<T, float>)
    return DType::kFloat32;
  else if constexpr (std::is_same_v<T, double>)
    return DType::kFloat64;
  else
    return DType::kInt64;
}

// Largest header the reader accepts (numpy's own default limit).
inline constexpr int64_t kMaxNpyHeaderBytes = 10000;

struct NpyArray {
  std::vector<int64_t> shape;  // empty for a 0-d array (one value)
  std::variant<std::vector<float>, std::vector<double>, std::vector<int64_t>> data;  // C order

  DType dtype() const noexcept { return static_cast<DType>(data.index()); }
  // Number of values: the product of shape (1 for a 0-d array).
  int64_t size() const noexcept {
    return std::visit([](const auto& v) { return static_cast<int64_t>(v.size()); }, data);
  }
  // Throws "[npy] array holds float64 values, asked for float32" on a dtype mismatch.
  template <class T>
  const std::vector<T>& values() const {
    if (const auto* v = std::get_if<std::vector<T>>(&data)) return *v;
    fail_argument("npy", "array holds ", dtype_name(dtype()), " values, asked for ", dtype_name(dtype_of<T>()));
  }
};

// Reads and validates the file at `path`: any numeric dtype, as a
// StoredTensor (little-endian, C order). load_tensor (tensor_file.h) calls this.
StoredTensor read_npy_tensor(const std::string& path);
// Same for a file already in memory; `name` stands for the file in messages.
StoredTensor parse_npy_tensor(std::span<const std::byte> bytes, std::string_view name);

// The same reader, for float32, float64 and int64 files only (either byte
// order); other numeric dtypes throw std::runtime_error
//   "[npy] x.npy: holds uint8 values; read_npy returns float32, float64 or int64 arrays (...)".
NpyArray read_npy(const std::string& path);
NpyArray parse_npy(std::span<const std::byte> bytes, std::string_view name);

// Writes `data` (C order) with `shape`; the product of shape must equal
// data.size(). An empty shape writes a 0-d array (one value).
void write_npy(const std::string& path, std::span<const float> data, const std::vector<int64_t>& shape);
void write_npy(const std::string& path, std::span<const double> data, const std::vector<int64_t>& shape);
void write_npy(const std::string& path, std::span<const int64_t> data, const std::vector<int64_t>& shape);
void write_npy(const std::string& path, const NpyArray& array);
// Any element type but bfloat16 (numpy has none: std::runtime_error); the data
// must hold exactly numel * element_size bytes.
void write_npy(const std::string& path, const StoredTensor& tensor);
// The file's bytes, for tests and fuzz seeds.
std::vector<std::byte> serialize_npy(const StoredTensor& tensor);

}  // namespace posenc::io
