// Tensors read from files, whatever their format: the element types the
// strict readers accept, a typed in-memory tensor, and loading one tensor by
// name from a .npy or .safetensors file (a position table taken straight from
// a checkpoint, e.g. "bert.embeddings.position_embeddings.weight").
//
// Data is kept as the file's bytes, converted to little-endian, C order;
// to_double() widens any element type to float64 for analysis.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace posenc::io {

// Numeric element types only (no object / string / complex).
enum class ElementType {
  kBool, kUInt8, kInt8, kUInt16, kInt16, kUInt32, kInt32, kUInt64, kInt64,
  kFloat16, kBFloat16, kFloat32, kFloat64,
};

// "bool", "uint8", ..., "float16", "bfloat16", "float32", "float64".
std::string_view element_type_name(ElementType type) noexcept;
// Bytes per element: 1, 1, 1, 2, 2, 4, 4, 8, 8, 2, 2, 4, 8.
int64_t element_size(ElementType type) noexcept;

struct StoredTensor {
  ElementType type = ElementType::kFloat32;
  std::vector<int64_t> shape;   // empty for a 0-d tensor (one value)
  std::vector<std::byte> data;  // little-endian, C order, numel * element_size bytes

  int64_t numel() const noexcept;  // product of shape (1 for 0-d)
  // Every element widened to float64 (bool 0/1; float16/bfloat16 exactly).
  std::vector<double> to_double() const;
};

// A named tensor, as stored in a .safetensors file (a .npy file holds one, named "").
struct NamedTensor {
  std::string name;
  StoredTensor tensor;
};

// Every tensor in the file at `path`, chosen by its extension (".npy" or
// ".safetensors"), in file order. Throws
//   "[tensor file] x.bin: unsupported file type; expected .npy or .safetensors"
// and the reader's errors.
std::vector<NamedTensor> load_tensors(const std::string& path);

// One tensor of the file. `name` given: that tensor, else
//   "[tensor file] x.safetensors has no tensor 'a.b'; it holds: n1, n2, ..."
// (a .npy file refuses a name: "[tensor file] x.npy holds one unnamed array; --tensor does not apply").
// `name` absent: the only tensor of the file, else the one tensor whose name
// looks like a position table (position_table_score > 0, a unique best), else
//   "[tensor file] x.safetensors holds 3 tensors; name one of: n1, n2, n3".
NamedTensor load_tensor(const std::string& path, const std::optional<std::string>& name = std::nullopt);

// > 0 for names real checkpoints give their position table
// ("...position_embeddings.weight" (BERT, RoBERTa), "...wpe.weight" (GPT-2),
// "...embed_positions.weight" (BART, OPT), "...pos_embed" (ViT/MAE), ...), else 0.
int position_table_score(std::string_view name) noexcept;

// Writes `tensors` to `path` by its extension: .safetensors (any number,
// unique non-empty names) or .npy (exactly one). Atomic: the target is
// replaced only once the whole file is written.
void save_tensors(const std::string& path, std::span<const NamedTensor> tensors);

}  // namespace posenc::io
