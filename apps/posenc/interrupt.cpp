#include "interrupt.h"

#include <csignal>

#include "posenc/io/atomic_file.h"

namespace posenc::cli {
namespace {

void on_signal(int signal_number) {
  io::remove_temporary_files();
  // Then the default action, so the exit status says which signal ended the process.
  std::signal(signal_number, SIG_DFL);
  std::raise(signal_number);
}

}  // namespace

void remove_partial_files_on_signals() {
  for (const int signal_number : {SIGINT, SIGTERM, SIGHUP}) std::signal(signal_number, on_signal);
}

}  // namespace posenc::cli
