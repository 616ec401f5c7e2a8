#include "child_processes.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <system_error>

#include "posenc/error.h"

extern char** environ;

namespace posenc::experiments {

namespace fs = std::filesystem;

pid_t spawn_process(std::string_view op, const fs::path& exe, std::vector<std::string> args, std::string_view what) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = ::posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv.data(), environ);
  if (spawned != 0) fail_runtime(op, exe.string(), ": cannot run (", std::strerror(spawned), "): ", what);
  return pid;
}

int wait_for_process(std::string_view op, pid_t pid, std::string_view what) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) fail_runtime(op, "waiting for ", what, ": ", std::strerror(errno));
  }
  return status;
}

fs::path find_on_path(std::string_view name) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return {};
  std::string_view rest = path;
  while (true) {
    const size_t colon = rest.find(':');
    const std::string_view entry = rest.substr(0, colon);
    const fs::path candidate = fs::path(entry.empty() ? "." : std::string(entry)) / name;
    std::error_code ec;
    if (fs::is_regular_file(candidate, ec) && ::access(candidate.c_str(), X_OK) == 0) return candidate;
    if (colon == std::string_view::npos) return {};
    rest.remove_prefix(colon + 1);
  }
}

Captured run_captured(std::string_view op, const fs::path& exe, std::vector<std::string> args) {
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) fail_runtime(op, "cannot create a pipe: ", std::strerror(errno));
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    const int e = errno;
    ::close(out_pipe[0]), ::close(out_pipe[1]);
    fail_runtime(op, "cannot create a pipe: ", std::strerror(e));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);  // dup2 drops O_CLOEXEC on the copy
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = ::posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out_pipe[1]), ::close(err_pipe[1]);
  if (spawned != 0) {
    ::close(out_pipe[0]), ::close(err_pipe[0]);
    fail_runtime(op, exe.string(), ": cannot run (", std::strerror(spawned), ")");
  }
  Captured c;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&c.out, &c.err};
  int open = 2;
  while (open > 0) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;  // the child is still waited for below
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buffer[4096];
      const ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open;
      }
    }
  }
  for (const pollfd& f : fds) {
    if (f.fd >= 0) ::close(f.fd);
  }
  c.status = wait_for_process(op, pid, exe.filename().string());
  return c;
}

}  // namespace posenc::experiments
