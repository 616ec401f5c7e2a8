// The checked header of a .safetensors file, before any tensor data is read:
// lets load_tensor read one tensor of a large checkpoint without the rest.
// Internal to posenc::io.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/io/safetensors.h"
#include "posenc/io/tensor_file.h"

namespace posenc::io::detail {

struct SafetensorsEntry {
  std::string name;
  ElementType type = ElementType::kFloat32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // [begin, end) in the data buffer
  uint64_t end = 0;
};

struct SafetensorsLayout {
  std::map<std::string, std::string> metadata;
  std::vector<SafetensorsEntry> entries;  // in data-offset order, spans contiguous from 0 to the end of the file
  int64_t data_begin = 0;                 // 8 + header length: where the data buffer starts in the file
};

using ReadAt = std::function<void(int64_t offset, std::span<std::byte> out)>;

// Every check of safetensors.h on a file of `size` bytes; allocates only the
// header (<= kMaxSafetensorsHeaderBytes, and only once the file is known to
// hold it) and what the header itself spells out.
SafetensorsLayout read_safetensors_layout(int64_t size, const ReadAt& read_at, std::string_view file);

// The tensor's bytes (exactly its span, which the layout checked is in the file).
NamedTensor read_safetensors_entry(const SafetensorsLayout& layout, const SafetensorsEntry& entry,
                                   const ReadAt& read_at);

}  // namespace posenc::io::detail
