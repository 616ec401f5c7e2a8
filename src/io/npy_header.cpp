#include "npy_header.h"

#include <array>
#include <cctype>
#include <cstdio>
#include <optional>

#include "posenc/error.h"

namespace posenc::io::detail {
namespace {

constexpr std::array<std::string_view, 3> kKeys{"descr", "fortran_order", "shape"};

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// One parsed value; `source` is its text in the header, for messages.
struct Value {
  enum class Kind { kString, kBool, kTuple, kList } kind = Kind::kString;
  std::string_view source;
  std::string_view text;                // kString: the contents between the quotes
  bool flag = false;                    // kBool
  std::vector<std::string_view> items;  // kTuple: the integer literals
};

class DictParser {
 public:
  DictParser(std::string_view text, std::string_view file, bool utf8) : text_(text), file_(file), utf8_(utf8) {}

  // Returns the values of 'descr', 'fortran_order', 'shape' (in kKeys order).
  std::array<Value, 3> parse() {
    std::array<std::optional<Value>, 3> found;
    expect('{', "'{'");
    if (!consume('}')) {
      while (true) {
        entry(found);
        if (consume(',')) {
          if (consume('}')) break;
          continue;
        }
        expect('}', "',' or '}'");
        break;
      }
    }
    skip_space();
    if (pos_ != text_.size()) error("the end of the header");
    std::array<Value, 3> values;
    for (size_t k = 0; k < kKeys.size(); ++k) {
      if (!found[k]) fail_file(file_, "header lacks the key '", kKeys[k], "'");
      values[k] = *found[k];
    }
    return values;
  }

 private:
  void entry(std::array<std::optional<Value>, 3>& found) {
    const Value key = value();
    if (key.kind != Value::Kind::kString) {
      fail_file(file_, "header keys must be strings, got ", key.source);
    }
    size_t k = 0;
    while (k < kKeys.size() && kKeys[k] != key.text) ++k;
    if (k == kKeys.size()) {
      fail_file(file_, "header keys must be 'descr', 'fortran_order' and 'shape', got '", printable(key.text), "'");
    }
    if (found[k]) fail_file(file_, "header repeats the key '", kKeys[k], "'");
    expect(':', "':'");
    found[k] = value();
  }

  Value value() {
    skip_space();
    const size_t begin = pos_;
    Value v;
    if (peek() == '\'' || peek() == '"') {
      const char quote = text_[pos_++];
      const size_t start = pos_;
      while (pos_ < text_.size() && text_[pos_] != quote) {
        const auto c = static_cast<unsigned char>(text_[pos_]);
        // Format 3.0 headers are UTF-8 (validated before parsing); 1.0 and 2.0 are ASCII here.
        const bool plain = (c >= 0x20 && c <= 0x7e && c != '\\') || (utf8_ && c >= 0x80);
        if (!plain) error(utf8_ ? "a plain UTF-8 string without escapes" : "a plain ASCII string without escapes");
        ++pos_;
      }
      if (pos_ == text_.size()) error("a closing quote");
      v.kind = Value::Kind::kString;
      v.text = text_.substr(start, pos_ - start);
      ++pos_;
    } else if (keyword("True") || keyword("False")) {
      v.kind = Value::Kind::kBool;
      v.flag = text_[begin] == 'T';
    } else if (peek() == '(') {
      ++pos_;
      v.kind = Value::Kind::kTuple;
      tuple_items(v.items);
    } else if (peek() == '[') {
      v.kind = Value::Kind::kList;
      skip_list();
    } else {
      error("a string, True, False or a tuple");
    }
    v.source = text_.substr(begin, pos_ - begin);
    return v;
  }

  // After '(': the items and the closing ')'. A single item needs its comma.
  void tuple_items(std::vector<std::string_view>& items) {
    if (consume(')')) return;
    while (true) {
      items.push_back(integer());
      if (consume(',')) {
        if (consume(')')) return;
        continue;
      }
      if (items.size() == 1) error("',' (a 1-tuple needs its trailing comma)");
      expect(')', "',' or ')'");
      return;
    }
  }

