// How posenc's executables end on an error: one line on stderr, "posenc: "
// and the message with its newlines flattened, after whatever stdout holds.
#pragma once

#include <iostream>
#include <string>

namespace posenc::cli {

inline int report_error(const std::string& message, int code) {
  std::string line = message;
  for (char& c : line) {
    if (c == '\n') c = ' ';
  }
  std::cout.flush();
  std::cerr << "posenc: " << line << '\n';
  return code;
}

}  // namespace posenc::cli
