// `posenc probe SOURCE [--folds 5] [--seed S] [--pairs N] [--protocol default|pe-study] [--json]`:
// the probes of Wang & Chen (EMNLP 2020) on one table: absolute (linear
// regression to the position, mean absolute error) and relative (logistic
// regression on pairs, which comes first, error rate), cross-validated;
// pe-study runs the relative probe as their released script does.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "posenc/analysis/probes.h"
#include "source_options.h"

namespace posenc::cli {

class ProbeCommand {
 public:
  explicit ProbeCommand(CLI::App& parent);
  ProbeCommand(const ProbeCommand&) = delete;  // CLI11 holds pointers into the members
  ProbeCommand& operator=(const ProbeCommand&) = delete;

  bool selected() const { return app_->parsed(); }
  void run() const;

 private:
  CLI::App* app_;
  SourceOptions source_;
  analysis::ProbeOptions options_;
  int64_t pairs_ = 0;  // ProbeOptions::pairs when given: its default depends on the protocol
  CLI::Option* pairs_opt_ = nullptr;
  std::string protocol_ = "default";
  bool json_ = false;
};

}  // namespace posenc::cli
