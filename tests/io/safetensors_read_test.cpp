// The reader on files laid out like real checkpoints (BERT, GPT-2), written
// by make_checkpoint_files.py from the format's definition, not by posenc;
// and on JSON spellings a strict reader must still accept.
#include <gtest/gtest.h>

#include "checkpoint_data.h"
#include "io_test_util.h"
#include "posenc/io/safetensors.h"

namespace posenc::io {
namespace {

using testing::data_file;
using testing::formula_values;
using testing::safetensors_bytes;

struct Expected {
  std::string name;
  std::vector<int64_t> shape;
  int64_t seed;  // of the generator's formula
};

void expect_tensors(const std::vector<NamedTensor>& got, const std::vector<Expected>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(want[i].name);
    EXPECT_EQ(got[i].name, want[i].name);
    EXPECT_EQ(got[i].tensor.type, ElementType::kFloat32);
    EXPECT_EQ(got[i].tensor.shape, want[i].shape);
    EXPECT_EQ(got[i].tensor.to_double(), formula_values(ElementType::kFloat32, got[i].tensor.numel(), want[i].seed));
  }
}

TEST(SafetensorsRead, BertLayout) {
  // JSON keys sorted by name, data in model order: the tensors come back in data order.
  const SafetensorsFile f = read_safetensors(data_file("bert_like.safetensors"));
  EXPECT_TRUE(f.metadata.empty());
  expect_tensors(f.tensors, {{"bert.embeddings.word_embeddings.weight", {30, 8}, 1},
                             {"bert.embeddings.position_embeddings.weight", {16, 8}, 2},
                             {"bert.embeddings.token_type_embeddings.weight", {2, 8}, 3},
                             {"bert.embeddings.LayerNorm.weight", {8}, 4},
                             {"bert.embeddings.LayerNorm.bias", {8}, 5},
                             {"bert.encoder.layer.0.attention.self.query.weight", {8, 8}, 6},
                             {"bert.encoder.layer.0.attention.self.query.bias", {8}, 7},
                             {"bert.pooler.dense.weight", {8, 8}, 8}});
}

TEST(SafetensorsRead, Gpt2LayoutWithMetadata) {
  const SafetensorsFile f = read_safetensors(data_file("gpt2_like.safetensors"));
  EXPECT_EQ(f.metadata, (std::map<std::string, std::string>{{"format", "pt"}}));
  expect_tensors(f.tensors, {{"transformer.wte.weight", {50, 8}, 1},
                             {"transformer.wpe.weight", {32, 8}, 2},
                             {"transformer.h.0.ln_1.weight", {8}, 3},
                             {"transformer.h.0.ln_1.bias", {8}, 4},
                             {"transformer.h.0.attn.c_attn.weight", {8, 24}, 5},
                             {"transformer.h.0.attn.c_attn.bias", {24}, 6},
                             {"transformer.ln_f.weight", {8}, 7},
                             {"transformer.ln_f.bias", {8}, 8}});
}

TEST(SafetensorsRead, EveryDtype) {
  const SafetensorsFile f = read_safetensors(data_file("all_dtypes.safetensors"));
  EXPECT_EQ(f.metadata, (std::map<std::string, std::string>{{"format", "pt"}, {"note", "caf\xc3\xa9 \xe2\x9c\x93"}}));
  const std::vector<std::pair<std::string, ElementType>> dtypes = {
      {"BOOL", ElementType::kBool},   {"U8", ElementType::kUInt8},    {"I8", ElementType::kInt8},
      {"U16", ElementType::kUInt16},  {"I16", ElementType::kInt16},   {"U32", ElementType::kUInt32},
      {"I32", ElementType::kInt32},   {"U64", ElementType::kUInt64},  {"I64", ElementType::kInt64},
      {"F16", ElementType::kFloat16}, {"F32", ElementType::kFloat32}, {"F64", ElementType::kFloat64},
      {"BF16", ElementType::kBFloat16}};
  // JSON keys in reverse; data in this order, then a 0-d F64 and an empty F32 [0, 4].
  ASSERT_EQ(f.tensors.size(), dtypes.size() + 2);
  for (size_t i = 0; i < dtypes.size(); ++i) {
    SCOPED_TRACE(dtypes[i].first);
    const NamedTensor& t = f.tensors[i];
    EXPECT_EQ(t.name, dtypes[i].first);
    EXPECT_EQ(t.tensor.type, dtypes[i].second);
    EXPECT_EQ(t.tensor.shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(static_cast<int64_t>(t.tensor.data.size()), 6 * element_size(dtypes[i].second));
    EXPECT_EQ(t.tensor.to_double(), formula_values(dtypes[i].second, 6, static_cast<int64_t>(i)));
  }
  const NamedTensor& scalar = f.tensors[dtypes.size()];
  EXPECT_EQ(scalar.name, "scalar");
  EXPECT_TRUE(scalar.tensor.shape.empty());
  EXPECT_EQ(scalar.tensor.numel(), 1);
  EXPECT_EQ(scalar.tensor.to_double(), formula_values(ElementType::kFloat64, 1, 20));
  const NamedTensor& empty = f.tensors.back();
  EXPECT_EQ(empty.name, "empty");
  EXPECT_EQ(empty.tensor.shape, (std::vector<int64_t>{0, 4}));
  EXPECT_TRUE(empty.tensor.data.empty());
}

TEST(SafetensorsRead, AcceptsStrictJsonInAnySpelling) {
  // Whitespace between tokens, keys in any order, escapes in names, padding
  // or none, numbers with many digits: all the same file.
  const std::string data("\x00\x00\x80\x3f\x00\x00\x00\xc0", 8);  // float32 1, -2
  const std::vector<std::pair<std::string, std::string>> headers = {
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", "w"},
      {"{ \"w\" :\t{\r\n\"data_offsets\" : [ 0 , 8 ] , \"shape\":[2], \"dtype\":\"F32\" } }        ", "w"},
      {R"({"\u0077\/\"\\\b\f\n\r\t\u00e9\ud83d\ude00":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
       "w/\"\\\b\f\n\r\t\xc3\xa9\xf0\x9f\x98\x80"},
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"__metadata__":{}})", "w"},
      {R"({"\u00E9":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", "\xc3\xa9"},  // upper-case hex
  };
  for (const auto& [header, name] : headers) {
    SCOPED_TRACE(header);
    const std::string bytes = safetensors_bytes(header, data);
    const SafetensorsFile f = parse_safetensors(std::as_bytes(std::span(bytes.data(), bytes.size())), "memory");
    ASSERT_EQ(f.tensors.size(), 1u);
    EXPECT_EQ(f.tensors[0].name, name);
    EXPECT_EQ(f.tensors[0].tensor.shape, (std::vector<int64_t>{2}));
    EXPECT_EQ(f.tensors[0].tensor.to_double(), (std::vector<double>{1.0, -2.0}));
  }
}

