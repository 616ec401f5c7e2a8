// One malformed .safetensors file per rule of the reader (safetensors.h),
// assembled byte by byte here, each refused with its exact message and
// without allocating what the file does not back.
#include <gtest/gtest.h>

#include <chrono>

#include "io_test_util.h"
#include "posenc/io/safetensors.h"

namespace posenc::io {
namespace {

using testing::error_of;
using testing::safetensors_bytes;
using testing::TempDir;

class SafetensorsMalformed : public ::testing::Test {
 protected:
  // Writes `bytes` to bad.safetensors; the message read_safetensors throws.
  // parse_safetensors must refuse the same bytes with the same words.
  std::string message(std::string_view bytes) {
    testing::write_bytes(path_, bytes);
    const std::string from_file = error_of<std::invalid_argument>([&] { read_safetensors(path_); });
    const std::string from_memory = error_of<std::invalid_argument>(
        [&] { parse_safetensors(std::as_bytes(std::span(bytes.data(), bytes.size())), path_); });
    EXPECT_EQ(from_memory, from_file);
    return from_file;
  }
  // A file with this header (length from the header) and `data_bytes` zero bytes of data.
  std::string header_message(std::string_view header, size_t data_bytes = 8) {
    return message(safetensors_bytes(header, std::string(data_bytes, '\0')));
  }
  std::string expected(std::string_view what) const { return "[safetensors] " + path_ + ": " + std::string(what); }

