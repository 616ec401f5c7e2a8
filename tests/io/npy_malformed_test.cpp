// One malformed or unsupported file per rule of the reader, each with its
// exact message. Malformed files raise std::invalid_argument; well-formed
// files the reader does not support raise std::runtime_error.
#include <gtest/gtest.h>

#include "io_test_util.h"
#include "posenc/io/npy.h"

namespace posenc::io {
namespace {

using testing::error_of;
using testing::npy_bytes;
using testing::raw;
using testing::TempDir;

class NpyMalformed : public ::testing::Test {
 protected:
  // Writes `bytes` to bad.npy and returns the message read_npy throws as E.
  template <class E = std::invalid_argument>
  std::string message(std::string_view bytes) {
    testing::write_bytes(path_, bytes);
    return error_of<E>([&] { read_npy(path_); });
  }
  // The expected message: "[npy] <path>: " + what.
  std::string expected(std::string_view what) const { return "[npy] " + path_ + ": " + std::string(what); }
  // A version 1.0 file with this header dict and `values` float32 values.
  static std::string with_header(std::string_view dict, size_t values = 2) {
    return npy_bytes(1, std::string(dict) + "\n", raw(std::vector<float>(values, 1.0f)));
  }

  TempDir dir_;
  std::string path_ = dir_.file("bad.npy");
};

TEST_F(NpyMalformed, BadMagic) {
  EXPECT_EQ(message(std::string("PK\x03\x04\x14\x00\x08\x00", 8) + "zip data"),
            expected("not a .npy file: it must start with \\x93NUMPY, got 'PK\\x03\\x04\\x14\\x00'"));
  EXPECT_EQ(message(""), expected("not a .npy file: it must start with \\x93NUMPY, got ''"));
}

TEST_F(NpyMalformed, FileEndsInsideThePreamble) {
  EXPECT_EQ(message(std::string("\x93NUMPY\x01", 7)), expected("file ends inside the preamble, after 7 bytes"));
  // Version 2.0 needs 4 length bytes, only 2 are there.
  EXPECT_EQ(message(std::string("\x93NUMPY\x02\x00\x10\x00", 10)),
            expected("file ends inside the preamble, after 10 bytes"));
}

TEST_F(NpyMalformed, BadVersion) {
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (), }\n";
  EXPECT_EQ(message(npy_bytes(4, dict, raw<float>({1}))), expected("format version must be 1.0, 2.0 or 3.0, got 4.0"));
  EXPECT_EQ(message(npy_bytes(1, 1, static_cast<uint32_t>(dict.size()), dict, raw<float>({1}))),
            expected("format version must be 1.0, 2.0 or 3.0, got 1.1"));
  EXPECT_EQ(message(npy_bytes(0, dict, raw<float>({1}))), expected("format version must be 1.0, 2.0 or 3.0, got 0.0"));
}

TEST_F(NpyMalformed, HeaderTooLong) {
  // A well-formed dict padded past numpy's 10000-byte limit.
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (), }";
  const std::string header = dict + std::string(10001 - dict.size() - 1, ' ') + "\n";
  EXPECT_EQ(message(npy_bytes(2, header, raw<float>({1}))),
            expected("header length must be at most 10000 bytes, got 10001"));
}

TEST_F(NpyMalformed, HugeHeaderLengthIsRefusedAtOnce) {
  // The largest uint32 length: refused from the preamble, nothing allocated.
  EXPECT_EQ(message(npy_bytes(2, 0, 0xffffffffu, "{}", "")),
            expected("header length must be at most 10000 bytes, got 4294967295"));
}

TEST_F(NpyMalformed, HeaderTextEncoding) {
  // 1.0 and 2.0 headers are ASCII here; 3.0 headers must be valid UTF-8.
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), '\xc3\xa9': 1}\n";
  EXPECT_EQ(message(npy_bytes(1, dict, raw<float>({1, 2}))),
            expected("malformed header dict at byte 57: expected a plain ASCII string without escapes, got '\\xc3'"));
  EXPECT_EQ(message(npy_bytes(3, dict, raw<float>({1, 2}))),
            expected("header keys must be 'descr', 'fortran_order' and 'shape', got '\\xc3\\xa9'"));
  EXPECT_EQ(message(npy_bytes(3, "{'descr': '<f4\xed\xa0\x80', 'fortran_order': False, 'shape': (2,), }\n",
                              raw<float>({1, 2}))),
            expected("format 3.0 header is not valid UTF-8 at byte 14: UTF-16 surrogate (U+D800 to U+DFFF)"));
  EXPECT_EQ(message(npy_bytes(3, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\xc0\x80\n",
                              raw<float>({1, 2}))),
            expected("format 3.0 header is not valid UTF-8 at byte 57: overlong encoding (lead byte 0xc0)"));
}

