#include "posenc/io/safetensors.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <set>

#include "file.h"
#include "json_reader.h"
#include "posenc/error.h"
#include "safetensors_layout.h"
#include "shape.h"
#include "utf8.h"

namespace posenc::io {
namespace detail {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian, kept as is");

struct DtypeName {
  std::string_view name;
  ElementType type;
};
// The allow-list, in the order messages print it.
constexpr std::array<DtypeName, 13> kDtypes{{
    {"BOOL", ElementType::kBool},    {"U8", ElementType::kUInt8},   {"I8", ElementType::kInt8},
    {"U16", ElementType::kUInt16},   {"I16", ElementType::kInt16},  {"U32", ElementType::kUInt32},
    {"I32", ElementType::kInt32},    {"U64", ElementType::kUInt64}, {"I64", ElementType::kInt64},
    {"F16", ElementType::kFloat16},  {"BF16", ElementType::kBFloat16}, {"F32", ElementType::kFloat32},
    {"F64", ElementType::kFloat64},
}};

std::string_view safetensors_dtype(ElementType type) {
  for (const DtypeName& d : kDtypes) {
    if (d.type == type) return d.name;
  }
  return "?";
}

std::string allowed_dtypes() {
  std::string s;
  for (const DtypeName& d : kDtypes) s += (s.empty() ? "" : ", ") + std::string(d.name);
  return s;
}

// "[safetensors] <file>: " + parts..., or "[safetensors] " + parts... without a file.
template <class... Parts>
[[noreturn]] void fail_file(std::string_view file, const Parts&... parts) {
  if (file.empty()) fail_argument("safetensors", parts...);
  fail_argument("safetensors", file, ": ", parts...);
}

// "[3, 4]" for messages; compact "[3,4]" in the header, as safetensors' own writer.
template <class T>
std::string list_text(std::span<const T> values, std::string_view separator = ", ") {
  std::string s = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) s += separator;
    s += std::to_string(values[i]);
  }
  return s + "]";
}

std::string quoted(std::string_view name) {
  std::string s(1, '\'');
  s += printable_utf8(name);
  s += '\'';
  return s;
}

// --- reading -------------------------------------------------------------

void read_metadata(JsonReader& json, std::map<std::string, std::string>& metadata, std::string_view file) {
  if (json.peek() != JsonKind::kObject) {
    fail_file(file, "__metadata__ must be an object mapping strings to strings, got ", json.describe_next());
  }
  json.begin_object();
  std::string key;
  for (bool first = true; json.next_member(first, key);) {
    if (json.peek() != JsonKind::kString) {
      fail_file(file, "__metadata__ value of ", quoted(key), " must be a string, got ", json.describe_next());
    }
    metadata.emplace(key, json.read_string());  // keys are unique: check_document saw to it
  }
}

// A JSON array of non-negative integers, each within uint64.
std::vector<uint64_t> read_counts(JsonReader& json, std::string_view file, const std::string& tensor,
                                  std::string_view what) {
  if (json.peek() != JsonKind::kArray) {
    fail_file(file, "tensor ", tensor, ": ", what, " must be an array of non-negative integers, got ",
              json.describe_next());
  }
  json.begin_array();
  std::vector<uint64_t> values;
  for (bool first = true; json.next_item(first);) {
    if (json.peek() != JsonKind::kNumber) {
      fail_file(file, "tensor ", tensor, ": ", what, " must hold non-negative integers, got ", json.describe_next());
    }
    const std::string_view text = json.read_number();
    if (text.find_first_of("-.eE") != std::string_view::npos) {
      fail_file(file, "tensor ", tensor, ": ", what, " must hold non-negative integers, got the number ", text);
    }
    uint64_t value = 0;
    for (char c : text) {
      if (__builtin_mul_overflow(value, uint64_t{10}, &value) ||
          __builtin_add_overflow(value, static_cast<uint64_t>(c - '0'), &value)) {
        fail_file(file, "tensor ", tensor, ": ", what, " holds ", text, ", more than 2^64 - 1");
      }
    }
    values.push_back(value);
  }
  return values;
}