  TempDir dir_;
  std::string path_ = dir_.file("bad.safetensors");
};

// A valid entry for "w": two float32 values, 8 bytes.
constexpr std::string_view kEntry = R"({"dtype":"F32","shape":[2],"data_offsets":[0,8]})";

std::string with_entry(std::string_view entry) { return "{\"w\":" + std::string(entry) + "}"; }

TEST_F(SafetensorsMalformed, TheValidBaseFileReads) {
  // Guards the tests below: each changes one thing of this file.
  testing::write_bytes(path_, safetensors_bytes(with_entry(kEntry), std::string(8, '\0')));
  EXPECT_EQ(read_safetensors(path_).tensors.size(), 1u);
}

TEST_F(SafetensorsMalformed, FileTooShortForTheLength) {
  EXPECT_EQ(message(""), expected("file holds 0 bytes, too few for the 8-byte header length"));
  EXPECT_EQ(message(std::string("\x02\0\0\0\0", 5)), expected("file holds 5 bytes, too few for the 8-byte header length"));
}

TEST_F(SafetensorsMalformed, HugeHeaderLengthIsRefusedAtOnce) {
  // 2^63 and 100 MB + 1: refused from the 8 length bytes, before any allocation.
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(message(safetensors_bytes(uint64_t{1} << 63, "{}", "")),
            expected("header length 9223372036854775808 exceeds the limit of 100000000 bytes"));
  EXPECT_EQ(message(safetensors_bytes(~uint64_t{0}, "{}", "")),
            expected("header length 18446744073709551615 exceeds the limit of 100000000 bytes"));
  EXPECT_EQ(message(safetensors_bytes(100'000'001, "{}", "")),
            expected("header length 100000001 exceeds the limit of 100000000 bytes"));
  // 1 s: generous for a sanitizer build; an attempt to allocate 2^63 bytes would throw bad_alloc instead.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
}

TEST_F(SafetensorsMalformed, HeaderRunsPastTheEndOfTheFile) {
  // Within the limit but not backed by the file: refused before reading.
  EXPECT_EQ(message(safetensors_bytes(100'000'000, "{}", "")),
            expected("header length 100000000 runs past the end of the file (2 bytes follow the length field)"));
  EXPECT_EQ(message(safetensors_bytes(3, "{}", "")),
            expected("header length 3 runs past the end of the file (2 bytes follow the length field)"));
}

TEST_F(SafetensorsMalformed, HeaderMustBeValidUtf8) {
  const auto bad = [&](std::string_view name) { return header_message("{\"" + std::string(name) + "\":1}", 0); };
  EXPECT_EQ(bad("\xc0\xaf"), expected("header is not valid UTF-8 at byte 2: overlong encoding (lead byte 0xc0)"));
  EXPECT_EQ(bad("ab\xe0\x80\xaf"), expected("header is not valid UTF-8 at byte 4: overlong encoding"));
  EXPECT_EQ(bad("\xf0\x8f\xbf\xbf"), expected("header is not valid UTF-8 at byte 2: overlong encoding"));
  EXPECT_EQ(bad("\xed\xa0\x80"), expected("header is not valid UTF-8 at byte 2: UTF-16 surrogate (U+D800 to U+DFFF)"));
  EXPECT_EQ(bad("\xf4\x90\x80\x80"), expected("header is not valid UTF-8 at byte 2: code point above U+10FFFF"));
  EXPECT_EQ(bad("\xf5\x80\x80\x80"),
            expected("header is not valid UTF-8 at byte 2: code point above U+10FFFF (lead byte 0xf5)"));
  EXPECT_EQ(bad("\x80"),
            expected("header is not valid UTF-8 at byte 2: continuation byte 0x80 without a lead byte"));
  EXPECT_EQ(bad("\xff"), expected("header is not valid UTF-8 at byte 2: byte 0xff, which never occurs in UTF-8"));
  EXPECT_EQ(bad("\xe2\x82z"),
            expected("header is not valid UTF-8 at byte 2: sequence cut short: byte 0x7a is no continuation byte"));
  EXPECT_EQ(header_message("{\"\xe2\x82", 0),
            expected("header is not valid UTF-8 at byte 2: sequence cut short by the end of the text"));
  // The largest code point and the last ones before and after the surrogates are fine (then the schema speaks).
  EXPECT_EQ(bad("\xf4\x8f\xbf\xbf\xed\x9f\xbf\xee\x80\x80"),
            expected("tensor '\xf4\x8f\xbf\xbf\xed\x9f\xbf\xee\x80\x80' must be an object with the keys dtype, shape "
                     "and data_offsets, got the number 1"));
}

TEST_F(SafetensorsMalformed, HeaderMustBeOneJsonObject) {
  EXPECT_EQ(header_message(" {}", 0),
            expected("malformed header JSON at byte 0: expected '{' (the header is one JSON object), got ' '"));
  EXPECT_EQ(header_message("[]", 0),
            expected("malformed header JSON at byte 0: expected '{' (the header is one JSON object), got '['"));
  EXPECT_EQ(header_message("", 0), expected("malformed header JSON at byte 0: expected '{' (the header is one JSON "
                                            "object), got the end of the header"));
  EXPECT_EQ(header_message("{", 0),
            expected("malformed header JSON at byte 1: expected a string key or '}', got the end of the header"));
  EXPECT_EQ(header_message(with_entry(kEntry) + "{}"),
            expected("malformed header JSON at byte 54: expected only spaces after the object, got '{'"));
}

TEST_F(SafetensorsMalformed, OnlySpacesMayFollowTheObject) {
  EXPECT_EQ(header_message(with_entry(kEntry) + "  \n"),
            expected("malformed header JSON at byte 56: expected only spaces after the object, got '\\x0a'"));
  EXPECT_EQ(header_message(with_entry(kEntry) + " \t"),
            expected("malformed header JSON at byte 55: expected only spaces after the object, got '\\x09'"));
  EXPECT_EQ(header_message(with_entry(kEntry) + std::string("\0", 1)),
            expected("malformed header JSON at byte 54: expected only spaces after the object, got '\\x00'"));
}

TEST_F(SafetensorsMalformed, StrictJsonGrammar) {
  const auto grammar = [&](std::string_view header) { return header_message(header); };
  // Trailing commas, in objects and arrays.
  EXPECT_EQ(grammar(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],}})"),
            expected("malformed header JSON at byte 53: expected a string key, got '}'"));
  EXPECT_EQ(grammar(R"({"w":{"dtype":"F32","shape":[2,],"data_offsets":[0,8]}})"),
            expected("malformed header JSON at byte 31: expected a value (object, array, string, number, true, false "
                     "or null), got ']'"));
  // Single quotes, bare words, comments.
  EXPECT_EQ(grammar(R"({'w':1})"), expected("malformed header JSON at byte 1: expected a string key or '}', got '''"));
  EXPECT_EQ(grammar(R"({"w":F32})"),
            expected("malformed header JSON at byte 5: expected a value (object, array, string, number, true, false "
                     "or null), got 'F'"));
  EXPECT_EQ(grammar(R"({"w":tru})"), expected("malformed header JSON at byte 5: expected a value, got 't'"));
  EXPECT_EQ(grammar("{/* c */}"), expected("malformed header JSON at byte 1: expected a string key or '}', got '/'"));
  // Missing ':' and ','.
  EXPECT_EQ(grammar(R"({"w" 1})"), expected("malformed header JSON at byte 5: expected ':' after the key, got '1'"));
  EXPECT_EQ(grammar(R"({"w":1 "v":2})"), expected("malformed header JSON at byte 7: expected ',' or '}', got '\"'"));
  EXPECT_EQ(grammar(R"({"w":[1 2]})"), expected("malformed header JSON at byte 8: expected ',' or ']', got '2'"));
}

