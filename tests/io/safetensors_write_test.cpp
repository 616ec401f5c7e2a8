// The writer: identity with an independently assembled file, round trips of
// every dtype, argument checks with exact messages, atomic replacement.
#include <gtest/gtest.h>

#include <cstring>

#include "checkpoint_data.h"
#include "io_test_util.h"
#include "posenc/io/safetensors.h"

namespace posenc::io {
namespace {

using testing::data_file;
using testing::error_of;
using testing::read_bytes;
using testing::TempDir;

StoredTensor tensor_of(ElementType type, std::vector<int64_t> shape, std::string_view bytes) {
  StoredTensor t;
  t.type = type;
  t.shape = std::move(shape);
  t.data = testing::to_bytes(bytes);
  return t;
}

TEST(SafetensorsWrite, ReproducesTheIndependentGpt2FileByteForByte) {
  // gpt2_like.safetensors was assembled by make_checkpoint_files.py (json.dumps,
  // compact, keys in data order, metadata first, space padding to 8): the same
  // layout this writer documents, so the bytes must agree exactly.
  const std::string path = data_file("gpt2_like.safetensors");
  const SafetensorsFile f = read_safetensors(path);
  EXPECT_EQ(testing::to_string(serialize_safetensors(f.tensors, f.metadata)), read_bytes(path));
  TempDir dir;
  write_safetensors(dir.file("again.safetensors"), f.tensors, f.metadata);
  EXPECT_EQ(read_bytes(dir.file("again.safetensors")), read_bytes(path));
}

TEST(SafetensorsWrite, LayoutSpelledOut) {
  const std::vector<NamedTensor> tensors = {
      {"a", tensor_of(ElementType::kUInt8, {3}, "xyz")},
      {"b\"\\\n", tensor_of(ElementType::kBFloat16, {}, std::string("\x80\x3f", 2))},
  };
  const std::string header =
      R"({"__metadata__":{"k":"v"},"a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]},)"
      R"("b\"\\\u000a":{"dtype":"BF16","shape":[],"data_offsets":[3,5]}})";
  const std::string padded = header + std::string((8 - header.size() % 8) % 8, ' ');
  EXPECT_EQ(testing::to_string(serialize_safetensors(tensors, {{"k", "v"}})),
            testing::safetensors_bytes(padded, std::string("xyz\x80\x3f", 5)));
  // And it reads back, escapes undone.
  const std::vector<std::byte> bytes = serialize_safetensors(tensors, {{"k", "v"}});
  const SafetensorsFile f = parse_safetensors(bytes, "m");
  ASSERT_EQ(f.tensors.size(), 2u);
  EXPECT_EQ(f.tensors[1].name, "b\"\\\n");
  EXPECT_EQ(f.tensors[1].tensor.to_double(), (std::vector<double>{1.0}));
}

TEST(SafetensorsWrite, RoundTripsEveryDtype) {
  // Bytes from the formula, so every element type carries distinct values.
  std::vector<NamedTensor> tensors;
  int64_t seed = 0;
  for (const auto& [code, type] : testing::kTypeCodes) {
    const std::vector<double> v = testing::formula_values(type, 12, seed++);
    StoredTensor t;
    t.type = type;
    t.shape = {3, 4};
    t.data.resize(static_cast<size_t>(12 * element_size(type)));
    for (size_t i = 0; i < v.size(); ++i) {
      std::byte* at = t.data.data() + i * static_cast<size_t>(element_size(type));
      const auto put = [&](auto x) { std::memcpy(at, &x, sizeof x); };
      switch (type) {
        case ElementType::kBool: put(static_cast<uint8_t>(v[i])); break;
        case ElementType::kUInt8: put(static_cast<uint8_t>(v[i])); break;
        case ElementType::kInt8: put(static_cast<int8_t>(v[i])); break;
        case ElementType::kUInt16: put(static_cast<uint16_t>(v[i])); break;
        case ElementType::kInt16: put(static_cast<int16_t>(v[i])); break;
        case ElementType::kUInt32: put(static_cast<uint32_t>(v[i])); break;
        case ElementType::kInt32: put(static_cast<int32_t>(v[i])); break;
        case ElementType::kUInt64: put(static_cast<uint64_t>(v[i])); break;
        case ElementType::kInt64: put(static_cast<int64_t>(v[i])); break;
        case ElementType::kFloat32: put(static_cast<float>(v[i])); break;
        case ElementType::kFloat64: put(v[i]); break;
        default: put(static_cast<uint16_t>(0x3c00 + i)); break;  // float16: 1 + i/1024, exact
      }
    }
    tensors.push_back({std::string(code), std::move(t)});
  }
  tensors.push_back({"bf16", tensor_of(ElementType::kBFloat16, {2}, std::string("\x49\x40\x80\xbf", 4))});
  tensors.push_back({"scalar", tensor_of(ElementType::kFloat64, {}, std::string(8, '\x11'))});
  tensors.push_back({"empty", tensor_of(ElementType::kInt32, {0, 7}, "")});

  TempDir dir;
  const std::string path = dir.file("all.safetensors");
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"", ""}, {"\xce\xbb", "\"\\"}};
  write_safetensors(path, tensors, metadata);
  const SafetensorsFile f = read_safetensors(path);
  EXPECT_EQ(f.metadata, metadata);
  ASSERT_EQ(f.tensors.size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    SCOPED_TRACE(tensors[i].name);
    EXPECT_EQ(f.tensors[i].name, tensors[i].name);
    EXPECT_EQ(f.tensors[i].tensor.type, tensors[i].tensor.type);
    EXPECT_EQ(f.tensors[i].tensor.shape, tensors[i].tensor.shape);
    EXPECT_EQ(f.tensors[i].tensor.data, tensors[i].tensor.data);
  }
  // The data buffer starts 8-byte aligned.
  const std::string bytes = read_bytes(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  const std::string header = bytes.substr(8, n);
  const size_t close = header.find_last_not_of(' ');
  EXPECT_EQ(header[close], '}');
  EXPECT_LT(header.size() - close - 1, 8u);  // at most 7 spaces of padding
  EXPECT_EQ(f.tensors[tensors.size() - 3].tensor.to_double(), (std::vector<double>{3.140625, -1.0}));
}

