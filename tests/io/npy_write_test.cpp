// The writer: byte layout (checked on the raw bytes, not through the reader),
// identity with numpy's own files, round trips, atomic replacement.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "checkpoint_data.h"
#include "io_test_util.h"
#include "numpy_golden.h"
#include "posenc/io/npy.h"

namespace posenc::io {
namespace {

using testing::error_of;
using testing::raw;
using testing::read_bytes;
using testing::TempDir;

// Header length field and the offset where the data starts.
struct Layout {
  int major;
  int64_t header_length;
  int64_t data_offset;
};

Layout layout_of(const std::string& bytes) {
  const auto byte = [&](size_t i) { return static_cast<int64_t>(static_cast<unsigned char>(bytes.at(i))); };
  Layout l{static_cast<int>(byte(6)), 0, 0};
  const int length_bytes = l.major == 1 ? 2 : 4;
  for (int i = length_bytes - 1; i >= 0; --i) l.header_length = l.header_length << 8 | byte(8 + i);
  l.data_offset = 8 + length_bytes + l.header_length;
  return l;
}

TEST(NpyWrite, ReproducesNumpyByteForByte) {
  TempDir dir;
  const std::string a = dir.file("a.npy");
  write_npy(a, std::vector<float>{1.5f, -2.0f, 0.25f, 3.0f, 4.0f, 5.0f}, {2, 3});
  EXPECT_EQ(read_bytes(a), testing::numpy_float32_2x3());
  write_npy(a, std::vector<int64_t>{-7}, {});
  EXPECT_EQ(read_bytes(a), testing::numpy_int64_scalar());
  write_npy(a, std::vector<double>{0.1, -1e300}, {2});
  EXPECT_EQ(read_bytes(a), testing::numpy_float64_pair());
  write_npy(a, std::vector<float>{}, {2, 0});
  EXPECT_EQ(read_bytes(a), testing::numpy_float32_empty());
}

TEST(NpyWrite, ReproducesNumpyForEveryDtype) {
  // np.save's little-endian version-1.0 files, byte for byte (padding, growth room, '|' for 1-byte types).
  for (const auto& [code, type] : testing::kTypeCodes) {
    const std::string name = std::string(code) + (element_size(type) == 1 ? "_na_v1.npy" : "_le_v1.npy");
    SCOPED_TRACE(name);
    const std::string numpy = read_bytes(testing::data_file(name));
    const StoredTensor t = read_npy_tensor(testing::data_file(name));
    EXPECT_EQ(testing::to_string(serialize_npy(t)), numpy);
    TempDir dir;
    write_npy(dir.file("a.npy"), t);
    EXPECT_EQ(read_bytes(dir.file("a.npy")), numpy);
  }
  // 15 dimensions, where numpy's growth room moves the data start from 128 to 192.
  const std::string growth = read_bytes(testing::data_file("f4_growth_v1.npy"));
  EXPECT_EQ(testing::to_string(serialize_npy(read_npy_tensor(testing::data_file("f4_growth_v1.npy")))), growth);
  EXPECT_EQ(layout_of(growth).data_offset, 192);
  // Big-endian files read back as little-endian data, which writes numpy's '<' file.
  EXPECT_EQ(testing::to_string(serialize_npy(read_npy_tensor(testing::data_file("i4_be_v2.npy")))),
            read_bytes(testing::data_file("i4_le_v1.npy")));
}

TEST(NpyWrite, PaddingMatchesNumpyAtTheAlignmentBoundary) {
  // numpy always pads with 1..64 spaces, never 0: for shape (7,) the dict is
  // 57 bytes + 20 spaces of growth room + '\n' = 78, and 10 + 78 + 40 = 128.
  // One dimension longer by k digits shifts the padding by k, wrapping 1 -> 64.
  StoredTensor t;
  t.type = ElementType::kUInt8;
  for (int64_t first : {int64_t{7}, int64_t{70}, int64_t{700}, int64_t{7000000000}}) {
    t.shape = {first, 0};
    const std::string bytes = testing::to_string(serialize_npy(t));
    const Layout l = layout_of(bytes);
    SCOPED_TRACE(bytes);
    EXPECT_EQ(l.data_offset % 64, 0);
    const std::string header = bytes.substr(10, static_cast<size_t>(l.header_length));
    const size_t dict_end = header.find('}') + 1;
    // growth room (21 - digits of shape[0]) plus 1..64 padding spaces, then '\n'.
    const int64_t spaces = static_cast<int64_t>(header.size() - dict_end - 1);
    const int64_t growth = 21 - static_cast<int64_t>(std::to_string(first).size());
    EXPECT_GE(spaces - growth, 1);
    EXPECT_LE(spaces - growth, 64);
  }
}

TEST(NpyWrite, StoredTensorsOfEveryTypeRoundTrip) {
  TempDir dir;
  int64_t seed = 0;
  for (const auto& [code, type] : testing::kTypeCodes) {
    SCOPED_TRACE(code);
    StoredTensor t;
    t.type = type;
    t.shape = {4, 5};
    t.data.resize(static_cast<size_t>(20 * element_size(type)));
    for (size_t i = 0; i < t.data.size(); ++i) t.data[i] = static_cast<std::byte>((i * 7 + static_cast<size_t>(seed)) % 256);
    if (type == ElementType::kBool) {
      for (auto& b : t.data) b &= std::byte{1};
    }
    write_npy(dir.file("t.npy"), t);
    const StoredTensor back = read_npy_tensor(dir.file("t.npy"));
    EXPECT_EQ(back.type, type);
    EXPECT_EQ(back.shape, t.shape);
    EXPECT_EQ(back.data, t.data);
    ++seed;
  }
}

TEST(NpyWrite, StoredTensorArgumentsAreChecked) {
  TempDir dir;
  const std::string path = dir.file("a.npy");
  StoredTensor t;
  t.type = ElementType::kInt16;
  t.shape = {3};
  t.data.resize(5);
  EXPECT_EQ(error_of<std::invalid_argument>([&] { write_npy(path, t); }),
            "[npy] " + path + ": shape (3,) of int16 needs 6 bytes of data, got 5");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { serialize_npy(t); }),
            "[npy] shape (3,) of int16 needs 6 bytes of data, got 5");
  t.type = ElementType::kBFloat16;
  t.data.resize(6);
  EXPECT_EQ(error_of<std::runtime_error>([&] { write_npy(path, t); }),
            "[npy] " + path + ": .npy has no bfloat16 type (numpy lacks one); save bfloat16 tensors as .safetensors");
  EXPECT_EQ(error_of<std::runtime_error>([&] { serialize_npy(t); }),
            "[npy] .npy has no bfloat16 type (numpy lacks one); save bfloat16 tensors as .safetensors");
  EXPECT_TRUE(dir.entries().empty());
}