TEST(SafetensorsRead, EmptyFilesAndEmptyTensors) {
  // No tensors at all; empty tensors sharing an offset with their neighbours.
  const std::string none = safetensors_bytes("{}      ", "");
  EXPECT_TRUE(parse_safetensors(std::as_bytes(std::span(none.data(), none.size())), "m").tensors.empty());
  const std::string header =
      R"({"b":{"dtype":"F64","shape":[0],"data_offsets":[4,4]},"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
      R"("c":{"dtype":"I32","shape":[1],"data_offsets":[4,8]},"z":{"dtype":"F32","shape":[3,0],"data_offsets":[0,0]}})";
  const std::string bytes = safetensors_bytes(header, std::string("abcd\x01\x00\x00\x00", 8));
  const SafetensorsFile f = parse_safetensors(std::as_bytes(std::span(bytes.data(), bytes.size())), "m");
  std::vector<std::string> names;
  for (const auto& t : f.tensors) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"z", "a", "b", "c"}));  // by (begin, end)
  EXPECT_EQ(f.tensors[3].tensor.to_double(), (std::vector<double>{1.0}));
  EXPECT_EQ(f.tensors[1].tensor.to_double(), (std::vector<double>{'a', 'b', 'c', 'd'}));
}

TEST(SafetensorsRead, DataBytesSpelledOut) {
  // safetensors data is little-endian by definition: the bytes 00 00 80 3f are float32 1.0.
  const std::string bytes =
      safetensors_bytes(R"({"w":{"dtype":"F32","shape":[],"data_offsets":[0,4]}})", std::string("\x00\x00\x80\x3f", 4));
  EXPECT_EQ(parse_safetensors(std::as_bytes(std::span(bytes.data(), bytes.size())), "m").tensors[0].tensor.to_double(),
            (std::vector<double>{1.0}));
}

}  // namespace
}  // namespace posenc::io
