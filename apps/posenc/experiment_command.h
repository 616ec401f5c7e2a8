// `posenc experiment run extrapolation|properties --out DIR [--seeds N] [--quick]
// [--encodings a,b] [--steps N] [--vocab-size N] [--threads N] [--jobs N] [--root DIR]
// [--slurm [--partition P] [--time T] [--sbatch-arg=ARG ...]]` and
// `posenc experiment report DIR [--json]`: the suites of docs/experiments.md.
// The sweep itself is posenc::experiments::run_suite (suite_run.h); this
// command parses its options and prints what it reports.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "posenc/experiments/slurm_submit.h"

namespace posenc::cli {

class ExperimentCommand {
 public:
  explicit ExperimentCommand(CLI::App& parent);
  ExperimentCommand(const ExperimentCommand&) = delete;  // CLI11 holds pointers to the members
  ExperimentCommand& operator=(const ExperimentCommand&) = delete;

  bool selected() const { return app_->parsed(); }
  int run() const;

 private:
  int run_suite() const;
  // The argv of the process that runs one run (add "--only NAME"): --jobs and --slurm start the same.
  std::vector<std::string> job_args() const;
  int report() const;

  CLI::App* app_;
  CLI::App* run_;
  CLI::App* report_;
  std::string suite_;
  std::string out_;
  int64_t seeds_ = 0;
  bool quick_ = false;
  std::vector<std::string> encodings_;
  int64_t steps_ = 0;
  int64_t vocab_size_ = 0;
  int64_t threads_ = 1;
  int64_t jobs_ = 1;
  std::string only_;  // a job: this one run, no corpus step, no suite lock, no summary
  bool slurm_ = false;
  experiments::SlurmOptions slurm_options_;
  std::string root_ = "/";
  std::string report_dir_;
  bool json_ = false;
  bool markdown_ = false;
  std::string reference_;  // --markdown --reference: empty for the first row
};

}  // namespace posenc::cli