TEST_F(SafetensorsMalformed, StrictJsonNumbers) {
  const auto shape = [&](std::string_view dims) {
    return header_message(R"({"w":{"dtype":"F32","shape":)" + std::string(dims) + R"(,"data_offsets":[0,8]}})");
  };
  EXPECT_EQ(shape("[02]"), expected("malformed header JSON at byte 29: numbers may not have leading zeros"));
  EXPECT_EQ(shape("[-02]"), expected("malformed header JSON at byte 29: numbers may not have leading zeros"));
  EXPECT_EQ(shape("[2.]"), expected("malformed header JSON at byte 31: expected a digit, got ']'"));
  EXPECT_EQ(shape("[.5]"), expected("malformed header JSON at byte 29: expected a value (object, array, string, "
                                    "number, true, false or null), got '.'"));
  EXPECT_EQ(shape("[2e]"), expected("malformed header JSON at byte 31: expected a digit, got ']'"));
  EXPECT_EQ(shape("[-]"), expected("malformed header JSON at byte 30: expected a digit, got ']'"));
  EXPECT_EQ(shape("[+2]"), expected("malformed header JSON at byte 29: expected a value (object, array, string, "
                                    "number, true, false or null), got '+'"));
}

TEST_F(SafetensorsMalformed, StrictJsonStrings) {
  const auto key = [&](std::string_view k) { return header_message("{\"" + std::string(k) + "\":1}", 0); };
  EXPECT_EQ(key("a\nb"),
            expected("malformed header JSON at byte 3: control character '\\x0a' inside a string (JSON needs it "
                     "escaped)"));
  EXPECT_EQ(key("a\\x41"),
            expected("malformed header JSON at byte 4: expected an escape (\\\" \\\\ \\/ \\b \\f \\n \\r \\t or "
                     "\\uXXXX) after '\\', got 'x'"));
  EXPECT_EQ(key("\\u12g4"), expected("malformed header JSON at byte 6: expected 4 hex digits after \\u, got 'g'"));
  EXPECT_EQ(key("\\ud800"),
            expected("malformed header JSON at byte 2: \\ud800 is a high surrogate without a low surrogate after it"));
  EXPECT_EQ(key("\\ud83dx"),
            expected("malformed header JSON at byte 2: \\ud83d is a high surrogate without a low surrogate after it"));
  EXPECT_EQ(key("\\ud800\\u0041"),
            expected("malformed header JSON at byte 2: \\ud800 is a high surrogate followed by \\u0041, not a low "
                     "surrogate"));
  EXPECT_EQ(key("\\ud800\\ud800"),
            expected("malformed header JSON at byte 2: \\ud800 is a high surrogate followed by \\ud800, not a low "
                     "surrogate"));
  EXPECT_EQ(key("\\udc00"),
            expected("malformed header JSON at byte 2: \\udc00 is a low surrogate without a high surrogate before it"));
  EXPECT_EQ(header_message("{\"abc", 0), expected("malformed header JSON at byte 1: the string starting here never ends"));
}

TEST_F(SafetensorsMalformed, NestingDepthIsBounded) {
  // 32 levels (the root object and 31 arrays) parse; the schema then refuses the array.
  EXPECT_EQ(header_message("{\"w\":" + std::string(31, '[') + std::string(31, ']') + "}"),
            expected("tensor 'w' must be an object with the keys dtype, shape and data_offsets, got an array"));
  EXPECT_EQ(header_message("{\"w\":" + std::string(32, '[') + std::string(32, ']') + "}"),
            expected("malformed header JSON at byte 36: objects and arrays nest deeper than 32 levels"));
  EXPECT_EQ(header_message("{\"w\":" + std::string(20, '[') + "{\"a\":{\"a\":" + std::string(11, '[')),
            expected("malformed header JSON at byte 44: objects and arrays nest deeper than 32 levels"));
  // The 33rd level an object rather than an array.
  EXPECT_EQ(header_message("{\"w\":" + std::string(31, '[') + "{}" + std::string(31, ']') + "}"),
            expected("malformed header JSON at byte 36: objects and arrays nest deeper than 32 levels"));
  // Far deeper than any stack could recurse: refused at the limit all the same.
  EXPECT_EQ(header_message("{\"w\":" + std::string(1'000'000, '[')),
            expected("malformed header JSON at byte 36: objects and arrays nest deeper than 32 levels"));
}

