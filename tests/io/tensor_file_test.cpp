// Tensors whatever their file: element types, exact widening of float16 and
// bfloat16, loading by name from checkpoint layouts, saving by extension.
#include "posenc/io/tensor_file.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "checkpoint_data.h"
#include "io_test_util.h"
#include "posenc/io/npy.h"
#include "posenc/io/safetensors.h"

namespace posenc::io {
namespace {

using testing::data_file;
using testing::error_of;
using testing::TempDir;

StoredTensor of_bits(ElementType type, const std::vector<uint16_t>& bits) {
  StoredTensor t;
  t.type = type;
  t.shape = {static_cast<int64_t>(bits.size())};
  t.data.resize(bits.size() * 2);
  std::memcpy(t.data.data(), bits.data(), t.data.size());
  return t;
}

template <class T>
StoredTensor of_values(ElementType type, const std::vector<T>& values) {
  StoredTensor t;
  t.type = type;
  t.shape = {static_cast<int64_t>(values.size())};
  t.data.resize(values.size() * sizeof(T));
  std::memcpy(t.data.data(), values.data(), t.data.size());
  return t;
}

// Same value, or both NaN; -0 differs from +0.
void expect_same(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE(i);
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << got[i];
    } else {
      EXPECT_EQ(got[i], want[i]);
      EXPECT_EQ(std::signbit(got[i]), std::signbit(want[i]));
    }
  }
}

TEST(TensorFile, ElementTypeNamesAndSizes) {
  const std::vector<std::tuple<ElementType, std::string_view, int64_t>> table = {
      {ElementType::kBool, "bool", 1},       {ElementType::kUInt8, "uint8", 1},     {ElementType::kInt8, "int8", 1},
      {ElementType::kUInt16, "uint16", 2},   {ElementType::kInt16, "int16", 2},    {ElementType::kUInt32, "uint32", 4},
      {ElementType::kInt32, "int32", 4},     {ElementType::kUInt64, "uint64", 8},  {ElementType::kInt64, "int64", 8},
      {ElementType::kFloat16, "float16", 2}, {ElementType::kBFloat16, "bfloat16", 2},
      {ElementType::kFloat32, "float32", 4}, {ElementType::kFloat64, "float64", 8}};
  for (const auto& [type, name, size] : table) {
    EXPECT_EQ(element_type_name(type), name);
    EXPECT_EQ(element_size(type), size) << name;
  }
}

TEST(TensorFile, Float16WidensExactly) {
  // IEEE 754 binary16 values, written out: zeros, the smallest and largest
  // subnormals, the smallest normal, 1, the largest finite, infinities, NaN.
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  expect_same(of_bits(ElementType::kFloat16, {0x0000, 0x8000, 0x0001, 0x03ff, 0x0400, 0x3c00, 0xc000, 0x3555, 0x7bff,
                                              0xfbff, 0x7c00, 0xfc00, 0x7e00, 0xfc01})
                  .to_double(),
              {0.0, -0.0, 5.9604644775390625e-08, 6.0975551605224609e-05, 6.103515625e-05, 1.0, -2.0,
               0.333251953125, 65504.0, -65504.0, inf, -inf, nan, nan});
}

#if defined(__FLT16_MAX__) && !defined(__clang__)
TEST(TensorFile, Float16MatchesTheCompilersFloat16OnEveryBitPattern) {
  // The compiler's _Float16 conversion is an independent implementation.
  std::vector<uint16_t> bits(65536);
  for (uint32_t b = 0; b < 65536; ++b) bits[b] = static_cast<uint16_t>(b);
  const std::vector<double> got = of_bits(ElementType::kFloat16, bits).to_double();
  for (uint32_t b = 0; b < 65536; ++b) {
    _Float16 h;
    std::memcpy(&h, &bits[b], 2);
    const double want = static_cast<double>(h);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got[b])) << b;
    } else {
      ASSERT_EQ(got[b], want) << b;
      ASSERT_EQ(std::signbit(got[b]), std::signbit(want)) << b;
    }
  }
}
#endif

TEST(TensorFile, BFloat16WidensExactly) {
  // bfloat16 = the upper 16 bits of float32: 1, -2, pi rounded (3.140625),
  // the smallest subnormal 2^-133, the smallest normal 2^-126, the largest
  // finite (2 - 2^-7) * 2^127, infinities, NaN, -0.
  const double inf = std::numeric_limits<double>::infinity();
  expect_same(of_bits(ElementType::kBFloat16,
                      {0x3f80, 0xc000, 0x4049, 0x0001, 0x0080, 0x7f7f, 0x7f80, 0xff80, 0x7fc0, 0x8000})
                  .to_double(),
              {1.0, -2.0, 3.140625, std::ldexp(1.0, -133), std::ldexp(1.0, -126), std::ldexp(255.0, 120), inf, -inf,
               std::numeric_limits<double>::quiet_NaN(), -0.0});
}

