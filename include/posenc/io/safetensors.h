// .safetensors files (huggingface/safetensors): a strict reader and an
// atomic writer.
//
// File layout: N (uint64 little-endian), then an N-byte UTF-8 JSON object
//   {"__metadata__": {"k": "v"}, "name": {"dtype": "F32", "shape": [3, 4],
//    "data_offsets": [begin, end]}, ...}
// (the writer pads it with spaces to a multiple of 8), then the data buffer;
// offsets are relative to the buffer's start.
//
// The reader checks, in order, before allocating anything the file does not
// back: N <= kMaxSafetensorsHeaderBytes and 8 + N <= file size; the header is
// valid UTF-8 and one JSON object (strict grammar, nesting depth bounded), with
// no duplicate key at any level; "__metadata__", when present, maps strings
// to strings; every other entry has exactly the keys dtype, shape and
// data_offsets; dtype on the allow-list (BOOL, U8, I8, U16, I16, U32, I32,
// U64, I64, F16, BF16, F32, F64); shape and offsets non-negative integers;
// element and byte counts computed with overflow checks and equal to
// end - begin; sorted by offset the spans start at 0, are contiguous, and the
// last ends exactly at the end of the file. Every refusal is a
// std::invalid_argument naming the file and what is wrong, e.g.
//   "[safetensors] x.safetensors: tensor 'w' has shape [3, 4] (12 F32 values, 48 bytes) but data_offsets span 44 bytes".
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/io/tensor_file.h"

namespace posenc::io {

inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

struct SafetensorsFile {
  std::map<std::string, std::string> metadata;  // "__metadata__"
  std::vector<NamedTensor> tensors;             // in data-offset order
};

SafetensorsFile read_safetensors(const std::string& path);
// Same for bytes already in memory; `name` stands for the file in messages.
SafetensorsFile parse_safetensors(std::span<const std::byte> bytes, std::string_view name);

// Names must be unique and non-empty and not "__metadata__"; each tensor's
// data must hold exactly numel * element_size bytes. Tensors are laid out in
// the given order. Atomic replace of `path`.
void write_safetensors(const std::string& path, std::span<const NamedTensor> tensors,
                       const std::map<std::string, std::string>& metadata = {});
// The file's bytes, for tests and fuzz seeds.
std::vector<std::byte> serialize_safetensors(std::span<const NamedTensor> tensors,
                                             const std::map<std::string, std::string>& metadata = {});

}  // namespace posenc::io
