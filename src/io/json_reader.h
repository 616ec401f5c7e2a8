// A strict JSON (RFC 8259) reader for the .safetensors header: one pass that
// checks the whole document (grammar, nesting depth, duplicate keys, what may
// follow it), then a pull interface that the header's schema drives, so the
// schema code never sees an ill-formed value and nothing is kept but what the
// schema asks for. Internal to posenc::io.
//
// Strict means: no comments, no trailing commas, no leading zeros, no
// single quotes, no control characters inside strings; \uXXXX escapes must
// pair surrogates; whitespace is space, tab, LF, CR.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "posenc/error.h"

namespace posenc::io::detail {

// Deep enough for any JSON a tensor file needs (the safetensors header nests 3 levels).
inline constexpr int kMaxJsonDepth = 32;

enum class JsonKind { kObject, kArray, kString, kNumber, kTrue, kFalse, kNull, kEnd, kInvalid };

class JsonReader {
 public:
  // `text` must be valid UTF-8 (find_utf8_error). Messages read
  //   "[op] file: malformed header JSON at byte N: expected ..., got ...".
  JsonReader(std::string_view text, std::string_view op, std::string_view file)
      : text_(text), op_(op), file_(file) {}

  // The whole text is one JSON object starting at byte 0, nested at most
  // kMaxJsonDepth levels, with no key twice in any object, followed by
  // nothing but spaces (0x20). Leaves the reader at byte 0.
  void check_document();

  // The kind of the next value (whitespace skipped).
  JsonKind peek();
  size_t offset() const noexcept { return pos_; }

  // Objects: begin_object(); for (bool first = true; next_member(first, key);) { read the value }
  void begin_object();
  bool next_member(bool& first, std::string& key);
  // Arrays: begin_array(); for (bool first = true; next_item(first);) { read the value }
  void begin_array();
  bool next_item(bool& first);

  std::string read_string();
  std::string_view read_number();  // the literal as written, e.g. "-1.5e3"
  // The next value for a message, not consumed: "an object", "an array",
  // "the string \"F32\"", "the number 1.5", "true", "false", "null".
  std::string describe_next();

  template <class... Parts>
  [[noreturn]] void fail_at(size_t offset, const Parts&... parts) const {
    fail_argument(op_, file_, ": malformed header JSON at byte ", offset, ": ", parts...);
  }

 private:
  void check_value(int depth);
  void skip_value();  // recursion unbounded: only for scalars, or after check_document
  void read_literal(std::string_view word);
  uint32_t read_hex4();
  void skip_space();
  void expect(char c, std::string_view what);
  [[noreturn]] void fail_expected(std::string_view what) const;
  std::string got() const;  // the byte at pos_, for messages

  std::string_view text_;
  std::string_view op_;
  std::string_view file_;
  size_t pos_ = 0;
  size_t key_offset_ = 0;  // of the last key's opening quote, for duplicate messages
};

}  // namespace posenc::io::detail
