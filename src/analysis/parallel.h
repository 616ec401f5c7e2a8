// An exception must not leave an OpenMP region (it would terminate the
// process), so parallel loops catch and keep the failure of the lowest task
// index, which the caller rethrows after the loop: the same error whatever
// the number of threads. Private to posenc::analysis.
#pragma once

#include <cstdint>
#include <exception>
#include <limits>
#include <mutex>

namespace posenc::analysis::detail {

// Below ~2^24 multiply-adds (a few ms) a loop runs on one thread: waking a team
// costs more than it saves, much more on a busy machine (a descheduled thread
// stalls the barrier).
inline bool worth_threads(double multiply_adds) noexcept { return multiply_adds > 16777216.0; }

class FirstFailure {
 public:
  template <class F>
  void run(int64_t task, F&& body) noexcept {
    try {
      body();
    } catch (...) {
      const std::lock_guard<std::mutex> lock(mutex_);
      if (task < task_) {
        task_ = task;
        error_ = std::current_exception();
      }
    }
  }
  void rethrow() const {
    if (error_) std::rethrow_exception(error_);
  }

 private:
  std::mutex mutex_;
  int64_t task_ = std::numeric_limits<int64_t>::max();
  std::exception_ptr error_;
};

}  // namespace posenc::analysis::detail
