#include "posenc/io/npy.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>

#include "file.h"
#include "npy_header.h"

namespace posenc::io {
namespace {

static_assert(std::endian::native == std::endian::little, "posenc::io reads and writes little-endian .npy data as is");

constexpr std::string_view kMagic("\x93NUMPY", 6);
constexpr int64_t kAlignment = 64;  // as numpy: the data starts at a multiple of 64 bytes

// Decodes a .npy file of `size` bytes; read_at(offset, span) fills the span.
template <class ReadAt>
NpyArray decode(int64_t size, const ReadAt& read_at, std::string_view file) {
  std::array<char, 12> preamble{};
  const int64_t available = std::min<int64_t>(size, static_cast<int64_t>(preamble.size()));
  read_at(0, std::as_writable_bytes(std::span(preamble).first(static_cast<size_t>(available))));
  const std::string_view head(preamble.data(), static_cast<size_t>(available));
  if (head.substr(0, kMagic.size()) != kMagic) {
    detail::fail_file(file, "not a .npy file: it must start with \\x93NUMPY, got '",
                      detail::printable(head.substr(0, kMagic.size())), "'");
  }
  if (available < 8) detail::fail_file(file, "file ends inside the preamble, after ", size, " bytes");
  const int major = static_cast<unsigned char>(preamble[6]);
  const int minor = static_cast<unsigned char>(preamble[7]);
  if (major < 1 || major > 3 || minor != 0) {
    detail::fail_file(file, "format version must be 1.0, 2.0 or 3.0, got ", major, ".", minor);
  }
  // 1.0: uint16 header length; 2.0 and 3.0: uint32 (3.0 only allows UTF-8 in the dict).
  const int64_t length_bytes = major == 1 ? 2 : 4;
  const int64_t header_begin = 8 + length_bytes;
  if (size < header_begin) detail::fail_file(file, "file ends inside the preamble, after ", size, " bytes");
  int64_t header_length = 0;
  for (int64_t i = length_bytes - 1; i >= 0; --i) {
    header_length = header_length << 8 | static_cast<unsigned char>(preamble[8 + i]);
  }
  if (header_length > kMaxNpyHeaderBytes) {
    detail::fail_file(file, "header length must be at most ", kMaxNpyHeaderBytes, " bytes, got ", header_length);
  }
  if (header_length > size - header_begin) {
    detail::fail_file(file, "header of ", header_length, " bytes runs past the end of the file (", size - header_begin,
                      " bytes follow the preamble)");
  }
  std::string text(static_cast<size_t>(header_length), '\0');
  read_at(header_begin, std::as_writable_bytes(std::span(text)));
  const detail::NpyHeader header = detail::parse_npy_header(text, file);

  const int64_t count = header.count;
  const int64_t expected_bytes = count * detail::dtype_size(header.dtype);
  const int64_t data_begin = header_begin + header_length;
  if (size - data_begin != expected_bytes) {
    detail::fail_file(file, "header declares ", count, " ", dtype_name(header.dtype), " values (", expected_bytes,
                      " bytes) but the data holds ", size - data_begin, " bytes");
  }
  NpyArray array;
  array.shape = header.shape;
  switch (header.dtype) {
    case DType::kFloat32:
      array.data = std::vector<float>(static_cast<size_t>(count));
      break;
    case DType::kFloat64:
      array.data = std::vector<double>(static_cast<size_t>(count));
      break;
    case DType::kInt64:
      array.data = std::vector<int64_t>(static_cast<size_t>(count));
      break;
  }
  std::visit([&](auto& values) { read_at(data_begin, std::as_writable_bytes(std::span(values))); }, array.data);
  return array;
}

template <class T>
void write_values(const std::string& path, std::span<const T> data, const std::vector<int64_t>& shape) {
  constexpr DType dtype = dtype_of<T>();
  const int64_t count = detail::checked_count(shape, dtype, path);
  require(count == static_cast<int64_t>(data.size()), "npy", path, ": shape ", detail::shape_repr(shape), " holds ",
          count, " values, got ", data.size());
  std::string dict = detail::npy_header_dict(dtype, shape);
  // Version 1.0 unless the header length does not fit its uint16.
  int64_t preamble = 10;
  auto padded = [&] {
    return (preamble + static_cast<int64_t>(dict.size()) + 1 + kAlignment - 1) / kAlignment * kAlignment;
  };
  if (padded() - preamble > 0xffff) preamble = 12;
  const int64_t header_length = padded() - preamble;

  std::string head(kMagic);
  head += static_cast<char>(preamble == 10 ? 1 : 2);
  head += '\0';
  for (int64_t i = 0; i < preamble - 8; ++i) head += static_cast<char>((header_length >> (8 * i)) & 0xff);
  head += dict;
  head.append(static_cast<size_t>(header_length) - dict.size() - 1, ' ');
  head += '\n';

  detail::AtomicOutputFile out("npy", path);
  out.write(head);
  out.write(std::as_bytes(data));
  out.commit();
}

}  // namespace

std::string_view dtype_name(DType dtype) noexcept {
  switch (dtype) {
    case DType::kFloat32:
      return "float32";
    case DType::kFloat64:
      return "float64";
    case DType::kInt64:
      return "int64";
  }
  return "?";
}

NpyArray read_npy(const std::string& path) {
  const detail::InputFile in("npy", path);
  return decode(
      in.size(), [&](int64_t offset, std::span<std::byte> out) { in.read_at(offset, out); }, path);
}

NpyArray parse_npy(std::span<const std::byte> bytes, std::string_view name) {
  auto read_at = [&](int64_t offset, std::span<std::byte> out) {
    std::copy_n(bytes.begin() + offset, out.size(), out.begin());
  };
  return decode(static_cast<int64_t>(bytes.size()), read_at, name);
}

void write_npy(const std::string& path, std::span<const float> data, const std::vector<int64_t>& shape) {
  write_values(path, data, shape);
}
void write_npy(const std::string& path, std::span<const double> data, const std::vector<int64_t>& shape) {
  write_values(path, data, shape);
}
void write_npy(const std::string& path, std::span<const int64_t> data, const std::vector<int64_t>& shape) {
  write_values(path, data, shape);
}
void write_npy(const std::string& path, const NpyArray& array) {
  std::visit([&](const auto& values) { write_values(path, std::span(values.data(), values.size()), array.shape); },
             array.data);
}

}  // namespace posenc::io
