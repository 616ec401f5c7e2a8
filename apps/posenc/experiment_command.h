// `posenc experiment run extrapolation|properties --out DIR [--seeds N] [--quick]
// [--encodings a,b] [--steps N] [--vocab-size N] [--threads N] [--jobs N] [--root DIR]
// [--slurm [--partition P] [--time T] [--sbatch-arg=ARG ...]]` and
// `posenc experiment report DIR [--json]`: the suites of docs/experiments.md.
// The corpus step runs posenc-text (a separate process: see text_tool.h);
// every run is resumable and a finished one is never recomputed.
#pragma once

#include <CLI/CLI.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "slurm_submit.h"

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
  // --jobs N: each run in its own posenc process, N at a time.
  void run_in_jobs(const std::vector<std::string>& names, size_t total) const;
  // The argv of the process that runs one run (add "--only NAME"): --jobs and --slurm start the same.
  std::vector<std::string> job_args() const;
  // --slurm: the refusals and sbatch's path (empty without --slurm), before the corpus step.
  std::filesystem::path check_slurm() const;
  // --slurm: submits the runs (plan order) not finished yet; false when there is none.
  bool submit_to_slurm(const std::vector<std::string>& names, const std::filesystem::path& sbatch) const;
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
  SlurmOptions slurm_options_;
  std::string root_ = "/";
  std::string report_dir_;
  bool json_ = false;
  bool markdown_ = false;
  std::string reference_;  // --markdown --reference: empty for the first row
};

}  // namespace posenc::cli
