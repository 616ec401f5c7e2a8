#include "posenc/io/directory_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>

#include "posenc/error.h"

namespace posenc::io {
namespace {

// The PID the holder wrote, or "" while it has not written it yet.
std::string holder_pid(int fd) {
  char text[32] = {};
  const ssize_t n = ::pread(fd, text, sizeof text - 1, 0);
  if (n <= 0) return "";
  std::string pid(text, static_cast<size_t>(n));
  while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
  for (const char c : pid) {
    if (c < '0' || c > '9') return "";
  }
  return pid;
}

}  // namespace

DirectoryLock::DirectoryLock(std::string_view op, const std::string& dir) {
  std::error_code error;
  if (std::filesystem::exists(dir, error) && !std::filesystem::is_directory(dir, error)) {
    fail_runtime(op, "cannot create directory '", dir, "': ", std::strerror(ENOTDIR));
  }
  std::filesystem::create_directories(dir, error);
  if (error) fail_runtime(op, "cannot create directory '", dir, "': ", error.message());
  const std::string path = (std::filesystem::path(dir) / kFileName).string();
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd_ < 0) fail_runtime(op, "cannot open lock file ", path, ": ", std::strerror(errno));
  int locked;
  do {
    locked = ::flock(fd_, LOCK_EX | LOCK_NB);
  } while (locked != 0 && errno == EINTR);
  if (locked != 0) {
    const int lock_error = errno;
    const std::string pid = lock_error == EWOULDBLOCK ? holder_pid(fd_) : "";
    ::close(fd_);
    if (lock_error != EWOULDBLOCK) fail_runtime(op, "cannot lock ", path, ": ", std::strerror(lock_error));
    fail_runtime(op, dir, " is in use by ", pid.empty() ? "another process" : "process " + pid, " (lock file ",
                 path, ")");
  }
  const std::string text = std::to_string(::getpid()) + "\n";
  // The PID is only for the message of a refused process: failing to write it is not an error.
  if (::ftruncate(fd_, 0) == 0) {
    [[maybe_unused]] const ssize_t written = ::pwrite(fd_, text.data(), text.size(), 0);
  }
}

DirectoryLock::~DirectoryLock() { ::close(fd_); }

}  // namespace posenc::io
