// The reader accepts files written by numpy itself and files assembled byte
// by byte in spellings numpy does not write but Python reads the same way.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "io_test_util.h"
#include "numpy_golden.h"
#include "posenc/io/npy.h"

namespace posenc::io {
namespace {

using testing::npy_bytes;
using testing::raw;
using testing::TempDir;
using testing::write_bytes;

NpyArray read_from(const TempDir& dir, std::string_view bytes) {
  const std::string path = dir.file("hand.npy");
  write_bytes(path, bytes);
  return read_npy(path);
}

TEST(NpyRead, FilesWrittenByNumpy) {
  TempDir dir;
  const NpyArray a = read_from(dir, testing::numpy_float32_2x3());
  EXPECT_EQ(a.dtype(), DType::kFloat32);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a.values<float>(), (std::vector<float>{1.5f, -2.0f, 0.25f, 3.0f, 4.0f, 5.0f}));

  const NpyArray b = read_from(dir, testing::numpy_int64_scalar());
  EXPECT_EQ(b.dtype(), DType::kInt64);
  EXPECT_TRUE(b.shape.empty());
  EXPECT_EQ(b.values<int64_t>(), (std::vector<int64_t>{-7}));

  const NpyArray c = read_from(dir, testing::numpy_float64_pair());
  EXPECT_EQ(c.values<double>(), (std::vector<double>{0.1, -1e300}));

  const NpyArray d = read_from(dir, testing::numpy_float32_empty());
  EXPECT_EQ(d.shape, (std::vector<int64_t>{2, 0}));
  EXPECT_TRUE(d.values<float>().empty());
}

TEST(NpyRead, HandWrittenFloat64BytesSpelledOut) {
  // 1.0 = 3ff0000000000000, -0.5 = bfe0000000000000, little-endian.
  const std::string data("\x00\x00\x00\x00\x00\x00\xf0\x3f\x00\x00\x00\x00\x00\x00\xe0\xbf", 16);
  TempDir dir;
  const NpyArray a = read_from(dir, npy_bytes(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }\n", data));
  EXPECT_EQ(a.dtype(), DType::kFloat64);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(a.values<double>(), (std::vector<double>{1.0, -0.5}));
}

TEST(NpyRead, AcceptsVersions2And3) {
  TempDir dir;
  for (int major : {2, 3}) {
    SCOPED_TRACE(major);
    const NpyArray a = read_from(
        dir, npy_bytes(major, "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }\n", raw<int64_t>({1, -2, 3})));
    EXPECT_EQ(a.values<int64_t>(), (std::vector<int64_t>{1, -2, 3}));
  }
}

TEST(NpyRead, AcceptsOtherSpellingsOfTheSameHeader) {
  // Header text that numpy does not write but Python reads as the same dict.
  const std::vector<std::string> headers = {
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2)}",               // no trailing comma, no padding
      "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2, 2,), }\n",  // double quotes, trailing comma in
                                                                                 // tuple
      "{'shape': (2, 2), 'descr': '=f4', 'fortran_order': False}   \n",  // other key order, '=' (native) byte order
      "  {  'descr' :'<f4' ,\t'fortran_order':False,'shape':( 2 ,2 ) , }\r\n",  // whitespace everywhere
  };
  TempDir dir;
  for (const std::string& header : headers) {
    SCOPED_TRACE(header);
    const NpyArray a = read_from(dir, npy_bytes(1, header, raw<float>({1, 2, 3, 4})));
    EXPECT_EQ(a.dtype(), DType::kFloat32);
    EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 2}));
    EXPECT_EQ(a.values<float>(), (std::vector<float>{1, 2, 3, 4}));
  }
}

TEST(NpyRead, AcceptsEmptyArrays) {
  TempDir dir;
  const NpyArray a = read_from(dir, npy_bytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (0,), }\n", ""));
  EXPECT_EQ(a.shape, (std::vector<int64_t>{0}));
  EXPECT_EQ(a.size(), 0);
  // A zero dimension makes any other dimension harmless, even a huge one.
  const NpyArray b = read_from(
      dir, npy_bytes(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904, 0, 3), }\n", ""));
  EXPECT_EQ(b.shape, (std::vector<int64_t>{int64_t{1} << 62, 0, 3}));
  EXPECT_EQ(b.size(), 0);
}

TEST(NpyRead, KeepsSpecialValuesBitForBit) {
  const std::vector<double> values = {-0.0, std::numeric_limits<double>::infinity(),
                                      std::numeric_limits<double>::denorm_min(), std::nan("")};
  TempDir dir;
  const NpyArray a =
      read_from(dir, npy_bytes(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (4,), }\n", raw(values)));
  EXPECT_EQ(raw(a.values<double>()), raw(values));
}

TEST(NpyRead, ParseNpyReadsMemoryLikeAFile) {
  const std::string bytes =
      npy_bytes(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }\n", raw<int64_t>({5, 6}));
  const NpyArray a = parse_npy(std::as_bytes(std::span(bytes.data(), bytes.size())), "memory");
  EXPECT_EQ(a.values<int64_t>(), (std::vector<int64_t>{5, 6}));
  EXPECT_EQ(
      testing::error_of<std::invalid_argument>([&] { parse_npy(std::as_bytes(std::span(bytes.data(), 3)), "memory"); }),
      "[npy] memory: not a .npy file: it must start with \\x93NUMPY, got '\\x93NU'");
}

TEST(NpyRead, ValuesOfTheWrongTypeAreRefused) {
  NpyArray a;
  a.data = std::vector<double>{1.0};
  EXPECT_EQ(testing::error_of<std::invalid_argument>([&] { a.values<float>(); }),
            "[npy] array holds float64 values, asked for float32");
}

TEST(NpyRead, UnreadablePathsThrowRuntimeErrors) {
  TempDir dir;
  const std::string missing = dir.file("missing.npy");
  EXPECT_EQ(testing::error_of<std::runtime_error>([&] { read_npy(missing); }),
            "[npy] " + missing + ": cannot open: No such file or directory");
  EXPECT_EQ(testing::error_of<std::runtime_error>([&] { read_npy(dir.path().string()); }),
            "[npy] " + dir.path().string() + ": not a regular file");
}

}  // namespace
}  // namespace posenc::io
