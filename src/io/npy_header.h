// The .npy header dict: a small hand-written grammar for reading it (never
// evaluated) and its canonical text for writing. Internal to posenc::io.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/error.h"
#include "posenc/io/npy.h"
#include "posenc/io/tensor_file.h"
#include "utf8.h"

namespace posenc::io::detail {

struct NpyHeader {
  ElementType type = ElementType::kFloat32;
  bool big_endian = false;  // '>' on a type wider than one byte: the data needs swapping
  std::vector<int64_t> shape;
  int64_t count = 0;  // number of values the shape holds
};

// Throws std::invalid_argument("[npy] <file>: " + parts...): a malformed file
// (or "[npy] " + parts... when there is no file, as for serialize_npy).
template <class... Parts>
[[noreturn]] void fail_file(std::string_view file, const Parts&... parts) {
  if (file.empty()) fail_argument("npy", parts...);
  fail_argument("npy", file, ": ", parts...);
}

// Python's repr of a shape tuple: "()", "(3,)", "(3, 4)".
std::string shape_repr(std::span<const int64_t> shape);

// Number of values of `shape`; throws (naming `file`) on a negative dimension
// or when the size in bytes of `type` values overflows int64.
int64_t checked_count(std::span<const int64_t> shape, ElementType type, std::string_view file);

// `text`: the header bytes after the preamble, i.e. the dict literal and its
// whitespace padding; `utf8` (format 3.0): strings may hold UTF-8 characters,
// else printable ASCII only. Grammar (whitespace allowed between tokens):
//   dict  := '{' [entry (',' entry)* [',']] '}'
//   entry := string ':' value
//   value := string | 'True' | 'False' | tuple | list
//   tuple := '(' ')' | '(' int ',' ')' | '(' int (',' int)+ [','] ')'
//   int   := ['-'] digit+      string := quoted by ' or ", no escapes
//   list  := '[' ... ']' (brackets balanced outside strings; only ever refused,
//            as a structured descr, so its contents are not parsed)
// descr: b1, u1, i1, u2, i2, u4, i4, u8, i8, f2, f4, f8 after a byte order
// '<', '>' or '=' (native: little-endian here), or '|' for the 1-byte types.
NpyHeader parse_npy_header(std::string_view text, std::string_view file, bool utf8);

// "<f4", "|u1", "|b1", ... as numpy writes them (little-endian); bfloat16 has none.
std::string_view npy_descr(ElementType type) noexcept;

// "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", unpadded.
std::string npy_header_dict(ElementType type, std::span<const int64_t> shape);

}  // namespace posenc::io::detail
