#include "json_reader.h"

#include <algorithm>
#include <cstdio>
#include <utility>
#include <vector>

#include "utf8.h"

namespace posenc::io::detail {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string hex4(uint32_t u) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04x", u);
  return buf;
}

}  // namespace

std::string JsonReader::got() const {
  if (pos_ >= text_.size()) return "the end of the header";
  const auto u = static_cast<unsigned char>(text_[pos_]);
  if (u >= 0x20 && u <= 0x7e && u != '\\') return std::string("'") + text_[pos_] + "'";
  char buf[8];
  std::snprintf(buf, sizeof buf, "'\\x%02x'", u);
  return buf;
}

void JsonReader::fail_expected(std::string_view what) const { fail_at(pos_, "expected ", what, ", got ", got()); }

void JsonReader::skip_space() {
  while (pos_ < text_.size() && is_space(text_[pos_])) ++pos_;
}

void JsonReader::expect(char c, std::string_view what) {
  skip_space();
  if (pos_ >= text_.size() || text_[pos_] != c) fail_expected(what);
  ++pos_;
}

JsonKind JsonReader::peek() {
  skip_space();
  if (pos_ >= text_.size()) return JsonKind::kEnd;
  switch (text_[pos_]) {
    case '{':
      return JsonKind::kObject;
    case '[':
      return JsonKind::kArray;
    case '"':
      return JsonKind::kString;
    case 't':
      return JsonKind::kTrue;
    case 'f':
      return JsonKind::kFalse;
    case 'n':
      return JsonKind::kNull;
    default:
      return text_[pos_] == '-' || is_digit(text_[pos_]) ? JsonKind::kNumber : JsonKind::kInvalid;
  }
}

void JsonReader::check_document() {
  pos_ = 0;
  // The safetensors format: the header begins with '{' itself, no whitespace first.
  if (text_.empty() || text_[0] != '{') fail_expected("'{' (the header is one JSON object)");
  check_value(1);
  for (; pos_ < text_.size(); ++pos_) {
    if (text_[pos_] != ' ') fail_expected("only spaces after the object");
  }
  pos_ = 0;
}

void JsonReader::check_value(int depth) {
  switch (peek()) {
    case JsonKind::kObject: {
      if (depth > kMaxJsonDepth) fail_at(pos_, "objects and arrays nest deeper than ", kMaxJsonDepth, " levels");
      begin_object();
      std::vector<std::pair<std::string, size_t>> keys;  // (key, offset of its opening quote)
      std::string key;
      for (bool first = true; next_member(first, key);) {
        keys.emplace_back(std::move(key), key_offset_);
        check_value(depth + 1);
      }
      std::sort(keys.begin(), keys.end());
      // The first repeat in text order: the smallest offset among second occurrences.
      const std::pair<std::string, size_t>* repeat = nullptr;
      for (size_t i = 1; i < keys.size(); ++i) {
        if (keys[i].first == keys[i - 1].first && (repeat == nullptr || keys[i].second < repeat->second)) {
          repeat = &keys[i];
        }
      }
      if (repeat != nullptr) {
        fail_at(repeat->second, "the key '", printable_utf8(repeat->first), "' appears twice in one object");
      }
      return;
    }
    case JsonKind::kArray:
      if (depth > kMaxJsonDepth) fail_at(pos_, "objects and arrays nest deeper than ", kMaxJsonDepth, " levels");
      begin_array();
      for (bool first = true; next_item(first);) check_value(depth + 1);
      return;
    default:
      skip_value();
  }
}

void JsonReader::begin_object() { expect('{', "'{'"); }

bool JsonReader::next_member(bool& first, std::string& key) {
  skip_space();
  if (pos_ < text_.size() && text_[pos_] == '}') {
    // '{"a": 1,}' cannot end here: after a comma a key is demanded below.
    ++pos_;
    return false;
  }
  if (!first) expect(',', "',' or '}'");
  skip_space();
  if (pos_ >= text_.size() || text_[pos_] != '"') fail_expected(first ? "a string key or '}'" : "a string key");
  key_offset_ = pos_;
  key = read_string();
  expect(':', "':' after the key");
  first = false;
  return true;
}

void JsonReader::begin_array() { expect('[', "'['"); }

bool JsonReader::next_item(bool& first) {
  skip_space();
  if (pos_ < text_.size() && text_[pos_] == ']') {
    // "[1,]": after a comma a value must follow, which skip/read will demand.
    ++pos_;
    return false;
  }
  if (!first) expect(',', "',' or ']'");
  first = false;
  return true;
}

uint32_t JsonReader::read_hex4() {
  uint32_t u = 0;
  for (int k = 0; k < 4; ++k) {
    const int h = pos_ < text_.size() ? hex_value(text_[pos_]) : -1;
    if (h < 0) fail_expected("4 hex digits after \\u");
    u = u << 4 | static_cast<uint32_t>(h);
    ++pos_;
  }
  return u;
}