TEST_F(SafetensorsMalformed, NoDuplicateKeyAtAnyLevel) {
  // The root (two tensors named "w"), a tensor entry, the metadata; the first repeat in text order is named.
  EXPECT_EQ(header_message(R"({"w":)" + std::string(kEntry) + R"(,"v":)" + std::string(kEntry) + R"(,"w":)" +
                           std::string(kEntry) + "}"),
            expected("malformed header JSON at byte 107: the key 'w' appears twice in one object"));
  EXPECT_EQ(header_message(R"({"w":{"dtype":"F32","shape":[2],"dtype":"F32","data_offsets":[0,8]}})"),
            expected("malformed header JSON at byte 32: the key 'dtype' appears twice in one object"));
  EXPECT_EQ(header_message(R"({"__metadata__":{"a":"1","b":"2","a":"3"},"w":)" + std::string(kEntry) + "}"),
            expected("malformed header JSON at byte 33: the key 'a' appears twice in one object"));
  // Keys compare after unescaping: "\u0077" is "w".
  EXPECT_EQ(header_message(R"({"w":)" + std::string(kEntry) + R"(,"\u0077":)" + std::string(kEntry) + "}"),
            expected("malformed header JSON at byte 54: the key 'w' appears twice in one object"));
  // Even where the schema would not look: inside a value it refuses anyway.
  EXPECT_EQ(header_message(R"({"w":{"x":{"a":1,"a":2}}})"),
            expected("malformed header JSON at byte 17: the key 'a' appears twice in one object"));
}

TEST_F(SafetensorsMalformed, MetadataMapsStringsToStrings) {
  const auto meta = [&](std::string_view m) {
    return header_message(R"({"__metadata__":)" + std::string(m) + R"(,"w":)" + std::string(kEntry) + "}");
  };
  EXPECT_EQ(meta(R"(["format","pt"])"),
            expected("__metadata__ must be an object mapping strings to strings, got an array"));
  EXPECT_EQ(meta(R"("pt")"),
            expected("__metadata__ must be an object mapping strings to strings, got the string \"pt\""));
  EXPECT_EQ(meta(R"({"format":"pt","step":100})"),
            expected("__metadata__ value of 'step' must be a string, got the number 100"));
  EXPECT_EQ(meta(R"({"nested":{"a":"b"}})"), expected("__metadata__ value of 'nested' must be a string, got an object"));
  EXPECT_EQ(meta(R"({"flag":null})"), expected("__metadata__ value of 'flag' must be a string, got null"));
}

TEST_F(SafetensorsMalformed, EachTensorHasExactlyItsThreeKeys) {
  EXPECT_EQ(header_message(R"({"w":[1,2]})"),
            expected("tensor 'w' must be an object with the keys dtype, shape and data_offsets, got an array"));
  EXPECT_EQ(header_message(R"({"w":"F32"})"), expected("tensor 'w' must be an object with the keys dtype, shape and "
                                                       "data_offsets, got the string \"F32\""));
  EXPECT_EQ(header_message(with_entry(R"({"shape":[2],"data_offsets":[0,8]})")),
            expected("tensor 'w' lacks the key 'dtype'"));
  EXPECT_EQ(header_message(with_entry(R"({"dtype":"F32","data_offsets":[0,8]})")),
            expected("tensor 'w' lacks the key 'shape'"));
  EXPECT_EQ(header_message(with_entry(R"({"dtype":"F32","shape":[2]})")),
            expected("tensor 'w' lacks the key 'data_offsets'"));
  EXPECT_EQ(header_message(with_entry(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8],"offsets":[0,8]})")),
            expected("tensor 'w' has the key 'offsets'; a tensor has exactly the keys dtype, shape and data_offsets"));
  EXPECT_EQ(header_message(with_entry("{}")), expected("tensor 'w' lacks the key 'dtype'"));
}

