// The sweeps' child processes (private to posenc::experiments): posenc-text's
// corpus step and the jobs of --jobs share our stdout and stderr; sbatch and
// squeue are run with theirs captured. Errors throw std::runtime_error "[op] ...".
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace posenc::experiments {

// Starts exe with args (args[0] is the name the child sees), sharing our
// stdout, stderr and environment; `what` names it in the error.
pid_t spawn_process(std::string_view op, const std::filesystem::path& exe, std::vector<std::string> args,
                    std::string_view what);

// waitpid(pid), again after EINTR; returns its status. `what` names the child in the error.
int wait_for_process(std::string_view op, pid_t pid, std::string_view what);

// An executable named `name` in a PATH directory (an empty entry is the
// current directory); empty when there is none.
std::filesystem::path find_on_path(std::string_view name);

struct Captured {
  int status = 0;  // waitpid's
  std::string out, err;
};

// Runs exe with args (stdin /dev/null) and collects its stdout and stderr,
// read together so that neither pipe can fill and stall it.
Captured run_captured(std::string_view op, const std::filesystem::path& exe, std::vector<std::string> args);

}  // namespace posenc::experiments
