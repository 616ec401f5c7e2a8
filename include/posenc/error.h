// The one way posenc reports a bad argument or an unsupported situation.
// Messages read "[op] what was expected, got value", e.g.
// "[sinusoidal] dim must be even, got 7".
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace posenc {

namespace detail {
template <class... Parts>
std::string join_message(std::string_view op, const Parts&... parts) {
  std::ostringstream s;
  s.precision(17);
  s << '[' << op << "] ";
  (s << ... << parts);
  return s.str();
}
}  // namespace detail

// Throws std::invalid_argument("[op] " + parts...).
template <class... Parts>
[[noreturn]] void fail_argument(std::string_view op, const Parts&... parts) {
  throw std::invalid_argument(detail::join_message(op, parts...));
}

// Throws std::runtime_error("[op] " + parts...): input well formed but unsupported.
template <class... Parts>
[[noreturn]] void fail_runtime(std::string_view op, const Parts&... parts) {
  throw std::runtime_error(detail::join_message(op, parts...));
}

// fail_argument unless `ok`.
template <class... Parts>
void require(bool ok, std::string_view op, const Parts&... parts) {
  if (!ok) fail_argument(op, parts...);
}

}  // namespace posenc