TEST_F(SafetensorsMalformed, DtypeOnTheAllowList) {
  const auto dtype = [&](std::string_view d) {
    return header_message(with_entry(R"({"dtype":)" + std::string(d) + R"(,"shape":[2],"data_offsets":[0,8]})"));
  };
  const std::string allowed = "the allowed dtypes are BOOL, U8, I8, U16, I16, U32, I32, U64, I64, F16, BF16, F32, F64";
  EXPECT_EQ(dtype(R"("F8_E4M3")"), expected("tensor 'w' has dtype 'F8_E4M3'; " + allowed));
  EXPECT_EQ(dtype(R"("C64")"), expected("tensor 'w' has dtype 'C64'; " + allowed));
  EXPECT_EQ(dtype(R"("f32")"), expected("tensor 'w' has dtype 'f32'; " + allowed));  // names are case-sensitive
  EXPECT_EQ(dtype(R"("float32")"), expected("tensor 'w' has dtype 'float32'; " + allowed));
  EXPECT_EQ(dtype("4"), expected("tensor 'w': dtype must be a string, got the number 4"));
  EXPECT_EQ(dtype("true"), expected("tensor 'w': dtype must be a string, got true"));
}

TEST_F(SafetensorsMalformed, ShapeAndOffsetsAreNonNegativeIntegers) {
  const auto shape = [&](std::string_view s) {
    return header_message(with_entry(R"({"dtype":"F32","shape":)" + std::string(s) + R"(,"data_offsets":[0,8]})"));
  };
  EXPECT_EQ(shape("[-2]"), expected("tensor 'w': shape must hold non-negative integers, got the number -2"));
  EXPECT_EQ(shape("[-0]"), expected("tensor 'w': shape must hold non-negative integers, got the number -0"));
  EXPECT_EQ(shape("[2.0]"), expected("tensor 'w': shape must hold non-negative integers, got the number 2.0"));
  EXPECT_EQ(shape("[2e0]"), expected("tensor 'w': shape must hold non-negative integers, got the number 2e0"));
  EXPECT_EQ(shape(R"(["2"])"), expected("tensor 'w': shape must hold non-negative integers, got the string \"2\""));
  EXPECT_EQ(shape("[[2]]"), expected("tensor 'w': shape must hold non-negative integers, got an array"));
  EXPECT_EQ(shape("2"), expected("tensor 'w': shape must be an array of non-negative integers, got the number 2"));
  EXPECT_EQ(shape("[18446744073709551616]"),
            expected("tensor 'w': shape holds 18446744073709551616, more than 2^64 - 1"));
  const auto offsets = [&](std::string_view o) {
    return header_message(with_entry(R"({"dtype":"F32","shape":[2],"data_offsets":)" + std::string(o) + "}"));
  };
  EXPECT_EQ(offsets("[0,8,8]"), expected("tensor 'w': data_offsets must be two integers [begin, end], got 3"));
  EXPECT_EQ(offsets("[8]"), expected("tensor 'w': data_offsets must be two integers [begin, end], got 1"));
  EXPECT_EQ(offsets("[0,-8]"), expected("tensor 'w': data_offsets must hold non-negative integers, got the number -8"));
  EXPECT_EQ(offsets("[0,8.5]"), expected("tensor 'w': data_offsets must hold non-negative integers, got the number 8.5"));
  EXPECT_EQ(offsets("{\"begin\":0}"),
            expected("tensor 'w': data_offsets must be an array of non-negative integers, got an object"));
  EXPECT_EQ(offsets("[8,0]"), expected("tensor 'w' has data_offsets [8, 0]: begin is after end"));
  EXPECT_EQ(offsets("[0,99999999999999999999]"),
            expected("tensor 'w': data_offsets holds 99999999999999999999, more than 2^64 - 1"));
}

TEST_F(SafetensorsMalformed, CountsAreCheckedForOverflow) {
  const auto entry = [&](std::string_view dtype, std::string_view shape, std::string_view offsets) {
    return header_message(with_entry(R"({"dtype":")" + std::string(dtype) + R"(","shape":)" + std::string(shape) +
                                     R"(,"data_offsets":)" + std::string(offsets) + "}"));
  };
  EXPECT_EQ(entry("F32", "[9223372036854775808,0]", "[0,8]"),
            expected("tensor 'w' has shape [9223372036854775808, 0]: dimension 9223372036854775808 exceeds 2^63 - 1"));
  EXPECT_EQ(entry("F32", "[4294967296,4294967296]", "[0,8]"),
            expected("tensor 'w' has shape [4294967296, 4294967296]: its element count overflows int64"));
  EXPECT_EQ(entry("F64", "[2305843009213693952]", "[0,8]"),
            expected("tensor 'w' has shape [2305843009213693952] (2305843009213693952 F64 values): its size in bytes "
                     "overflows int64"));
  // The example of safetensors.h: the span disagrees with the shape.
  EXPECT_EQ(entry("F32", "[3,4]", "[0,44]"),
            expected("tensor 'w' has shape [3, 4] (12 F32 values, 48 bytes) but data_offsets span 44 bytes"));
  EXPECT_EQ(entry("BF16", "[]", "[0,8]"),
            expected("tensor 'w' has shape [] (1 BF16 values, 2 bytes) but data_offsets span 8 bytes"));
  EXPECT_EQ(entry("U8", "[0,5]", "[0,8]"),
            expected("tensor 'w' has shape [0, 5] (0 U8 values, 0 bytes) but data_offsets span 8 bytes"));
}