  // At '[': past the matching ']'. Only brackets outside quotes count; a
  // counter, not recursion, so any nesting is harmless.
  void skip_list() {
    int64_t depth = 0;
    char quote = 0;
    do {
      if (pos_ == text_.size()) error("a closing ']'");
      const char c = text_[pos_++];
      if (quote != 0) {
        if (c == quote) quote = 0;
      } else if (c == '\'' || c == '"') {
        quote = c;
      } else if (c == '[') {
        ++depth;
      } else if (c == ']') {
        --depth;
      }
    } while (depth > 0);
  }

  std::string_view integer() {
    skip_space();
    const size_t begin = pos_;
    if (peek() == '-') ++pos_;
    if (!is_digit(peek())) error("an integer");
    while (is_digit(peek())) ++pos_;
    return text_.substr(begin, pos_ - begin);
  }

  bool keyword(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    const size_t end = pos_ + word.size();
    if (end < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[end])) || text_[end] == '_')) {
      return false;
    }
    pos_ = end;
    return true;
  }

  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < text_.size() && is_space(text_[pos_])) ++pos_;
  }
  bool consume(char c) {
    skip_space();
    if (pos_ == text_.size() || text_[pos_] != c) return false;
    ++pos_;
    return true;
  }
  void expect(char c, std::string_view what) {
    if (!consume(c)) error(what);
  }

  [[noreturn]] void error(std::string_view expected) const {
    if (pos_ == text_.size()) {
      fail_file(file_, "malformed header dict at byte ", pos_, ": expected ", expected, ", got the end of the header");
    }
    fail_file(file_, "malformed header dict at byte ", pos_, ": expected ", expected, ", got '",
              printable(text_.substr(pos_, 1)), "'");
  }

  std::string_view text_;
  std::string_view file_;
  bool utf8_;
  size_t pos_ = 0;
};

struct NumericCode {
  std::string_view code;
  ElementType type;
};
constexpr std::array<NumericCode, 12> kNumericCodes{{
    {"b1", ElementType::kBool},    {"u1", ElementType::kUInt8},   {"i1", ElementType::kInt8},
    {"u2", ElementType::kUInt16},  {"i2", ElementType::kInt16},   {"u4", ElementType::kUInt32},
    {"i4", ElementType::kInt32},   {"u8", ElementType::kUInt64},  {"i8", ElementType::kInt64},
    {"f2", ElementType::kFloat16}, {"f4", ElementType::kFloat32}, {"f8", ElementType::kFloat64},
}};

// What an unsupported descr holds, by numpy's type character; empty if not one we name.
std::string_view refused_kind(char c) {
  switch (c) {
    case 'S':
    case 'a':
    case 'U':
      return "string";
    case 'V':
      return "void";
    case 'c':
      return "complex";
    case 'M':
      return "datetime";
    case 'm':
      return "timedelta";
    default:
      return {};
  }
}

void parse_descr(const Value& v, NpyHeader& header, std::string_view file) {
  if (v.kind == Value::Kind::kList) {
    fail_runtime("npy", file, ": structured arrays (descr ", printable(v.source),
                 ") are not supported; posenc reads numeric arrays only");
  }
  if (v.kind != Value::Kind::kString) fail_file(file, "descr must be a string, got ", v.source);
  const std::string_view d = v.text;
  const bool has_order = !d.empty() && std::string_view("<>=|").find(d[0]) != std::string_view::npos;
  const std::string_view code = has_order ? d.substr(1) : d;
  for (const NumericCode& n : kNumericCodes) {
    if (!has_order || code != n.code) continue;
    const bool wide = element_size(n.type) > 1;
    if (d[0] == '|' && wide) {
      fail_runtime("npy", file, ": descr '", d, "' has byte order '|' (not applicable), which only 1-byte types take; ",
                   "numpy writes '<", code, "' or '>", code, "'");
    }
    header.type = n.type;
    header.big_endian = d[0] == '>' && wide;  // '=' is native: this build is little-endian
    return;
  }
  if (!code.empty() && code[0] == 'O') {
    fail_runtime("npy", file, ": object arrays ('", printable(d),
                 "') are not supported: they hold pickled Python objects");
  }
  if (const std::string_view kind = refused_kind(code.empty() ? '\0' : code[0]); !kind.empty()) {
    fail_runtime("npy", file, ": ", kind, " arrays ('", printable(d),
                 "') are not supported; posenc reads numeric arrays only");
  }
  fail_runtime("npy", file,
               ": descr must be a numeric type (b1, u1, i1, u2, i2, u4, i4, u8, i8, f2, f4 or f8) after a byte order "
               "('<', '>', '=', or '|' for 1-byte types), got '",
               printable(d), "'");
}