TEST(TensorFile, IntegersAndBoolsWiden) {
  expect_same(of_values<int8_t>(ElementType::kInt8, {-128, 127, 0}).to_double(), {-128, 127, 0});
  expect_same(of_values<uint16_t>(ElementType::kUInt16, {65535, 1}).to_double(), {65535, 1});
  expect_same(of_values<int32_t>(ElementType::kInt32, {INT32_MIN, INT32_MAX}).to_double(), {-2147483648.0, 2147483647.0});
  // Beyond 2^53 the nearest double: 2^64 - 1 -> 2^64, INT64_MIN exact.
  expect_same(of_values<uint64_t>(ElementType::kUInt64, {UINT64_MAX, 3}).to_double(), {18446744073709551616.0, 3});
  expect_same(of_values<int64_t>(ElementType::kInt64, {INT64_MIN, (int64_t{1} << 53) + 1}).to_double(),
              {-9223372036854775808.0, 9007199254740992.0});
  // bool bytes other than 0/1 (numpy keeps them) are true.
  expect_same(of_values<uint8_t>(ElementType::kBool, {0, 1, 2, 255}).to_double(), {0, 1, 1, 1});
  expect_same(of_values<float>(ElementType::kFloat32, {0.1f, -0.0f}).to_double(), {static_cast<double>(0.1f), -0.0});
}

TEST(TensorFile, ToDoubleRefusesDataThatDoesNotMatchTheShape) {
  StoredTensor t = of_values<float>(ElementType::kFloat32, {1, 2, 3});
  t.shape = {2, 2};
  EXPECT_EQ(error_of<std::invalid_argument>([&] { t.to_double(); }),
            "[tensor file] a float32 tensor of shape [2, 2] needs 16 bytes of data, got 12");
  t.shape = {};
  EXPECT_EQ(error_of<std::invalid_argument>([&] { t.to_double(); }),
            "[tensor file] a float32 tensor of shape [] needs 4 bytes of data, got 12");
  t.shape = {-3};
  EXPECT_EQ(error_of<std::invalid_argument>([&] { t.to_double(); }),
            "[tensor file] a float32 tensor of shape [-3] needs an impossible number of bytes of data, got 12");
  EXPECT_EQ(t.numel(), -3);  // numel trusts the shape; to_double does not
}

TEST(TensorFile, AZeroDimensionMakesAnEmptyTensorWhateverTheOthers) {
  // As numpy and both readers have it: (2^62, 4, 0) holds nothing, no overflow.
  StoredTensor t;
  t.type = ElementType::kFloat64;
  t.shape = {int64_t{1} << 62, 4, 0, 1 << 30};
  EXPECT_EQ(t.numel(), 0);
  EXPECT_TRUE(t.to_double().empty());
  TempDir dir;
  const std::vector<NamedTensor> one = {{"w", t}};
  save_tensors(dir.file("z.safetensors"), one);
  save_tensors(dir.file("z.npy"), one);
  EXPECT_EQ(load_tensor(dir.file("z.safetensors")).tensor.shape, t.shape);
  EXPECT_EQ(load_tensor(dir.file("z.npy")).tensor.shape, t.shape);
  // Without the zero the same shape has no count.
  t.shape = {int64_t{1} << 62, 4, 1 << 30};
  EXPECT_EQ(error_of<std::invalid_argument>([&] { t.to_double(); }),
            "[tensor file] a float64 tensor of shape [4611686018427387904, 4, 1073741824] needs an impossible number "
            "of bytes of data, got 0");
}

