// The reader accepts files written by numpy itself and files assembled byte
// by byte in spellings numpy does not write but Python reads the same way.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "checkpoint_data.h"
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

TEST(NpyRead, NumpyFilesOfEveryDtypeByteOrderAndVersion) {
  // Written by np.lib.format.write_array (make_checkpoint_files.py): the seed
  // of each file's values is the dtype's index in kTypeCodes.
  int64_t seed = 0;
  int files = 0;
  for (const auto& [code, type] : testing::kTypeCodes) {
    const bool one_byte = element_size(type) == 1;
    for (std::string order : one_byte ? std::vector<std::string>{"na"} : std::vector<std::string>{"le", "be"}) {
      for (int major : {1, 2, 3}) {
        const std::string name = std::string(code) + "_" + order + "_v" + std::to_string(major) + ".npy";
        SCOPED_TRACE(name);
        const StoredTensor t = read_npy_tensor(testing::data_file(name));
        EXPECT_EQ(t.type, type);
        EXPECT_EQ(t.shape, (std::vector<int64_t>{2, 3}));
        EXPECT_EQ(t.to_double(), testing::formula_values(type, 6, seed));
        ++files;
      }
    }
    ++seed;
  }
  EXPECT_EQ(files, 3 * 3 + 9 * 2 * 3);
}

TEST(NpyRead, BigEndianBytesAreSwapped) {
  // float16 bit patterns (subnormals, inf, -0, NaN) come out identical from either byte order.
  const std::vector<uint16_t> bits = {0x0001, 0x03ff, 0x0400, 0x7bff, 0x7c00, 0xfc00, 0x8000, 0x7e00};
  for (std::string name : {"f2_special_le.npy", "f2_special_be.npy"}) {
    SCOPED_TRACE(name);
    const StoredTensor t = read_npy_tensor(testing::data_file(name));
    EXPECT_EQ(t.type, ElementType::kFloat16);
    EXPECT_EQ(testing::to_string(t.data), raw(bits));
  }
  // Spelled out: '>i4' 0x01020304 and -2.
  TempDir dir;
  write_bytes(dir.file("be.npy"), npy_bytes(1, "{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }\n",
                                            std::string("\x01\x02\x03\x04\xff\xff\xff\xfe", 8)));
  EXPECT_EQ(read_npy_tensor(dir.file("be.npy")).to_double(), (std::vector<double>{16909060.0, -2.0}));
  // The legacy reader swaps as well.
  EXPECT_EQ(read_npy(testing::data_file("f8_be_v1.npy")).values<double>(), (std::vector<double>{2.625, 7.25, 11.875, -8.625, -4.0, 0.625}));
}

TEST(NpyRead, FilesNumpyWritesForOtherDtypesAreRefused) {
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"refuse_object.npy", "object arrays ('|O') are not supported: they hold pickled Python objects"},
      {"refuse_complex.npy", "complex arrays ('<c8') are not supported; posenc reads numeric arrays only"},
      {"refuse_unicode.npy", "string arrays ('<U2') are not supported; posenc reads numeric arrays only"},
      {"refuse_bytes.npy", "string arrays ('|S2') are not supported; posenc reads numeric arrays only"},
      {"refuse_void.npy", "void arrays ('|V4') are not supported; posenc reads numeric arrays only"},
      {"refuse_datetime.npy", "datetime arrays ('<M8[D]') are not supported; posenc reads numeric arrays only"},
      {"refuse_structured.npy",
       "structured arrays (descr [('x', '<f4'), ('y', '<i4')]) are not supported; posenc reads numeric arrays only"},
      {"refuse_structured_utf8_v3.npy",
       "structured arrays (descr [('\\xcf\\x80', '<f4')]) are not supported; posenc reads numeric arrays only"},
      {"refuse_fortran.npy",
       "fortran_order True (column-major data) is not supported; save a C-order array (numpy.ascontiguousarray)"},
  };
  for (const auto& [name, what] : refused) {
    SCOPED_TRACE(name);
    const std::string path = testing::data_file(name);
    EXPECT_EQ(testing::error_of<std::runtime_error>([&] { read_npy_tensor(path); }), "[npy] " + path + ": " + what);
  }
}

TEST(NpyRead, ReadNpyKeepsItsThreeTypes) {
  const std::string path = testing::data_file("u1_na_v1.npy");
  EXPECT_EQ(testing::error_of<std::runtime_error>([&] { read_npy(path); }),
            "[npy] " + path +
                ": holds uint8 values; read_npy returns float32, float64 or int64 arrays (read_npy_tensor reads every "
                "numeric type)");
  EXPECT_EQ(read_npy(testing::data_file("i8_be_v3.npy")).values<int64_t>(), (std::vector<int64_t>{-12, 25, 62, 99, -65, -28}));
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