std::vector<int64_t> parse_shape(const Value& v, ElementType type, std::string_view file) {
  if (v.kind != Value::Kind::kTuple) fail_file(file, "shape must be a tuple of integers, got ", v.source);
  std::vector<int64_t> shape;
  for (std::string_view item : v.items) {
    const bool negative = item[0] == '-';
    int64_t magnitude = 0;
    bool overflow = false;
    for (char c : item.substr(negative ? 1 : 0)) {
      overflow = overflow || __builtin_mul_overflow(magnitude, 10, &magnitude) ||
                 __builtin_add_overflow(magnitude, c - '0', &magnitude);
    }
    if (negative && (overflow || magnitude != 0)) {
      fail_file(file, "shape dimensions must be non-negative, got ", item, " in ", v.source);
    }
    if (overflow) {
      fail_file(file, "shape ", v.source, " of ", element_type_name(type),
                " is too large: its size in bytes overflows int64");
    }
    shape.push_back(magnitude);
  }
  return shape;
}

}  // namespace

std::string shape_repr(std::span<const int64_t> shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

int64_t checked_count(std::span<const int64_t> shape, ElementType type, std::string_view file) {
  bool empty = false;
  for (int64_t d : shape) {
    if (d < 0) fail_file(file, "shape dimensions must be non-negative, got ", d, " in ", shape_repr(shape));
    empty = empty || d == 0;
  }
  if (empty) return 0;
  int64_t count = 1;
  int64_t bytes = 0;
  bool overflow = false;
  for (int64_t d : shape) overflow = overflow || __builtin_mul_overflow(count, d, &count);
  overflow = overflow || __builtin_mul_overflow(count, element_size(type), &bytes);
  if (overflow) {
    fail_file(file, "shape ", shape_repr(shape), " of ", element_type_name(type),
              " is too large: its size in bytes overflows int64");
  }
  return count;
}

NpyHeader parse_npy_header(std::string_view text, std::string_view file, bool utf8) {
  const std::array<Value, 3> values = DictParser(text, file, utf8).parse();
  NpyHeader header;
  parse_descr(values[0], header, file);
  if (values[1].kind != Value::Kind::kBool) {
    fail_file(file, "fortran_order must be True or False, got ", values[1].source);
  }
  if (values[1].flag) {
    fail_runtime("npy", file,
                 ": fortran_order True (column-major data) is not supported; "
                 "save a C-order array (numpy.ascontiguousarray)");
  }
  header.shape = parse_shape(values[2], header.type, file);
  header.count = checked_count(header.shape, header.type, file);
  return header;
}

std::string_view npy_descr(ElementType type) noexcept {
  switch (type) {
    case ElementType::kBool: return "|b1";
    case ElementType::kUInt8: return "|u1";
    case ElementType::kInt8: return "|i1";
    case ElementType::kUInt16: return "<u2";
    case ElementType::kInt16: return "<i2";
    case ElementType::kUInt32: return "<u4";
    case ElementType::kInt32: return "<i4";
    case ElementType::kUInt64: return "<u8";
    case ElementType::kInt64: return "<i8";
    case ElementType::kFloat16: return "<f2";
    case ElementType::kFloat32: return "<f4";
    case ElementType::kFloat64: return "<f8";
    case ElementType::kBFloat16: break;
  }
  return {};
}

std::string npy_header_dict(ElementType type, std::span<const int64_t> shape) {
  return std::string("{'descr': '") + std::string(npy_descr(type)) +
         "', 'fortran_order': False, 'shape': " + shape_repr(shape) + ", }";
}

}  // namespace posenc::io::detail