TEST_F(SafetensorsMalformed, HugeShapesAreRefusedWithoutAllocating) {
  const auto start = std::chrono::steady_clock::now();
  // [2^40, 2^40]: the count itself overflows.
  EXPECT_EQ(header_message(with_entry(R"({"dtype":"F32","shape":[1099511627776,1099511627776],"data_offsets":[0,8]})")),
            expected("tensor 'w' has shape [1099511627776, 1099511627776]: its element count overflows int64"));
  // [2^20, 2^20] float32 = 4 TiB, consistent with its offsets, in a 16-byte data buffer.
  EXPECT_EQ(header_message(with_entry(
                R"({"dtype":"F32","shape":[1048576,1048576],"data_offsets":[0,4398046511104]})"), 16),
            expected("tensor 'w' has data_offsets [0, 4398046511104], past the end of the data buffer (16 bytes after "
                     "the header)"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));  // generous for sanitizers
}

TEST_F(SafetensorsMalformed, SpansTileTheDataBufferFromZero) {
  const auto two = [&](std::string_view a, std::string_view b, size_t data) {
    return header_message(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":)" + std::string(a) +
                              R"(},"b":{"dtype":"F32","shape":[2],"data_offsets":)" + std::string(b) + "}}",
                          data);
  };
  EXPECT_EQ(two("[4,12]", "[12,20]", 20),
            expected("tensor 'a' has data_offsets [4, 12] but the first tensor's data must start at 0"));
  EXPECT_EQ(two("[0,8]", "[12,20]", 20),
            expected("tensor 'b' has data_offsets [12, 20] but tensor 'a' ends at 8: spans must be contiguous, not "
                     "leave 4 bytes unused"));
  EXPECT_EQ(two("[0,8]", "[4,12]", 12), expected("tensor 'b' has data_offsets [4, 12], which overlap tensor 'a' [0, 8]"));
  EXPECT_EQ(two("[0,8]", "[0,8]", 16), expected("tensor 'b' has data_offsets [0, 8], which overlap tensor 'a' [0, 8]"));
  // Sorted by offset, whatever the key order: 'b' comes first here.
  EXPECT_EQ(two("[8,16]", "[0,8]", 20),
            expected("the tensors' data ends at byte 16 of the data buffer but the file holds 20 bytes after the "
                     "header (4 bytes unaccounted for)"));
  EXPECT_EQ(two("[8,16]", "[0,8]", 12),
            expected("tensor 'a' has data_offsets [8, 16], past the end of the data buffer (12 bytes after the "
                     "header)"));
  EXPECT_EQ(header_message("{}", 3),
            expected("the tensors' data ends at byte 0 of the data buffer but the file holds 3 bytes after the header "
                     "(3 bytes unaccounted for)"));
  EXPECT_EQ(header_message(R"({"__metadata__":{"format":"pt"}})", 1),
            expected("the tensors' data ends at byte 0 of the data buffer but the file holds 1 bytes after the header "
                     "(1 bytes unaccounted for)"));
}

TEST_F(SafetensorsMalformed, MessagesShowNamesReadably) {
  // Escaped names are shown decoded; control characters as \xNN.
  EXPECT_EQ(header_message(R"({"caf\u00e9\t1":{"dtype":"X"}})"),
            expected("tensor 'caf\xc3\xa9\\x091' has dtype 'X'; the allowed dtypes are BOOL, U8, I8, U16, I16, U32, I32, "
                     "U64, I64, F16, BF16, F32, F64"));
}

TEST_F(SafetensorsMalformed, UnreadablePathsThrowRuntimeErrors) {
  const std::string missing = dir_.file("missing.safetensors");
  EXPECT_EQ(error_of<std::runtime_error>([&] { read_safetensors(missing); }),
            "[safetensors] " + missing + ": cannot open: No such file or directory");
}

}  // namespace
}  // namespace posenc::io
