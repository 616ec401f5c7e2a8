#include "processes.h"

#include <spawn.h>

#include <cstring>
#include <system_error>

#include "posenc/error.h"

extern char** environ;

namespace posenc::cli {

std::filesystem::path own_executable(std::string_view op) {
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) fail_runtime(op, "cannot locate posenc's own executable: ", ec.message());
  return self;
}

pid_t spawn_process(std::string_view op, const std::filesystem::path& exe, std::vector<std::string> args,
                    std::string_view what) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = ::posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv.data(), environ);
  if (spawned != 0) fail_runtime(op, exe.string(), ": cannot run (", std::strerror(spawned), "): ", what);
  return pid;
}

}  // namespace posenc::cli
