// libFuzzer target: parse_safetensors on arbitrary bytes. Refusals are
// std::exception (caught); anything else (a crash, a sanitizer report, an
// uncaught exception) is a bug. An accepted file must also survive the
// writer: serialize, parse again, and get the same tensors and metadata.
#include <cstddef>
#include <cstdint>
#include <exception>
#include <span>

#include "posenc/io/safetensors.h"

namespace {

bool same(const posenc::io::SafetensorsFile& a, const posenc::io::SafetensorsFile& b) {
  if (a.metadata != b.metadata || a.tensors.size() != b.tensors.size()) return false;
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const auto& x = a.tensors[i];
    const auto& y = b.tensors[i];
    if (x.name != y.name || x.tensor.type != y.tensor.type || x.tensor.shape != y.tensor.shape ||
        x.tensor.data != y.tensor.data) {
      return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace posenc::io;
  const std::span<const std::byte> bytes = std::as_bytes(std::span(data, size));
  SafetensorsFile file;
  try {
    file = parse_safetensors(bytes, "fuzz.safetensors");
  } catch (const std::exception&) {
    return 0;
  }
  for (const NamedTensor& t : file.tensors) {
    // The reader accepts an empty name (the format allows it); the writer does not.
    if (t.name.empty()) return 0;
    if (t.tensor.to_double().size() != static_cast<size_t>(t.tensor.numel())) __builtin_trap();
  }
  const std::vector<std::byte> again = serialize_safetensors(file.tensors, file.metadata);
  if (!same(parse_safetensors(again, "again.safetensors"), file)) __builtin_trap();
  return 0;
}