SafetensorsEntry read_entry(JsonReader& json, std::string name, std::string_view file) {
  const std::string tensor = quoted(name);
  if (json.peek() != JsonKind::kObject) {
    fail_file(file, "tensor ", tensor, " must be an object with the keys dtype, shape and data_offsets, got ",
              json.describe_next());
  }
  json.begin_object();
  SafetensorsEntry entry;
  entry.name = std::move(name);
  bool has_dtype = false, has_shape = false, has_offsets = false;
  std::vector<uint64_t> shape;
  std::string key;
  for (bool first = true; json.next_member(first, key);) {
    if (key == "dtype") {
      if (json.peek() != JsonKind::kString) {
        fail_file(file, "tensor ", tensor, ": dtype must be a string, got ", json.describe_next());
      }
      const std::string dtype = json.read_string();
      const auto* found = std::find_if(kDtypes.begin(), kDtypes.end(), [&](const DtypeName& d) { return d.name == dtype; });
      if (found == kDtypes.end()) {
        fail_file(file, "tensor ", tensor, " has dtype ", quoted(dtype), "; the allowed dtypes are ", allowed_dtypes());
      }
      entry.type = found->type;
      has_dtype = true;
    } else if (key == "shape") {
      shape = read_counts(json, file, tensor, "shape");
      has_shape = true;
    } else if (key == "data_offsets") {
      const std::vector<uint64_t> offsets = read_counts(json, file, tensor, "data_offsets");
      if (offsets.size() != 2) {
        fail_file(file, "tensor ", tensor, ": data_offsets must be two integers [begin, end], got ", offsets.size());
      }
      entry.begin = offsets[0];
      entry.end = offsets[1];
      has_offsets = true;
    } else {
      fail_file(file, "tensor ", tensor, " has the key ", quoted(key),
                "; a tensor has exactly the keys dtype, shape and data_offsets");
    }
  }
  if (!has_dtype) fail_file(file, "tensor ", tensor, " lacks the key 'dtype'");
  if (!has_shape) fail_file(file, "tensor ", tensor, " lacks the key 'shape'");
  if (!has_offsets) fail_file(file, "tensor ", tensor, " lacks the key 'data_offsets'");
  if (entry.begin > entry.end) {
    fail_file(file, "tensor ", tensor, " has data_offsets [", entry.begin, ", ", entry.end, "]: begin is after end");
  }

  // Counts in int64 (StoredTensor's shape), with every overflow refused.
  const std::string shape_text = list_text<uint64_t>(shape);
  const bool empty = std::find(shape.begin(), shape.end(), uint64_t{0}) != shape.end();
  int64_t count = 1;
  for (uint64_t d : shape) {
    if (d > static_cast<uint64_t>(INT64_MAX)) {
      fail_file(file, "tensor ", tensor, " has shape ", shape_text, ": dimension ", d, " exceeds 2^63 - 1");
    }
    entry.shape.push_back(static_cast<int64_t>(d));
    if (!empty && __builtin_mul_overflow(count, static_cast<int64_t>(d), &count)) {
      fail_file(file, "tensor ", tensor, " has shape ", shape_text, ": its element count overflows int64");
    }
  }
  if (empty) count = 0;
  const std::string_view dtype = safetensors_dtype(entry.type);
  int64_t bytes = 0;
  if (__builtin_mul_overflow(count, element_size(entry.type), &bytes)) {
    fail_file(file, "tensor ", tensor, " has shape ", shape_text, " (", count, " ", dtype,
              " values): its size in bytes overflows int64");
  }
  if (static_cast<uint64_t>(bytes) != entry.end - entry.begin) {
    fail_file(file, "tensor ", tensor, " has shape ", shape_text, " (", count, " ", dtype, " values, ", bytes,
              " bytes) but data_offsets span ", entry.end - entry.begin, " bytes");
  }
  return entry;
}

