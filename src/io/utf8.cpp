#include "utf8.h"

#include <cstdio>

namespace posenc::io::detail {
namespace {

std::string hex_byte(unsigned char b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02x", b);
  return buf;
}

bool is_continuation(unsigned char b) { return (b & 0xc0) == 0x80; }

}  // namespace

std::optional<Utf8Error> find_utf8_error(std::string_view text) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char lead = byte(i);
    if (lead < 0x80) {
      ++i;
      continue;
    }
    if (is_continuation(lead)) return Utf8Error{i, "continuation byte " + hex_byte(lead) + " without a lead byte"};
    if (lead == 0xc0 || lead == 0xc1) return Utf8Error{i, "overlong encoding (lead byte " + hex_byte(lead) + ")"};
    if (lead >= 0xf8) return Utf8Error{i, "byte " + hex_byte(lead) + ", which never occurs in UTF-8"};
    if (lead >= 0xf5) return Utf8Error{i, "code point above U+10FFFF (lead byte " + hex_byte(lead) + ")"};
    const size_t length = lead < 0xe0 ? 2 : lead < 0xf0 ? 3 : 4;
    for (size_t k = 1; k < length; ++k) {
      if (i + k >= text.size()) return Utf8Error{i, "sequence cut short by the end of the text"};
      if (!is_continuation(byte(i + k))) {
        return Utf8Error{i, "sequence cut short: byte " + hex_byte(byte(i + k)) + " is no continuation byte"};
      }
    }
    // The second byte's range decides overlongs, surrogates and the upper limit.
    const unsigned char second = byte(i + 1);
    if ((lead == 0xe0 && second < 0xa0) || (lead == 0xf0 && second < 0x90)) {
      return Utf8Error{i, "overlong encoding"};
    }
    if (lead == 0xed && second >= 0xa0) return Utf8Error{i, "UTF-16 surrogate (U+D800 to U+DFFF)"};
    if (lead == 0xf4 && second >= 0x90) return Utf8Error{i, "code point above U+10FFFF"};
    i += length;
  }
  return std::nullopt;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xc0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3f));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xe0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (c & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (c & 0x3f));
  }
}

std::string printable(std::string_view bytes) {
  std::string s;
  for (char c : bytes) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u <= 0x7e && c != '\\') {
      s += c;
    } else {
      char buf[5];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      s += buf;
    }
  }
  return s;
}

std::string printable_utf8(std::string_view text) {
  std::string s;
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f || c == '\\') {
      char buf[5];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      s += buf;
    } else {
      s += c;
    }
  }
  return s;
}

}  // namespace posenc::io::detail
