// The writer: byte layout (checked on the raw bytes, not through the reader),
// identity with numpy's own files, round trips, atomic replacement.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

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