TEST(NpyWrite, DataStartsAtAMultipleOf64) {
  TempDir dir;
  const std::string path = dir.file("a.npy");
  // Shapes whose dicts straddle the 64-byte padding boundaries.
  const std::vector<std::vector<int64_t>> shapes = {
      {},
      {1},
      {7},
      {1, 1},
      {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
      {3, 1000000000, 0}};
  for (const auto& shape : shapes) {
    int64_t count = 1;
    for (int64_t d : shape) count *= d;
    write_npy(path, std::vector<double>(static_cast<size_t>(count), 2.0), shape);
    const std::string bytes = read_bytes(path);
    const Layout l = layout_of(bytes);
    SCOPED_TRACE(bytes.substr(0, static_cast<size_t>(l.data_offset)));
    EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
    EXPECT_EQ(l.data_offset % 64, 0);
    EXPECT_EQ(bytes[static_cast<size_t>(l.data_offset) - 1], '\n');
    EXPECT_EQ(static_cast<int64_t>(bytes.size()) - l.data_offset, count * 8);
  }
}

TEST(NpyWrite, LongHeadersUseVersion2) {
  // 30000 dimensions of 1: a dict of ~90 kB, too long for the uint16 length
  // of version 1.0 (and for the reader's 10000-byte limit).
  TempDir dir;
  const std::string path = dir.file("a.npy");
  write_npy(path, std::vector<float>{3.0f}, std::vector<int64_t>(30000, 1));
  const std::string bytes = read_bytes(path);
  const Layout l = layout_of(bytes);
  EXPECT_EQ(l.major, 2);
  EXPECT_GT(l.header_length, 0xffff);
  EXPECT_EQ(l.data_offset % 64, 0);
  EXPECT_EQ(bytes.substr(static_cast<size_t>(l.data_offset)), raw<float>({3.0f}));
}

template <class T>
void expect_round_trip(const std::vector<T>& values, const std::vector<int64_t>& shape) {
  TempDir dir;
  const std::string path = dir.file("r.npy");
  write_npy(path, values, shape);
  const NpyArray a = read_npy(path);
  EXPECT_EQ(a.dtype(), dtype_of<T>());
  EXPECT_EQ(a.shape, shape);
  EXPECT_EQ(raw(a.values<T>()), raw(values));  // bit for bit, so NaN and -0 count
  // Writing what was read gives the same file.
  write_npy(dir.file("again.npy"), a);
  EXPECT_EQ(read_bytes(dir.file("again.npy")), read_bytes(path));
}

TEST(NpyWrite, RoundTripsEachDtypeAndShape) {
  const float fnan = std::numeric_limits<float>::quiet_NaN();
  const float finf = std::numeric_limits<float>::infinity();
  const double dmin = std::numeric_limits<double>::denorm_min();
  const std::vector<std::pair<std::vector<int64_t>, int64_t>> shapes = {{{}, 1},      {{0}, 0},       {{5}, 5},
                                                                        {{3, 4}, 12}, {{2, 0, 3}, 0}, {{2, 3, 4}, 24}};
  for (const auto& [shape, count] : shapes) {
    SCOPED_TRACE(::testing::PrintToString(shape));
    std::vector<float> f(static_cast<size_t>(count));
    std::vector<double> d(static_cast<size_t>(count));
    std::vector<int64_t> i(static_cast<size_t>(count));
    for (int64_t k = 0; k < count; ++k) {
      f[k] = static_cast<float>(k) / 3.0f - 1.0f;
      d[k] = std::sin(static_cast<double>(k)) * 1e-3;
      i[k] = (k % 2 ? -1 : 1) * (int64_t{1} << (k % 63));
    }
    if (count >= 5) {
      f[1] = fnan, f[2] = -finf, f[3] = -0.0f;
      d[1] = dmin, d[2] = -0.0;
      i[1] = std::numeric_limits<int64_t>::min(), i[2] = std::numeric_limits<int64_t>::max();
    }
    expect_round_trip(f, shape);
    expect_round_trip(d, shape);
    expect_round_trip(i, shape);
  }
}

TEST(NpyWrite, RefusesAShapeThatDoesNotMatchTheData) {
  TempDir dir;
  const std::string path = dir.file("a.npy");
  EXPECT_EQ(error_of<std::invalid_argument>([&] {
              write_npy(path, std::vector<float>(11), {3, 4});
            }),
            "[npy] " + path + ": shape (3, 4) holds 12 values, got 11");
  EXPECT_EQ(error_of<std::invalid_argument>([&] {
              write_npy(path, std::vector<float>(3), {3, -1});
            }),
            "[npy] " + path + ": shape dimensions must be non-negative, got -1 in (3, -1)");
  EXPECT_TRUE(dir.entries().empty());
}

TEST(NpyWrite, ReplacesTheTargetAtomically) {
  TempDir dir;
  const std::string path = dir.file("a.npy");
  write_npy(path, std::vector<float>{1, 2}, {2});
  const std::string before = read_bytes(path);
  // A failed write leaves the old file and no temporary file behind.
  EXPECT_THROW(write_npy(path, std::vector<float>{1, 2, 3}, {2}), std::invalid_argument);
  EXPECT_EQ(read_bytes(path), before);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"a.npy"});
  // A successful one replaces it.
  write_npy(path, std::vector<float>{1, 2, 3}, {3});
  EXPECT_EQ(read_npy(path).values<float>(), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"a.npy"});
}

TEST(NpyWrite, IoFailuresThrowRuntimeErrors) {
  TempDir dir;
  const std::string nowhere = dir.file("missing/a.npy");
  EXPECT_EQ(error_of<std::runtime_error>([&] { write_npy(nowhere, std::vector<float>{1}, {1}); }),
            "[npy] " + nowhere + ": cannot create a file in '" + dir.file("missing") + "': No such file or directory");
  // The target is a directory: the rename fails and the temporary file goes.
  std::filesystem::create_directory(dir.file("taken.npy"));
  EXPECT_EQ(error_of<std::runtime_error>([&] { write_npy(dir.file("taken.npy"), std::vector<float>{1}, {1}); }),
            "[npy] " + dir.file("taken.npy") + ": cannot replace the file: Is a directory");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"taken.npy"});
}

}  // namespace
}  // namespace posenc::io