TEST(TensorFile, PositionTableScores) {
  // Names real checkpoints give their position tables.
  for (std::string_view name : {"bert.embeddings.position_embeddings.weight", "roberta.embeddings.position_embeddings.weight",
                                "embeddings.position_embeddings.weight", "transformer.wpe.weight", "wpe.weight",
                                "model.decoder.embed_positions.weight", "vit.embeddings.position_embeddings",
                                "text_model.embeddings.position_embedding.weight", "pos_embed", "visual.positional_embedding",
                                "positional_embedding", "pos_embedding"}) {
    EXPECT_EQ(position_table_score(name), 2) << name;
  }
  // Names that only speak of position embeddings.
  for (std::string_view name : {"decoder_pos_embed", "encoder.abs_pos_emb.weight", "layers.0.rel_pos_embedding"}) {
    EXPECT_EQ(position_table_score(name), 1) << name;
  }
  // Everything else in a checkpoint.
  for (std::string_view name : {"bert.embeddings.word_embeddings.weight", "bert.embeddings.token_type_embeddings.weight",
                                "bert.embeddings.LayerNorm.weight", "transformer.wte.weight", "wpe.bias",
                                "model.decoder.embed_tokens.weight", "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
                                "position_ids", "weight", "", "transformer.wpe", "xpos_embed.scale"}) {
    EXPECT_EQ(position_table_score(name), 0) << name;
  }
}

TEST(TensorFile, LoadTensorByNameFromCheckpointLayouts) {
  const NamedTensor bert = load_tensor(data_file("bert_like.safetensors"), "bert.embeddings.position_embeddings.weight");
  EXPECT_EQ(bert.name, "bert.embeddings.position_embeddings.weight");
  EXPECT_EQ(bert.tensor.shape, (std::vector<int64_t>{16, 8}));
  EXPECT_EQ(bert.tensor.to_double(), testing::formula_values(ElementType::kFloat32, 128, 2));
  const NamedTensor ln = load_tensor(data_file("bert_like.safetensors"), "bert.embeddings.LayerNorm.bias");
  EXPECT_EQ(ln.tensor.to_double(), testing::formula_values(ElementType::kFloat32, 8, 5));
}

TEST(TensorFile, LoadTensorWithoutANamePicksThePositionTable) {
  const NamedTensor bert = load_tensor(data_file("bert_like.safetensors"));
  EXPECT_EQ(bert.name, "bert.embeddings.position_embeddings.weight");
  const NamedTensor gpt2 = load_tensor(data_file("gpt2_like.safetensors"));
  EXPECT_EQ(gpt2.name, "transformer.wpe.weight");
  EXPECT_EQ(gpt2.tensor.shape, (std::vector<int64_t>{32, 8}));
  EXPECT_EQ(gpt2.tensor.to_double(), testing::formula_values(ElementType::kFloat32, 256, 2));
}

class TensorFileIn : public ::testing::Test {
 protected:
  std::string save(std::string_view file, const std::vector<std::string>& names) {
    std::vector<NamedTensor> tensors;
    for (const std::string& n : names) tensors.push_back({n, of_values<float>(ElementType::kFloat32, {1, 2})});
    const std::string path = dir_.file(file);
    save_tensors(path, tensors);
    return path;
  }
  TempDir dir_;
};

TEST_F(TensorFileIn, ChoosingRequiresAUniqueBestName) {
  // MAE: pos_embed (2) beats decoder_pos_embed (1).
  const std::string mae = save("mae.safetensors", {"cls_token", "decoder_pos_embed", "pos_embed"});
  EXPECT_EQ(load_tensor(mae).name, "pos_embed");
  // BART: two tables of the same score; the caller must name one.
  const std::string bart =
      save("bart.safetensors", {"model.encoder.embed_positions.weight", "model.decoder.embed_positions.weight",
                                "model.shared.weight"});
  EXPECT_EQ(error_of<std::invalid_argument>([&] { load_tensor(bart); }),
            "[tensor file] " + bart +
                " holds 3 tensors; name one of: model.decoder.embed_positions.weight, "
                "model.encoder.embed_positions.weight, model.shared.weight");
  // No position table at all.
  const std::string plain = save("plain.safetensors", {"b", "a"});
  EXPECT_EQ(error_of<std::invalid_argument>([&] { load_tensor(plain); }),
            "[tensor file] " + plain + " holds 2 tensors; name one of: a, b");
  // A single tensor is the one, whatever its name.
  EXPECT_EQ(load_tensor(save("one.safetensors", {"anything"})).name, "anything");
  const std::string none = save("none.safetensors", {});
  EXPECT_EQ(error_of<std::invalid_argument>([&] { load_tensor(none); }), "[tensor file] " + none + " holds no tensors");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { load_tensor(none, "w"); }),
            "[tensor file] " + none + " has no tensor 'w'; it holds none");
}