std::string JsonReader::read_string() {
  skip_space();
  const size_t open = pos_;
  if (pos_ >= text_.size() || text_[pos_] != '"') fail_expected("a string");
  ++pos_;
  std::string out;
  while (true) {
    if (pos_ >= text_.size()) fail_at(open, "the string starting here never ends");
    const char c = text_[pos_];
    if (c == '"') {
      ++pos_;
      return out;
    }
    if (static_cast<unsigned char>(c) < 0x20) fail_at(pos_, "control character ", got(), " inside a string (JSON needs it escaped)");
    if (c != '\\') {
      out += c;  // UTF-8 was validated up front: multi-byte characters copy as is
      ++pos_;
      continue;
    }
    const size_t escape = pos_++;
    const char e = pos_ < text_.size() ? text_[pos_] : '\0';
    switch (e) {
      case '"': out += '"'; break;
      case '\\': out += '\\'; break;
      case '/': out += '/'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'u': {
        ++pos_;
        uint32_t u = read_hex4();
        if (u >= 0xdc00 && u <= 0xdfff) fail_at(escape, "\\u", hex4(u), " is a low surrogate without a high surrogate before it");
        if (u >= 0xd800 && u <= 0xdbff) {
          if (text_.substr(pos_, 2) != "\\u") fail_at(escape, "\\u", hex4(u), " is a high surrogate without a low surrogate after it");
          pos_ += 2;
          const uint32_t low = read_hex4();
          if (low < 0xdc00 || low > 0xdfff) {
            fail_at(escape, "\\u", hex4(u), " is a high surrogate followed by \\u", hex4(low), ", not a low surrogate");
          }
          u = 0x10000 + ((u - 0xd800) << 10) + (low - 0xdc00);
        }
        append_utf8(out, static_cast<char32_t>(u));
        continue;  // pos_ is past the digits already
      }
      default:
        fail_expected("an escape (\\\" \\\\ \\/ \\b \\f \\n \\r \\t or \\uXXXX) after '\\'");
    }
    ++pos_;
  }
}

std::string_view JsonReader::read_number() {
  skip_space();
  const size_t begin = pos_;
  const auto digits = [&] {
    if (pos_ >= text_.size() || !is_digit(text_[pos_])) fail_expected("a digit");
    while (pos_ < text_.size() && is_digit(text_[pos_])) ++pos_;
  };
  if (pos_ < text_.size() && text_[pos_] == '-') ++pos_;
  if (pos_ < text_.size() && text_[pos_] == '0') {
    ++pos_;
    if (pos_ < text_.size() && is_digit(text_[pos_])) fail_at(begin, "numbers may not have leading zeros");
  } else {
    digits();
  }
  if (pos_ < text_.size() && text_[pos_] == '.') {
    ++pos_;
    digits();
  }
  if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
    ++pos_;
    if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
    digits();
  }
  return text_.substr(begin, pos_ - begin);
}

void JsonReader::read_literal(std::string_view word) {
  if (text_.substr(pos_, word.size()) != word) fail_expected("a value");
  pos_ += word.size();
}

void JsonReader::skip_value() {
  std::string key;
  switch (peek()) {
    case JsonKind::kObject:
      begin_object();
      for (bool first = true; next_member(first, key);) skip_value();
      return;
    case JsonKind::kArray:
      begin_array();
      for (bool first = true; next_item(first);) skip_value();
      return;
    case JsonKind::kString:
      read_string();
      return;
    case JsonKind::kNumber:
      read_number();
      return;
    case JsonKind::kTrue:
      return read_literal("true");
    case JsonKind::kFalse:
      return read_literal("false");
    case JsonKind::kNull:
      return read_literal("null");
    case JsonKind::kEnd:
    case JsonKind::kInvalid:
      break;
  }
  fail_expected("a value (object, array, string, number, true, false or null)");
}

std::string JsonReader::describe_next() {
  const size_t saved = pos_;
  std::string what;
  switch (peek()) {
    case JsonKind::kObject:
      what = "an object";
      break;
    case JsonKind::kArray:
      what = "an array";
      break;
    case JsonKind::kString: {
      std::string s = read_string();
      if (s.size() > 40) {
        size_t cut = 40;
        while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xc0) == 0x80) --cut;  // whole characters only
        s = s.substr(0, cut) + "...";
      }
      what = "the string \"" + printable_utf8(s) + "\"";
      break;
    }
    case JsonKind::kNumber:
      what = "the number " + std::string(read_number());
      break;
    case JsonKind::kTrue:
      what = "true";
      break;
    case JsonKind::kFalse:
      what = "false";
      break;
    case JsonKind::kNull:
      what = "null";
      break;
    case JsonKind::kEnd:
    case JsonKind::kInvalid:
      what = "nothing valid";
      break;
  }
  pos_ = saved;
  return what;
}

}  // namespace posenc::io::detail