// Sorted by offset, the spans tile the data buffer exactly: from 0, no gap,
// no overlap, to its last byte.
void check_spans(std::vector<SafetensorsEntry>& entries, uint64_t buffer_size, std::string_view file) {
  std::stable_sort(entries.begin(), entries.end(), [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expected = 0;
  const SafetensorsEntry* previous = nullptr;
  for (const SafetensorsEntry& e : entries) {
    if (e.begin != expected) {
      const std::string span = list_text<uint64_t>(std::array{e.begin, e.end});
      if (previous == nullptr) {
        fail_file(file, "tensor ", quoted(e.name), " has data_offsets ", span,
                  " but the first tensor's data must start at 0");
      }
      if (e.begin > expected) {
        fail_file(file, "tensor ", quoted(e.name), " has data_offsets ", span, " but tensor ", quoted(previous->name),
                  " ends at ", expected, ": spans must be contiguous, not leave ", e.begin - expected,
                  " bytes unused");
      }
      fail_file(file, "tensor ", quoted(e.name), " has data_offsets ", span, ", which overlap tensor ",
                quoted(previous->name), " [", previous->begin, ", ", previous->end, "]");
    }
    expected = e.end;
    previous = &e;
  }
  if (expected > buffer_size) {
    fail_file(file, "tensor ", quoted(previous->name), " has data_offsets [", previous->begin, ", ", previous->end,
              "], past the end of the data buffer (", buffer_size, " bytes after the header)");
  }
  if (expected < buffer_size) {
    fail_file(file, "the tensors' data ends at byte ", expected, " of the data buffer but the file holds ",
              buffer_size, " bytes after the header (", buffer_size - expected, " bytes unaccounted for)");
  }
}

SafetensorsLayout parse_header(std::string_view header, uint64_t buffer_size, std::string_view file) {
  if (const auto bad = find_utf8_error(header)) {
    fail_file(file, "header is not valid UTF-8 at byte ", bad->offset, ": ", bad->what);
  }
  JsonReader json(header, "safetensors", file);
  json.check_document();
  SafetensorsLayout layout;
  json.begin_object();
  std::string key;
  for (bool first = true; json.next_member(first, key);) {
    if (key == "__metadata__") {
      read_metadata(json, layout.metadata, file);
    } else {
      layout.entries.push_back(read_entry(json, std::move(key), file));
    }
  }
  check_spans(layout.entries, buffer_size, file);
  return layout;
}

// --- writing -------------------------------------------------------------

void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  out += '"';
}

void require_utf8(std::string_view text, std::string_view what, std::string_view file) {
  if (const auto bad = find_utf8_error(text)) {
    fail_file(file, what, " '", printable(text), "' is not valid UTF-8 at byte ", bad->offset, ": ", bad->what);
  }
}

// The header (JSON padded with spaces to a multiple of 8), after checking
// every argument so that the file it starts reads back.
std::string build_header(std::span<const NamedTensor> tensors, const std::map<std::string, std::string>& metadata,
                         std::string_view file) {
  std::set<std::string_view> names;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const NamedTensor& t = tensors[i];
    if (t.name.empty()) fail_file(file, "tensor names must be non-empty, got '' for tensor ", i);
    if (t.name == "__metadata__") fail_file(file, "the name '__metadata__' is reserved for metadata, not a tensor");
    require_utf8(t.name, "tensor name", file);
    if (!names.insert(t.name).second) fail_file(file, "tensor names must be unique, got ", quoted(t.name), " twice");
    const std::string shape_text = list_text<int64_t>(t.tensor.shape);
    for (int64_t d : t.tensor.shape) {
      if (d < 0) fail_file(file, "tensor ", quoted(t.name), " has shape ", shape_text, ": dimensions must be non-negative");
    }
    const std::optional<int64_t> numel = checked_numel(t.tensor.shape);
    const int64_t count = numel.value_or(0);
    int64_t bytes = 0;
    if (!numel || __builtin_mul_overflow(count, element_size(t.tensor.type), &bytes)) {
      fail_file(file, "tensor ", quoted(t.name), " has shape ", shape_text, ": its size overflows int64");
    }
    if (static_cast<int64_t>(t.tensor.data.size()) != bytes) {
      fail_file(file, "tensor ", quoted(t.name), " has shape ", shape_text, " (", count, " ",
                safetensors_dtype(t.tensor.type), " values, ", bytes, " bytes) but holds ", t.tensor.data.size(),
                " bytes of data");
    }
  }
  for (const auto& [key, value] : metadata) {
    require_utf8(key, "metadata key", file);
    require_utf8(value, "metadata value", file);
  }

  std::string json = "{";
  if (!metadata.empty()) {
    json += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [key, value] : metadata) {
      if (!first) json += ',';
      first = false;
      append_json_string(json, key);
      json += ':';
      append_json_string(json, value);
    }
    json += '}';
  }
  uint64_t offset = 0;
  for (const NamedTensor& t : tensors) {
    if (json.size() > 1) json += ',';
    append_json_string(json, t.name);
    json += ":{\"dtype\":\"" + std::string(safetensors_dtype(t.tensor.type)) +
            "\",\"shape\":" + list_text<int64_t>(t.tensor.shape, ",") + ",\"data_offsets\":[" + std::to_string(offset) +
            ",";
    offset += t.tensor.data.size();
    json += std::to_string(offset) + "]}";
  }
  json += '}';
  json.append((8 - json.size() % 8) % 8, ' ');  // the data buffer starts 8-byte aligned
  if (json.size() > kMaxSafetensorsHeaderBytes) {
    fail_file(file, "the header would take ", json.size(), " bytes, more than the ", kMaxSafetensorsHeaderBytes,
              " a reader accepts");
  }
  return json;
}

