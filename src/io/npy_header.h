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

namespace posenc::io::detail {

struct NpyHeader {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  int64_t count = 0;  // number of values the shape holds
};

// Throws std::invalid_argument("[npy] <file>: " + parts...): a malformed file.
template <class... Parts>
[[noreturn]] void fail_file(std::string_view file, const Parts&... parts) {
  fail_argument("npy", file, ": ", parts...);
}

// Bytes per value: 4 or 8.
int64_t dtype_size(DType dtype) noexcept;

// Python's repr of a shape tuple: "()", "(3,)", "(3, 4)".
std::string shape_repr(std::span<const int64_t> shape);

// Printable ASCII as is, anything else as \xNN.
std::string printable(std::string_view bytes);

// Number of values of `shape`; throws (naming `file`) on a negative dimension
// or when the size in bytes of `dtype` values overflows int64.
int64_t checked_count(std::span<const int64_t> shape, DType dtype, std::string_view file);

// `text`: the header bytes after the preamble, i.e. the dict literal and its
// whitespace padding. Grammar (whitespace allowed between tokens):
//   dict  := '{' [entry (',' entry)* [',']] '}'
//   entry := string ':' value
//   value := string | 'True' | 'False' | tuple
//   tuple := '(' ')' | '(' int ',' ')' | '(' int (',' int)+ [','] ')'
//   int   := ['-'] digit+      string := quoted by ' or ", no escapes
NpyHeader parse_npy_header(std::string_view text, std::string_view file);

// "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", unpadded.
std::string npy_header_dict(DType dtype, std::span<const int64_t> shape);

}  // namespace posenc::io::detail
