// libFuzzer target: parse_npy_tensor (and the legacy parse_npy) on arbitrary
// bytes. Refusals are std::exception (caught); anything else is a bug. An
// accepted file must survive the writer: serialize, parse again, same tensor.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <span>

#include "posenc/io/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace posenc::io;
  const std::span<const std::byte> bytes = std::as_bytes(std::span(data, size));
  StoredTensor tensor;
  try {
    tensor = parse_npy_tensor(bytes, "fuzz.npy");
  } catch (const std::exception&) {
    return 0;
  }
  if (tensor.to_double().size() != static_cast<size_t>(tensor.numel())) __builtin_trap();
  const StoredTensor again = parse_npy_tensor(serialize_npy(tensor), "again.npy");
  if (again.type != tensor.type || again.shape != tensor.shape || again.data != tensor.data) __builtin_trap();
  // The legacy reader agrees wherever it accepts the file.
  try {
    const NpyArray array = parse_npy(bytes, "fuzz.npy");
    const size_t n = std::visit([](const auto& v) { return v.size() * sizeof(v[0]); }, array.data);
    const void* p = std::visit([](const auto& v) { return static_cast<const void*>(v.data()); }, array.data);
    if (array.shape != tensor.shape || n != tensor.data.size() || (n > 0 && std::memcmp(p, tensor.data.data(), n) != 0)) {
      __builtin_trap();
    }
  } catch (const std::runtime_error&) {
    // another numeric type: read_npy keeps to float32, float64 and int64
  }
  return 0;
}