TEST_F(NpyMalformed, BigEndianDataLengthIsExactToo) {
  EXPECT_EQ(message(with_header("{'descr': '>f8', 'fortran_order': False, 'shape': (2,), }", 3)),
            expected("header declares 2 float64 values (16 bytes) but the data holds 12 bytes"));
  EXPECT_EQ(message(with_header("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", 1)),
            expected("header declares 3 bool values (3 bytes) but the data holds 4 bytes"));
}

TEST_F(NpyMalformed, HeaderPastEndOfFile) {
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (), }\n";
  EXPECT_EQ(message(npy_bytes(1, 0, 200, dict, "")),
            expected("header of 200 bytes runs past the end of the file (56 bytes follow the preamble)"));
}

TEST_F(NpyMalformed, UnknownKey) {
  EXPECT_EQ(message(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'order': 'C', }")),
            expected("header keys must be 'descr', 'fortran_order' and 'shape', got 'order'"));
  EXPECT_EQ(message(with_header("{'descr': '<f4', 'fortran_order': False, (2,): 'shape', }")),
            expected("header keys must be strings, got (2,)"));
}

TEST_F(NpyMalformed, MissingKey) {
  EXPECT_EQ(message(with_header("{'descr': '<f4', 'fortran_order': False, }")),
            expected("header lacks the key 'shape'"));
  EXPECT_EQ(message(with_header("{}")), expected("header lacks the key 'descr'"));
}

TEST_F(NpyMalformed, DuplicateKey) {
  EXPECT_EQ(message(with_header("{'descr': '<f4', 'fortran_order': False, 'descr': '<f4', 'shape': (2,), }")),
            expected("header repeats the key 'descr'"));
}

TEST_F(NpyMalformed, FortranOrder) {
  EXPECT_EQ(message<std::runtime_error>(with_header("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }")),
            expected("fortran_order True (column-major data) is not supported; save a C-order array "
                     "(numpy.ascontiguousarray)"));
  EXPECT_EQ(message(with_header("{'descr': '<f4', 'fortran_order': 0, 'shape': (2,), }")),
            expected("malformed header dict at byte 34: expected a string, True, False or a tuple, got '0'"));
  EXPECT_EQ(message(with_header("{'descr': '<f4', 'fortran_order': 'no', 'shape': (2,), }")),
            expected("fortran_order must be True or False, got 'no'"));
}

TEST_F(NpyMalformed, BadDtype) {
  // Not a numeric descr numpy writes: no byte order, unknown sizes, Python names.
  for (std::string descr : {"float32", "", "f4", "<f16", "<i3", "<b2", "<f", "<F4", "<u1 "}) {
    SCOPED_TRACE(descr);
    EXPECT_EQ(
        message<std::runtime_error>(with_header("{'descr': '" + descr + "', 'fortran_order': False, 'shape': (2,), }")),
        expected("descr must be a numeric type (b1, u1, i1, u2, i2, u4, i4, u8, i8, f2, f4 or f8) after a byte order "
                 "('<', '>', '=', or '|' for 1-byte types), got '" +
                 descr + "'"));
  }
  // '|' (byte order not applicable) only for 1-byte types.
  EXPECT_EQ(message<std::runtime_error>(with_header("{'descr': '|f4', 'fortran_order': False, 'shape': (2,), }")),
            expected("descr '|f4' has byte order '|' (not applicable), which only 1-byte types take; numpy writes "
                     "'<f4' or '>f4'"));
  EXPECT_EQ(message(with_header("{'descr': True, 'fortran_order': False, 'shape': (2,), }")),
            expected("descr must be a string, got True"));
}

