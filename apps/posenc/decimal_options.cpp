#include "decimal_options.h"

#include <charconv>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "posenc/error.h"

namespace posenc::cli {
namespace {

// The type of an option's value as CLI11 names it: "INT", "UINT", "FLOAT", ...
// (get_type_name() appends ":DESCRIPTION" for each validator; drop those).
std::string_view value_type(std::string_view full) { return full.substr(0, full.find(':')); }

// Parses `text` as decimal T (from_chars: no base prefix, no '+', no spaces;
// '-' only for a signed T) and rewrites it canonically, so that CLI11's base-0
// conversion afterwards reads the same number ("010" -> "10").
template <class T>
void canonical_decimal(std::string& text, std::string_view op, const std::string& option) {
  T value{};
  const char* first = text.data();
  const char* last = first + text.size();
  const auto [end, error] = std::from_chars(first, last, value, 10);
  if (text.empty() || error != std::errc{} || end != last) {
    fail_argument(op, option, " must be a decimal integer in ", std::numeric_limits<T>::min(), "..",
                  std::numeric_limits<T>::max(), ", got '", text, "'");
  }
  text = std::to_string(value);
}

void require_in(CLI::App& app) {
  const std::string op = app.get_name();
  for (CLI::Option* option : app.get_options()) {
    const std::string full = option->get_type_name();
    const std::string_view type = value_type(full);
    const std::string name = option->get_name();
    if (type == "INT") {
      option->transform(CLI::Validator(
          [op, name](std::string& text) {
            canonical_decimal<int64_t>(text, op, name);
            return std::string();
          },
          ""));
    } else if (type == "UINT") {
      option->transform(CLI::Validator(
          [op, name](std::string& text) {
            canonical_decimal<uint64_t>(text, op, name);
            return std::string();
          },
          ""));
    }
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) require_in(*sub);
}

}  // namespace

void require_decimal_integers(CLI::App& app) { require_in(app); }

}  // namespace posenc::cli
