#include "posenc/io/npy.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>

#include "file.h"
#include "npy_header.h"
#include "utf8.h"

namespace posenc::io {
namespace {

static_assert(std::endian::native == std::endian::little, "posenc::io keeps tensor data little-endian in memory");

constexpr std::string_view kMagic("\x93NUMPY", 6);
constexpr int64_t kAlignment = 64;  // as numpy: the data starts at a multiple of 64 bytes
// numpy >= 1.23 leaves room to grow shape[0] in place (format.py, GROWTH_AXIS_MAX_DIGITS).
constexpr int64_t kGrowthAxisMaxDigits = 21;

// Big-endian data to little-endian, in place: reverse each `width`-byte value.
void swap_bytes(std::span<std::byte> data, int64_t width) {
  for (size_t i = 0; i + static_cast<size_t>(width) <= data.size(); i += static_cast<size_t>(width)) {
    std::reverse(data.begin() + static_cast<std::ptrdiff_t>(i),
                 data.begin() + static_cast<std::ptrdiff_t>(i + static_cast<size_t>(width)));
  }
}

// Decodes a .npy file of `size` bytes; read_at(offset, span) fills the span.
// Nothing is allocated before the header is checked against `size`, and the
// data buffer only once its exact length matches what the file holds.
template <class ReadAt>
StoredTensor decode(int64_t size, const ReadAt& read_at, std::string_view file) {
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
  // 1.0: uint16 header length; 2.0 and 3.0: uint32 (3.0 allows UTF-8 in the dict).
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
  if (major == 3) {
    if (const auto bad = detail::find_utf8_error(text)) {
      detail::fail_file(file, "format 3.0 header is not valid UTF-8 at byte ", bad->offset, ": ", bad->what);
    }
  }
  const detail::NpyHeader header = detail::parse_npy_header(text, file, major == 3);

  const int64_t width = element_size(header.type);
  const int64_t expected_bytes = header.count * width;  // checked_count ruled out overflow
  const int64_t data_begin = header_begin + header_length;
  if (size - data_begin != expected_bytes) {
    detail::fail_file(file, "header declares ", header.count, " ", element_type_name(header.type), " values (",
                      expected_bytes, " bytes) but the data holds ", size - data_begin, " bytes");
  }
  StoredTensor tensor;
  tensor.type = header.type;
  tensor.shape = header.shape;
  tensor.data.resize(static_cast<size_t>(expected_bytes));
  read_at(data_begin, std::span(tensor.data));
  if (header.big_endian) swap_bytes(tensor.data, width);
  return tensor;
}

template <class T>
std::vector<T> values_of(const StoredTensor& tensor) {
  std::vector<T> values(tensor.data.size() / sizeof(T));
  // An empty vector's data() may be null, which memcpy must not see even for 0 bytes.
  if (!values.empty()) std::memcpy(values.data(), tensor.data.data(), values.size() * sizeof(T));
  return values;
}

// The legacy typed view: float32, float64 and int64 only.
NpyArray to_array(const StoredTensor& tensor, std::string_view file) {
  NpyArray array;
  array.shape = tensor.shape;
  switch (tensor.type) {
    case ElementType::kFloat32:
      array.data = values_of<float>(tensor);
      return array;
    case ElementType::kFloat64:
      array.data = values_of<double>(tensor);
      return array;
    case ElementType::kInt64:
      array.data = values_of<int64_t>(tensor);
      return array;
    default:
      fail_runtime("npy", file, ": holds ", element_type_name(tensor.type),
                   " values; read_npy returns float32, float64 or int64 arrays (read_npy_tensor reads every numeric "
                   "type)");
  }
}

// Magic, version, header length, dict and padding, exactly as numpy >= 1.23's
// np.save writes them: version 1.0 unless the header length needs 2.0's uint32.
std::string encode_header(ElementType type, const std::vector<int64_t>& shape, std::string_view file) {
  if (type == ElementType::kBFloat16) {
    fail_runtime("npy", file, file.empty() ? "" : ": ",
                 ".npy has no bfloat16 type (numpy lacks one); save bfloat16 tensors as .safetensors");
  }
  std::string dict = detail::npy_header_dict(type, shape);
  if (!shape.empty()) dict.append(kGrowthAxisMaxDigits - std::to_string(shape[0]).size(), ' ');
  const int64_t dict_length = static_cast<int64_t>(dict.size()) + 1;  // with the final '\n'
  int64_t preamble = 10;
  // numpy's padding: always 1..64 spaces, so that the data starts at a multiple of 64.
  auto padding = [&] { return kAlignment - (preamble + dict_length) % kAlignment; };
  if (dict_length + padding() > 0xffff) preamble = 12;
  const int64_t header_length = dict_length + padding();

  std::string head(kMagic);
  head += static_cast<char>(preamble == 10 ? 1 : 2);
  head += '\0';
  for (int64_t i = 0; i < preamble - 8; ++i) head += static_cast<char>((header_length >> (8 * i)) & 0xff);
  head += dict;
  head.append(static_cast<size_t>(padding()), ' ');
  head += '\n';
  return head;
}

// The header for `tensor`, after checking its data holds exactly its shape's bytes.
std::string checked_header(const StoredTensor& tensor, std::string_view file) {
  const int64_t count = detail::checked_count(tensor.shape, tensor.type, file);
  const int64_t bytes = count * element_size(tensor.type);
  if (static_cast<int64_t>(tensor.data.size()) != bytes) {
    detail::fail_file(file, "shape ", detail::shape_repr(tensor.shape), " of ", element_type_name(tensor.type),
                      " needs ", bytes, " bytes of data, got ", tensor.data.size());
  }
  return encode_header(tensor.type, tensor.shape, file);
}

template <class T>
void write_values(const std::string& path, std::span<const T> data, const std::vector<int64_t>& shape) {
  constexpr ElementType type = dtype_of<T>() == DType::kFloat32   ? ElementType::kFloat32
                               : dtype_of<T>() == DType::kFloat64 ? ElementType::kFloat64
                                                                  : ElementType::kInt64;
  const int64_t count = detail::checked_count(shape, type, path);
  require(count == static_cast<int64_t>(data.size()), "npy", path, ": shape ", detail::shape_repr(shape), " holds ",
          count, " values, got ", data.size());
  const std::string head = encode_header(type, shape, path);
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

StoredTensor read_npy_tensor(const std::string& path) {
  const detail::InputFile in("npy", path);
  return decode(
      in.size(), [&](int64_t offset, std::span<std::byte> out) { in.read_at(offset, out); }, path);
}

StoredTensor parse_npy_tensor(std::span<const std::byte> bytes, std::string_view name) {
  auto read_at = [&](int64_t offset, std::span<std::byte> out) {
    std::copy_n(bytes.begin() + offset, out.size(), out.begin());
  };
  return decode(static_cast<int64_t>(bytes.size()), read_at, name);
}

NpyArray read_npy(const std::string& path) { return to_array(read_npy_tensor(path), path); }

NpyArray parse_npy(std::span<const std::byte> bytes, std::string_view name) {
  return to_array(parse_npy_tensor(bytes, name), name);
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

void write_npy(const std::string& path, const StoredTensor& tensor) {
  const std::string head = checked_header(tensor, path);
  detail::AtomicOutputFile out("npy", path);
  out.write(head);
  out.write(tensor.data);
  out.commit();
}

std::vector<std::byte> serialize_npy(const StoredTensor& tensor) {
  const std::string head = checked_header(tensor, "");
  std::vector<std::byte> bytes(head.size() + tensor.data.size());
  std::memcpy(bytes.data(), head.data(), head.size());
  std::copy(tensor.data.begin(), tensor.data.end(), bytes.begin() + static_cast<std::ptrdiff_t>(head.size()));
  return bytes;
}

}  // namespace posenc::io