TEST_F(NpyMalformed, NonNumericDtypesAreNamed) {
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"<c8", "complex"}, {">c16", "complex"}, {"<U5", "string"},      {"|S3", "string"},     {"|a3", "string"},
      {"|V8", "void"},    {"<M8[ns]", "datetime"}, {"<m8[s]", "timedelta"}};
  for (const auto& [descr, kind] : refused) {
    SCOPED_TRACE(descr);
    EXPECT_EQ(
        message<std::runtime_error>(with_header("{'descr': '" + descr + "', 'fortran_order': False, 'shape': (2,), }")),
        expected(kind + " arrays ('" + descr + "') are not supported; posenc reads numeric arrays only"));
  }
  // Structured: a list of fields, refused whole (brackets inside strings do not count).
  EXPECT_EQ(message<std::runtime_error>(with_header(
                "{'descr': [('x', '<f4'), ('y]', [('z', '|u1')], (2,))], 'fortran_order': False, 'shape': (2,), }")),
            expected("structured arrays (descr [('x', '<f4'), ('y]', [('z', '|u1')], (2,))]) are not supported; "
                     "posenc reads numeric arrays only"));
  EXPECT_EQ(message(with_header("{'descr': [('x', '<f4'), 'fortran_order': False, 'shape': (2,), }")),
            expected("malformed header dict at byte 66: expected a closing ']', got the end of the header"));
  EXPECT_EQ(message(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': [2], }")),
            expected("shape must be a tuple of integers, got [2]"));
}

TEST_F(NpyMalformed, ObjectDtype) {
  EXPECT_EQ(message<std::runtime_error>(with_header("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }")),
            expected("object arrays ('|O') are not supported: they hold pickled Python objects"));
}

TEST_F(NpyMalformed, NegativeDimension) {
  EXPECT_EQ(message(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -1), }")),
            expected("shape dimensions must be non-negative, got -1 in (2, -1)"));
}

TEST_F(NpyMalformed, OverflowingShape) {
  // 2^32 * 2^32 values overflow the count itself.
  EXPECT_EQ(message(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }")),
            expected("shape (4294967296, 4294967296) of float32 is too large: its size in bytes overflows int64"));
  // 2^61 float64 values fit in an int64 count but not their 2^64 bytes.
  EXPECT_EQ(message(with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (2305843009213693952,), }")),
            expected("shape (2305843009213693952,) of float64 is too large: its size in bytes overflows int64"));
  // A dimension that is no int64 at all.
  EXPECT_EQ(message(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }")),
            expected("shape (99999999999999999999,) of float32 is too large: its size in bytes overflows int64"));
}

TEST_F(NpyMalformed, DataShort) {
  EXPECT_EQ(message(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", 11)),
            expected("header declares 12 float32 values (48 bytes) but the data holds 44 bytes"));
  EXPECT_EQ(message(with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (), }", 1)),
            expected("header declares 1 float64 values (8 bytes) but the data holds 4 bytes"));
}

TEST_F(NpyMalformed, DataLong) {
  EXPECT_EQ(message(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", 13)),
            expected("header declares 12 float32 values (48 bytes) but the data holds 52 bytes"));
  EXPECT_EQ(message(npy_bytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (0,), }\n", "x")),
            expected("header declares 0 float32 values (0 bytes) but the data holds 1 bytes"));
}

TEST_F(NpyMalformed, HeaderIsNotADictLiteral) {
  // The header is parsed, never evaluated: an expression is a syntax error.
  EXPECT_EQ(message(with_header("__import__('os').system('true')")),
            expected("malformed header dict at byte 0: expected '{', got '_'"));
  EXPECT_EQ(message(with_header("{'descr' '<f4', 'fortran_order': False, 'shape': (2,), }")),
            expected("malformed header dict at byte 9: expected ':', got '''"));
  EXPECT_EQ(message(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2), }")),
            expected("malformed header dict at byte 52: expected ',' (a 1-tuple needs its trailing comma), got ')'"));
  EXPECT_EQ(message(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': 2, }")),
            expected("malformed header dict at byte 50: expected a string, True, False or a tuple, got '2'"));
  EXPECT_EQ(message(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } x")),
            expected("malformed header dict at byte 58: expected the end of the header, got 'x'"));
  EXPECT_EQ(message(with_header("{'descr': '<f4', 'fortran_order': Falsey, 'shape': (2,), }")),
            expected("malformed header dict at byte 34: expected a string, True, False or a tuple, got 'F'"));
  EXPECT_EQ(message(with_header("{'descr': '<f\\x34', 'fortran_order': False, 'shape': (2,), }")),
            expected("malformed header dict at byte 13: expected a plain ASCII string without escapes, got '\\x5c'"));
  EXPECT_EQ(message(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)")),
            expected("malformed header dict at byte 55: expected ',' or '}', got the end of the header"));
  EXPECT_EQ(message(npy_bytes(1, "", raw<float>({1}))),
            expected("malformed header dict at byte 0: expected '{', got the end of the header"));
}

}  // namespace
}  // namespace posenc::io