TEST(SafetensorsWrite, RefusesBadArguments) {
  TempDir dir;
  const std::string path = dir.file("w.safetensors");
  const auto refused = [&](const std::vector<NamedTensor>& tensors, const std::map<std::string, std::string>& meta = {}) {
    const std::string from_file = error_of<std::invalid_argument>([&] { write_safetensors(path, tensors, meta); });
    const std::string prefix = "[safetensors] " + path + ": ";
    EXPECT_EQ(from_file.substr(0, prefix.size()), prefix);
    // serialize_safetensors says the same without the file.
    EXPECT_EQ("[safetensors] " + from_file.substr(prefix.size()),
              error_of<std::invalid_argument>([&] { serialize_safetensors(tensors, meta); }));
    return from_file.substr(prefix.size());
  };
  const StoredTensor f32 = tensor_of(ElementType::kFloat32, {2}, std::string(8, '\0'));
  EXPECT_EQ(refused({{"a", f32}, {"", f32}}), "tensor names must be non-empty, got '' for tensor 1");
  EXPECT_EQ(refused({{"__metadata__", f32}}), "the name '__metadata__' is reserved for metadata, not a tensor");
  EXPECT_EQ(refused({{"a", f32}, {"b", f32}, {"a", f32}}), "tensor names must be unique, got 'a' twice");
  EXPECT_EQ(refused({{"a\xff", f32}}),
            "tensor name 'a\\xff' is not valid UTF-8 at byte 1: byte 0xff, which never occurs in UTF-8");
  EXPECT_EQ(refused({{"a", f32}}, {{"k", "\xed\xa0\x80"}}),
            "metadata value '\\xed\\xa0\\x80' is not valid UTF-8 at byte 0: UTF-16 surrogate (U+D800 to U+DFFF)");
  EXPECT_EQ(refused({{"a", tensor_of(ElementType::kFloat32, {3, 4}, std::string(44, '\0'))}}),
            "tensor 'a' has shape [3, 4] (12 F32 values, 48 bytes) but holds 44 bytes of data");
  EXPECT_EQ(refused({{"a", tensor_of(ElementType::kFloat32, {3, -1}, "")}}),
            "tensor 'a' has shape [3, -1]: dimensions must be non-negative");
  EXPECT_EQ(refused({{"a", tensor_of(ElementType::kFloat32, {int64_t{1} << 62, 4}, "")}}),
            "tensor 'a' has shape [4611686018427387904, 4]: its size overflows int64");
  EXPECT_TRUE(dir.entries().empty());  // nothing written, no temporary left
}

TEST(SafetensorsWrite, ReplacesTheTargetAtomically) {
  TempDir dir;
  const std::string path = dir.file("a.safetensors");
  const std::vector<NamedTensor> one = {{"w", tensor_of(ElementType::kUInt8, {2}, "ab")}};
  write_safetensors(path, one);
  const std::string before = read_bytes(path);
  const std::vector<NamedTensor> bad = {{"w", tensor_of(ElementType::kUInt8, {3}, "ab")}};
  EXPECT_THROW(write_safetensors(path, bad), std::invalid_argument);
  EXPECT_EQ(read_bytes(path), before);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"a.safetensors"});
  const std::vector<NamedTensor> two = {{"v", tensor_of(ElementType::kUInt8, {3}, "abc")}};
  write_safetensors(path, two);
  EXPECT_EQ(read_safetensors(path).tensors[0].name, "v");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"a.safetensors"});
  const std::string nowhere = dir.file("missing/a.safetensors");
  EXPECT_EQ(error_of<std::runtime_error>([&] { write_safetensors(nowhere, one); }),
            "[safetensors] " + nowhere + ": cannot create a file in '" + dir.file("missing") +
                "': No such file or directory");
}

}  // namespace
}  // namespace posenc::io
