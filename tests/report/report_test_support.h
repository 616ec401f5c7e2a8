// Shared by the report tests: the message of whatever f throws.
#pragma once

#include <exception>
#include <functional>
#include <string>

namespace posenc::report::test {

// what() of the exception f throws, or "(no exception)".
inline std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no exception)";
}

}  // namespace posenc::report::test