std::string length_prefix(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return s;
}

}  // namespace

SafetensorsLayout read_safetensors_layout(int64_t size, const ReadAt& read_at, std::string_view file) {
  if (size < 8) fail_file(file, "file holds ", size, " bytes, too few for the 8-byte header length");
  std::array<std::byte, 8> prefix{};
  read_at(0, prefix);
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = length << 8 | std::to_integer<uint64_t>(prefix[static_cast<size_t>(i)]);
  if (length > kMaxSafetensorsHeaderBytes) {
    fail_file(file, "header length ", length, " exceeds the limit of ", kMaxSafetensorsHeaderBytes, " bytes");
  }
  if (length > static_cast<uint64_t>(size - 8)) {
    fail_file(file, "header length ", length, " runs past the end of the file (", size - 8,
              " bytes follow the length field)");
  }
  std::string header(static_cast<size_t>(length), '\0');
  read_at(8, std::as_writable_bytes(std::span(header)));
  const int64_t data_begin = 8 + static_cast<int64_t>(length);
  SafetensorsLayout layout = parse_header(header, static_cast<uint64_t>(size - data_begin), file);
  layout.data_begin = data_begin;
  return layout;
}

NamedTensor read_safetensors_entry(const SafetensorsLayout& layout, const SafetensorsEntry& entry,
                                   const ReadAt& read_at) {
  NamedTensor t;
  t.name = entry.name;
  t.tensor.type = entry.type;
  t.tensor.shape = entry.shape;
  t.tensor.data.resize(static_cast<size_t>(entry.end - entry.begin));
  read_at(layout.data_begin + static_cast<int64_t>(entry.begin), t.tensor.data);
  return t;
}

}  // namespace detail

namespace {

SafetensorsFile read_all(int64_t size, const detail::ReadAt& read_at, std::string_view file) {
  detail::SafetensorsLayout layout = detail::read_safetensors_layout(size, read_at, file);
  SafetensorsFile out;
  out.metadata = std::move(layout.metadata);
  out.tensors.reserve(layout.entries.size());
  for (const detail::SafetensorsEntry& e : layout.entries) {
    out.tensors.push_back(detail::read_safetensors_entry(layout, e, read_at));
  }
  return out;
}

}  // namespace

SafetensorsFile read_safetensors(const std::string& path) {
  const detail::InputFile in("safetensors", path);
  return read_all(in.size(), [&](int64_t offset, std::span<std::byte> out) { in.read_at(offset, out); }, path);
}

SafetensorsFile parse_safetensors(std::span<const std::byte> bytes, std::string_view name) {
  return read_all(
      static_cast<int64_t>(bytes.size()),
      [&](int64_t offset, std::span<std::byte> out) { std::copy_n(bytes.begin() + offset, out.size(), out.begin()); },
      name);
}

void write_safetensors(const std::string& path, std::span<const NamedTensor> tensors,
                       const std::map<std::string, std::string>& metadata) {
  const std::string header = detail::build_header(tensors, metadata, path);
  detail::AtomicOutputFile out("safetensors", path);
  out.write(detail::length_prefix(header.size()));
  out.write(header);
  for (const NamedTensor& t : tensors) out.write(t.tensor.data);
  out.commit();
}

std::vector<std::byte> serialize_safetensors(std::span<const NamedTensor> tensors,
                                             const std::map<std::string, std::string>& metadata) {
  const std::string header = detail::build_header(tensors, metadata, "");
  const std::string prefix = detail::length_prefix(header.size());
  size_t total = prefix.size() + header.size();
  for (const NamedTensor& t : tensors) total += t.tensor.data.size();
  std::vector<std::byte> bytes(total);
  size_t at = 0;
  const auto append = [&](const void* data, size_t size) {
    if (size > 0) std::memcpy(bytes.data() + at, data, size);
    at += size;
  };
  append(prefix.data(), prefix.size());
  append(header.data(), header.size());
  for (const NamedTensor& t : tensors) append(t.tensor.data.data(), t.tensor.data.size());
  return bytes;
}

}  // namespace posenc::io
