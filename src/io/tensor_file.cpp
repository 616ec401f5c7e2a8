#include "posenc/io/tensor_file.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "file.h"
#include "posenc/error.h"
#include "posenc/io/npy.h"
#include "posenc/io/safetensors.h"
#include "safetensors_layout.h"
#include "shape.h"
#include "utf8.h"

namespace posenc::io {
namespace {

enum class FileKind { kNpy, kSafetensors };

FileKind file_kind(const std::string& path) {
  const auto ends_with = [&](std::string_view suffix) {
    return path.size() > suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends_with(".npy")) return FileKind::kNpy;
  if (ends_with(".safetensors")) return FileKind::kSafetensors;
  fail_argument("tensor file", path, ": unsupported file type; expected .npy or .safetensors");
}

// Every bit pattern exactly: 1 sign, 5 exponent, 10 fraction bits (IEEE 754 binary16).
double float16_to_double(uint16_t h) {
  const int exponent = (h >> 10) & 0x1f;
  const int fraction = h & 0x3ff;
  double magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(fraction, -24);  // zero and subnormals: fraction * 2^-14 / 2^10
  } else if (exponent == 31) {
    magnitude = fraction == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else {
    magnitude = std::ldexp(fraction + 1024, exponent - 25);  // (1 + fraction / 2^10) * 2^(exponent - 15)
  }
  return (h & 0x8000) ? -magnitude : magnitude;
}

// bfloat16 is the upper half of a float32: widening is exact.
double bfloat16_to_double(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

template <class T, class Convert>
void widen(const std::vector<std::byte>& data, std::vector<double>& out, Convert convert) {
  for (size_t i = 0; i < out.size(); ++i) {
    T v;
    std::memcpy(&v, data.data() + i * sizeof(T), sizeof(T));
    out[i] = convert(v);
  }
}

std::string name_list(std::vector<std::string> names) {
  constexpr size_t kMaxListed = 50;  // a large checkpoint holds hundreds
  std::sort(names.begin(), names.end());
  std::string s;
  for (size_t i = 0; i < names.size() && i < kMaxListed; ++i) s += (i ? ", " : "") + detail::printable_utf8(names[i]);
  if (names.size() > kMaxListed) s += ", ... (" + std::to_string(names.size() - kMaxListed) + " more)";
  return s;
}

// Which tensor of the layout load_tensor returns.
const detail::SafetensorsEntry& choose(const detail::SafetensorsLayout& layout, const std::string& path,
                                       const std::optional<std::string>& name) {
  const auto& entries = layout.entries;
  std::vector<std::string> names;
  for (const auto& e : entries) names.push_back(e.name);
  if (name) {
    for (const auto& e : entries) {
      if (e.name == *name) return e;
    }
    if (entries.empty()) fail_argument("tensor file", path, " has no tensor '", detail::printable_utf8(*name), "'; it holds none");
    fail_argument("tensor file", path, " has no tensor '", detail::printable_utf8(*name), "'; it holds: ",
                  name_list(names));
  }
  if (entries.size() == 1) return entries[0];
  if (entries.empty()) fail_argument("tensor file", path, " holds no tensors");
  int best = 0;
  const detail::SafetensorsEntry* chosen = nullptr;
  bool unique = false;
  for (const auto& e : entries) {
    const int score = position_table_score(e.name);
    if (score > best) {
      best = score, chosen = &e, unique = true;
    } else if (score == best) {
      unique = false;
    }
  }
  if (best > 0 && unique) return *chosen;
  fail_argument("tensor file", path, " holds ", entries.size(), " tensors; name one of: ", name_list(names));
}

}  // namespace

std::string_view element_type_name(ElementType type) noexcept {
  switch (type) {
    case ElementType::kBool: return "bool";
    case ElementType::kUInt8: return "uint8";
    case ElementType::kInt8: return "int8";
    case ElementType::kUInt16: return "uint16";
    case ElementType::kInt16: return "int16";
    case ElementType::kUInt32: return "uint32";
    case ElementType::kInt32: return "int32";
    case ElementType::kUInt64: return "uint64";
    case ElementType::kInt64: return "int64";
    case ElementType::kFloat16: return "float16";
    case ElementType::kBFloat16: return "bfloat16";
    case ElementType::kFloat32: return "float32";
    case ElementType::kFloat64: return "float64";
  }
  return "?";
}

int64_t element_size(ElementType type) noexcept {
  switch (type) {
    case ElementType::kBool:
    case ElementType::kUInt8:
    case ElementType::kInt8:
      return 1;
    case ElementType::kUInt16:
    case ElementType::kInt16:
    case ElementType::kFloat16:
    case ElementType::kBFloat16:
      return 2;
    case ElementType::kUInt32:
    case ElementType::kInt32:
    case ElementType::kFloat32:
      return 4;
    case ElementType::kUInt64:
    case ElementType::kInt64:
    case ElementType::kFloat64:
      return 8;
  }
  return 0;
}

int64_t StoredTensor::numel() const noexcept {
  // Read tensors always have a count; for a shape built by hand that has
  // none, the wrapped product (no UB), which to_double() then refuses.
  if (const auto n = detail::checked_numel(shape)) return *n;
  int64_t n = 1;
  for (int64_t d : shape) __builtin_mul_overflow(n, d, &n);
  return n;
}

std::vector<double> StoredTensor::to_double() const {
  // A tensor built by hand may not hold what its shape says: check before reading.
  const std::optional<int64_t> count = detail::checked_numel(shape);
  const int64_t n = count.value_or(0);
  int64_t bytes = 0;
  const bool bad = !count || __builtin_mul_overflow(n, element_size(type), &bytes);
  if (bad || bytes != static_cast<int64_t>(data.size())) {
    std::string dims;
    for (int64_t d : shape) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
    fail_argument("tensor file", "a ", element_type_name(type), " tensor of shape [", dims, "] needs ",
                  bad ? std::string("an impossible number of") : std::to_string(bytes), " bytes of data, got ",
                  data.size());
  }
  std::vector<double> out(static_cast<size_t>(n));
  const auto same = [](auto v) { return static_cast<double>(v); };
  switch (type) {
    case ElementType::kBool: widen<uint8_t>(data, out, [](uint8_t v) { return v != 0 ? 1.0 : 0.0; }); break;
    case ElementType::kUInt8: widen<uint8_t>(data, out, same); break;
    case ElementType::kInt8: widen<int8_t>(data, out, same); break;
    case ElementType::kUInt16: widen<uint16_t>(data, out, same); break;
    case ElementType::kInt16: widen<int16_t>(data, out, same); break;
    case ElementType::kUInt32: widen<uint32_t>(data, out, same); break;
    case ElementType::kInt32: widen<int32_t>(data, out, same); break;
    case ElementType::kUInt64: widen<uint64_t>(data, out, same); break;  // rounds above 2^53
    case ElementType::kInt64: widen<int64_t>(data, out, same); break;    // rounds beyond +-2^53
    case ElementType::kFloat16: widen<uint16_t>(data, out, float16_to_double); break;
    case ElementType::kBFloat16: widen<uint16_t>(data, out, bfloat16_to_double); break;
    case ElementType::kFloat32: widen<float>(data, out, same); break;
    case ElementType::kFloat64: widen<double>(data, out, same); break;
  }
  return out;
}

std::vector<NamedTensor> load_tensors(const std::string& path) {
  if (file_kind(path) == FileKind::kNpy) {
    std::vector<NamedTensor> one(1);
    one[0].tensor = read_npy_tensor(path);
    return one;
  }
  return read_safetensors(path).tensors;
}

NamedTensor load_tensor(const std::string& path, const std::optional<std::string>& name) {
  if (file_kind(path) == FileKind::kNpy) {
    if (name) fail_argument("tensor file", path, " holds one unnamed array; --tensor does not apply");
    NamedTensor t;
    t.tensor = read_npy_tensor(path);
    return t;
  }
  // Only the header and the chosen tensor's bytes are read: a checkpoint may be gigabytes.
  const detail::InputFile in("safetensors", path);
  const detail::ReadAt read_at = [&](int64_t offset, std::span<std::byte> out) { in.read_at(offset, out); };
  const detail::SafetensorsLayout layout = detail::read_safetensors_layout(in.size(), read_at, path);
  return detail::read_safetensors_entry(layout, choose(layout, path, name), read_at);
}

int position_table_score(std::string_view name) noexcept {
  // Exact trailing name components of the position tables real checkpoints store.
  struct Known {
    std::array<std::string_view, 2> suffix;  // last component second; "" when one suffices
  };
  static constexpr std::array<Known, 8> kKnown{{
      {{"position_embeddings", "weight"}},  // BERT, RoBERTa, ALBERT, ELECTRA, DistilBERT, XLM-R
      {{"", "position_embeddings"}},        // HF ViT, DeiT (a parameter, no .weight)
      {{"position_embedding", "weight"}},   // HF CLIP, SigLIP
      {{"wpe", "weight"}},                  // GPT-2, GPT-Neo
      {{"embed_positions", "weight"}},      // BART, mBART, OPT, Whisper
      {{"", "pos_embed"}},                  // timm ViT, MAE, DeiT
      {{"", "positional_embedding"}},       // OpenAI CLIP
      {{"", "pos_embedding"}},              // vit-pytorch
  }};
  // The last dot-separated component, and the one before it if any (no allocation: noexcept).
  const size_t dot = name.rfind('.');
  const std::string_view last = dot == std::string_view::npos ? name : name.substr(dot + 1);
  const bool has_second = dot != std::string_view::npos;
  const std::string_view rest = has_second ? name.substr(0, dot) : std::string_view();
  const size_t dot2 = rest.rfind('.');
  const std::string_view second = dot2 == std::string_view::npos ? rest : rest.substr(dot2 + 1);
  for (const Known& k : kKnown) {
    if (last != k.suffix[1]) continue;
    if (!k.suffix[0].empty() && (!has_second || second != k.suffix[0])) continue;
    return 2;
  }
  // Weaker: the last component that is not "weight" speaks of position embeddings
  // ("decoder_pos_embed" of MAE, "abs_pos_emb", "rel_pos_embedding", ...).
  const std::string_view core = last == "weight" && has_second ? second : last;
  const bool position = core.find("pos") != std::string_view::npos;
  const bool embedding = core.find("emb") != std::string_view::npos;
  return position && embedding ? 1 : 0;
}

void save_tensors(const std::string& path, std::span<const NamedTensor> tensors) {
  if (file_kind(path) == FileKind::kNpy) {
    if (tensors.size() != 1) {
      fail_argument("tensor file", path, ": a .npy file holds exactly one array, got ", tensors.size(), " tensors");
    }
    write_npy(path, tensors[0].tensor);
    return;
  }
  write_safetensors(path, tensors);
}

}  // namespace posenc::io
