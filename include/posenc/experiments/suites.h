// The experiment suites as a sweep drives them (suite_run.h): a list of
// independent runs (what --jobs and --slurm hand out by name), one run at a
// time, and the summary of a suite directory. DIR/suite.json names the suite
// a directory holds, so that a directory of one suite is never mixed with
// another's runs.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "posenc/training/trainer.h"

namespace posenc::experiments {

struct SuiteOptions {
  bool quick = false;
  std::optional<int64_t> seeds;        // the suite's when absent
  std::vector<std::string> encodings;  // empty: the suite's
  std::optional<int64_t> steps;        // the suite's when absent (properties: each stage's most)
  int64_t threads = 1;
};

struct RunReport {
  std::string line;  // "ppl@128 218.4, ..." or "lexname 0.61, pos 0.83, ..."
  bool reused = false;
  double tokens_per_second = 0;
};

struct RunProgress {
  std::function<void(const std::string& stage, const nn::TrainProgress&)> step;
  std::function<void(const std::string&)> warning;
};

class Suite {
 public:
  virtual ~Suite() = default;
  virtual std::string name() const = 0;
  // The corpus step's sources (posenc-text corpus --sources).
  virtual std::string corpus_sources() const = 0;
  virtual std::vector<std::string> run_names() const = 0;
  // The most training steps a run takes (the progress line's estimate).
  virtual int64_t run_steps() const = 0;
  // Trains and evaluates one run of suite_dir (its corpus made), resuming what exists.
  virtual RunReport run(const std::string& name, const std::filesystem::path& suite_dir,
                        const RunProgress& progress) const = 0;
};

// "[experiment] unknown suite 'x'; known: extrapolation, properties"; the plan is validated here.
std::unique_ptr<Suite> make_suite(const std::string& name, const SuiteOptions& options);

// Refuses a directory that holds another suite (DIR/suite.json, or for a
// directory from before that file, the format of its result.json files):
// "[experiment] DIR holds the 'extrapolation' suite, not 'properties': use another --out";
// then writes DIR/suite.json when missing.
void claim_suite_dir(const std::filesystem::path& dir, const std::string& suite);

// The suite a directory holds, from DIR/suite.json or its result files:
// "[experiment] DIR: no suite.json and no run results: not an experiment directory".
std::string suite_of(const std::filesystem::path& dir);

// Writes DIR/summary.json; returns the plain-text table. Throws on a malformed result file, naming it.
std::string summarize_suite(const std::filesystem::path& dir, std::string* json_text = nullptr);

}  // namespace posenc::experiments
