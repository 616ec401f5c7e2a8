#include "processes.h"

#include <system_error>

#include "posenc/error.h"

namespace posenc::cli {

std::filesystem::path own_executable(std::string_view op) {
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) fail_runtime(op, "cannot locate posenc's own executable: ", ec.message());
  return self;
}

}  // namespace posenc::cli
