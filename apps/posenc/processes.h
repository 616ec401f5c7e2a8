// The CLI's own child processes: posenc-text beside posenc, and the jobs of
// an experiment sweep (posenc itself). Errors throw std::runtime_error "[op] ...".
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace posenc::cli {

// The running executable's path (/proc/self/exe).
std::filesystem::path own_executable(std::string_view op);

// Starts exe with args (args[0] is the name the child sees), sharing our
// stdout, stderr and environment; `what` names it in the error.
pid_t spawn_process(std::string_view op, const std::filesystem::path& exe, std::vector<std::string> args,
                    std::string_view what);

}  // namespace posenc::cli
