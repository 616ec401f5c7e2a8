// An exclusive lock on a directory that a process writes into (a training run,
// an experiment's or a report's output), so that two processes never
// interleave their files there.
//
// The lock is flock(2) on DIR/.lock, which holds the holder's PID as text.
// The kernel drops it when the holder exits, however it exits (SIGKILL
// included), so a leftover .lock file never blocks anyone; the file itself
// stays. A second process is refused at once with std::runtime_error
//   "[train] out/run is in use by process 1234 (lock file out/run/.lock)".
// The directory is created (with its parents) when missing.
#pragma once

#include <string>
#include <string_view>

namespace posenc::io {

class DirectoryLock {
 public:
  DirectoryLock(std::string_view op, const std::string& dir);
  ~DirectoryLock();  // releases the lock
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

  static constexpr std::string_view kFileName = ".lock";

 private:
  int fd_ = -1;
};

}  // namespace posenc::io
