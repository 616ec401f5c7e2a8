// `posenc doctor [--seconds S]`: what a speed figure depends on in this
// process: posenc's version and kernel build (native or portable, vector
// instructions), torch's version and threads, the cores available, which BLAS
// libtorch resolved at run time and its float32 GEMM rate. Warns on stderr
// when that BLAS is netlib's reference implementation.
#pragma once

#include <CLI/CLI.hpp>

namespace posenc::cli {

class DoctorCommand {
 public:
  explicit DoctorCommand(CLI::App& parent);
  DoctorCommand(const DoctorCommand&) = delete;  // CLI11 holds a pointer to seconds_
  DoctorCommand& operator=(const DoctorCommand&) = delete;

  bool selected() const { return app_->parsed(); }
  void run() const;

 private:
  CLI::App* app_;
  double seconds_ = 1.0;
};

}  // namespace posenc::cli
