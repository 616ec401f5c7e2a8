// `posenc eval --checkpoint DIR [--lengths 64,128,256] [--batches 8]
// [--rope-scaling linear|ntk|dynamic|yarn [--rope-factor S]] [--json]`:
// loss and accuracy of a trained model at several sequence lengths (length
// extrapolation). A length that cannot be evaluated (a learned table too
// short, say) is reported in its row and on stderr; the others still run, and
// the exit status is then 1. The work is estimated from the run's config
// before the first batch and refused, naming the estimate and the option that
// allows it, beyond --max-memory / --max-time (default 1 h); on a terminal a
// progress line shows the length being evaluated and the time left.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "source_options.h"

namespace posenc::cli {

class EvalCommand {
 public:
  explicit EvalCommand(CLI::App& parent);
  EvalCommand(const EvalCommand&) = delete;  // CLI11 holds pointers into the options
  EvalCommand& operator=(const EvalCommand&) = delete;

  bool selected() const { return app_->parsed(); }
  int run() const;

 private:
  CLI::App* app_;
  std::string checkpoint_;
  std::vector<int64_t> lengths_;
  int64_t batches_ = 8;
  bool json_ = false;
  std::string rope_scaling_;
  double rope_factor_ = 0;
  CLI::Option* rope_factor_opt_ = nullptr;
  ResourceOptions resources_;
};

}  // namespace posenc::cli