TEST_F(TensorFileIn, AMissingNameListsTheNamesPresent) {
  const std::string gpt2 = data_file("gpt2_like.safetensors");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { load_tensor(gpt2, "transformer.wpe"); }),
            "[tensor file] " + gpt2 +
                " has no tensor 'transformer.wpe'; it holds: transformer.h.0.attn.c_attn.bias, "
                "transformer.h.0.attn.c_attn.weight, transformer.h.0.ln_1.bias, transformer.h.0.ln_1.weight, "
                "transformer.ln_f.bias, transformer.ln_f.weight, transformer.wpe.weight, transformer.wte.weight");
  // Many names: the first 50 in order, then a count.
  std::vector<std::string> names;
  for (int i = 0; i < 60; ++i) names.push_back(std::string("t").append(std::to_string(100 + i)));
  const std::string many = save("many.safetensors", names);
  std::string listed;
  for (int i = 0; i < 50; ++i) listed += (i ? ", t" : "t") + std::to_string(100 + i);
  EXPECT_EQ(error_of<std::invalid_argument>([&] { load_tensor(many, "x"); }),
            "[tensor file] " + many + " has no tensor 'x'; it holds: " + listed + ", ... (10 more)");
}

TEST_F(TensorFileIn, NpyFilesHoldOneUnnamedArray) {
  const std::string path = data_file("f4_be_v2.npy");
  const std::vector<NamedTensor> all = load_tensors(path);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].name, "");
  EXPECT_EQ(all[0].tensor.to_double(), testing::formula_values(ElementType::kFloat32, 6, 10));
  EXPECT_EQ(load_tensor(path).tensor.data, all[0].tensor.data);
  EXPECT_EQ(error_of<std::invalid_argument>([&] { load_tensor(path, "w"); }),
            "[tensor file] " + path + " holds one unnamed array; --tensor does not apply");
}

TEST_F(TensorFileIn, LoadTensorsReadsEveryTensorInFileOrder) {
  const std::vector<NamedTensor> all = load_tensors(data_file("bert_like.safetensors"));
  ASSERT_EQ(all.size(), 8u);
  EXPECT_EQ(all[0].name, "bert.embeddings.word_embeddings.weight");
  EXPECT_EQ(all[7].name, "bert.pooler.dense.weight");
}

TEST_F(TensorFileIn, UnsupportedExtensions) {
  for (std::string name : {"x.bin", "x.pt", "x.NPY", "npy", ".npy.gz", "x.safetensors.tmp"}) {
    const std::string path = dir_.file(name);
    EXPECT_EQ(error_of<std::invalid_argument>([&] { load_tensors(path); }),
              "[tensor file] " + path + ": unsupported file type; expected .npy or .safetensors");
    EXPECT_EQ(error_of<std::invalid_argument>([&] { load_tensor(path); }),
              "[tensor file] " + path + ": unsupported file type; expected .npy or .safetensors");
    EXPECT_EQ(error_of<std::invalid_argument>([&] { save_tensors(path, {}); }),
              "[tensor file] " + path + ": unsupported file type; expected .npy or .safetensors");
  }
}

TEST_F(TensorFileIn, SaveAndLoadRoundTripBothFormats) {
  const std::vector<NamedTensor> tensors = {
      {"w", of_values<int16_t>(ElementType::kInt16, {-1, 2, 300})},
      {"h", of_bits(ElementType::kFloat16, {0x3c00, 0x0001})},
      {"b", of_bits(ElementType::kBFloat16, {0x4049})},
  };
  const std::string st = dir_.file("t.safetensors");
  save_tensors(st, tensors);
  const std::vector<NamedTensor> back = load_tensors(st);
  ASSERT_EQ(back.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(back[i].name, tensors[i].name);
    EXPECT_EQ(back[i].tensor.data, tensors[i].tensor.data);
  }
  for (size_t i = 0; i < 2; ++i) {  // .npy: one at a time, and no bfloat16
    const std::string npy = dir_.file(std::string("t").append(std::to_string(i)).append(".npy"));
    save_tensors(npy, std::span(&tensors[i], 1));
    const NamedTensor t = load_tensor(npy);
    EXPECT_EQ(t.tensor.type, tensors[i].tensor.type);
    EXPECT_EQ(t.tensor.data, tensors[i].tensor.data);
  }
  const std::string npy = dir_.file("x.npy");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { save_tensors(npy, tensors); }),
            "[tensor file] " + npy + ": a .npy file holds exactly one array, got 3 tensors");
  EXPECT_EQ(error_of<std::runtime_error>([&] { save_tensors(npy, std::span(&tensors[2], 1)); }),
            "[npy] " + npy + ": .npy has no bfloat16 type (numpy lacks one); save bfloat16 tensors as .safetensors");
  EXPECT_EQ(dir_.entries().size(), 3u);  // t.safetensors, t0.npy, t1.npy: the refusals wrote nothing
}

}  // namespace
}  // namespace posenc::io
