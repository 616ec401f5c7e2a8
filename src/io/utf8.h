// UTF-8 (RFC 3629) validation and encoding for the io layer's text headers
// (the .safetensors JSON header, the .npy 3.0 header). Internal to posenc::io.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace posenc::io::detail {

struct Utf8Error {
  size_t offset;     // of the first byte of the bad sequence
  std::string what;  // e.g. "overlong encoding", "code point above U+10FFFF"
};

// The first invalid sequence of `text`, if any. Refused: overlong forms,
// UTF-16 surrogates (U+D800..U+DFFF), code points above U+10FFFF, stray
// continuation bytes, bytes that never occur (0xc0, 0xc1, 0xf5..0xff) and
// sequences cut short.
std::optional<Utf8Error> find_utf8_error(std::string_view text);

// Appends the UTF-8 form of `code_point` (a Unicode scalar value: at most
// U+10FFFF and not a surrogate; the caller ensures it).
void append_utf8(std::string& out, char32_t code_point);

// Bytes for a message: printable ASCII as is, anything else as \xNN.
std::string printable(std::string_view bytes);

// `text` (valid UTF-8) for a message: bytes below 0x20, DEL and '\' as \xNN,
// everything else, non-ASCII characters included, as is.
std::string printable_utf8(std::string_view text);

}  // namespace posenc::io::detail
