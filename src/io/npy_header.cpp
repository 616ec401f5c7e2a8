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
  enum class Kind { kString, kBool, kTuple } kind = Kind::kString;
  std::string_view source;
  std::string_view text;                // kString: the contents between the quotes
  bool flag = false;                    // kBool
  std::vector<std::string_view> items;  // kTuple: the integer literals
};

class DictParser {
 public:
  DictParser(std::string_view text, std::string_view file) : text_(text), file_(file) {}

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
        const char c = text_[pos_];
        if (c < 0x20 || c > 0x7e || c == '\\') error("a plain ASCII string without escapes");
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
  size_t pos_ = 0;
};

DType parse_descr(const Value& v, std::string_view file) {
  if (v.kind != Value::Kind::kString) fail_file(file, "descr must be a string, got ", v.source);
  const std::string_view d = v.text;
  // '<' is little-endian; '=' is native, which this build requires to be little-endian.
  if (d.size() == 3 && (d[0] == '<' || d[0] == '=')) {
    const std::string_view type = d.substr(1);
    if (type == "f4") return DType::kFloat32;
    if (type == "f8") return DType::kFloat64;
    if (type == "i8") return DType::kInt64;
  }
  const std::string_view type =
      !d.empty() && std::string_view("<>=|").find(d[0]) != std::string_view::npos ? d.substr(1) : d;
  if (!type.empty() && type[0] == 'O') {
    fail_runtime("npy", file, ": object arrays ('", printable(d),
                 "') are not supported: they hold pickled Python objects");
  }
  fail_runtime("npy", file, ": descr must be one of '<f4', '<f8', '<i8' (float32, float64, int64 little-endian), got '",
               printable(d), "'");
}

std::vector<int64_t> parse_shape(const Value& v, DType dtype, std::string_view file) {
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
      fail_file(file, "shape ", v.source, " of ", dtype_name(dtype),
                " is too large: its size in bytes overflows int64");
    }
    shape.push_back(magnitude);
  }
  return shape;
}

}  // namespace

int64_t dtype_size(DType dtype) noexcept { return dtype == DType::kFloat32 ? 4 : 8; }

std::string shape_repr(std::span<const int64_t> shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
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

int64_t checked_count(std::span<const int64_t> shape, DType dtype, std::string_view file) {
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
  overflow = overflow || __builtin_mul_overflow(count, dtype_size(dtype), &bytes);
  if (overflow) {
    fail_file(file, "shape ", shape_repr(shape), " of ", dtype_name(dtype),
              " is too large: its size in bytes overflows int64");
  }
  return count;
}

NpyHeader parse_npy_header(std::string_view text, std::string_view file) {
  const std::array<Value, 3> values = DictParser(text, file).parse();
  NpyHeader header;
  header.dtype = parse_descr(values[0], file);
  if (values[1].kind != Value::Kind::kBool) {
    fail_file(file, "fortran_order must be True or False, got ", values[1].source);
  }
  if (values[1].flag) {
    fail_runtime("npy", file,
                 ": fortran_order True (column-major data) is not supported; "
                 "save a C-order array (numpy.ascontiguousarray)");
  }
  header.shape = parse_shape(values[2], header.dtype, file);
  header.count = checked_count(header.shape, header.dtype, file);
  return header;
}

std::string npy_header_dict(DType dtype, std::span<const int64_t> shape) {
  const char* descr = dtype == DType::kFloat32 ? "<f4" : dtype == DType::kFloat64 ? "<f8" : "<i8";
  return std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape_repr(shape) + ", }";
}

}  // namespace posenc::io::detail
