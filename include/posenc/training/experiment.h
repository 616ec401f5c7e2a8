// The experiment suites of docs/experiments.md, as plans of independent runs.
// Today: `extrapolation` — a causal language model trained at one length on
// the corpus (task text), then its perplexity at longer lengths on the test
// split, per encoding and seed (Press et al. 2022 and the length-extrapolation
// literature compare encodings this way).
//
// A suite directory holds one directory per run (runs/NAME: the posenc train
// run, plus result.json once evaluated). A run whose result.json exists and
// whose configuration matches is never recomputed; an interrupted run resumes
// from its newest checkpoint (posenc train --resume), so an interrupted sweep
// continues where it stopped and its results equal an uninterrupted one's.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "posenc/training/trainer.h"

namespace posenc::nn {

struct ExtrapolationPlan {
  std::vector<std::string> encodings;  // registry names
  int64_t seeds = 3;
  TrainConfig train;                   // task "text"; data is set by the caller
  std::vector<int64_t> lengths;        // evaluation lengths (test split)
  int64_t eval_batches = 8;
  // Context extensions a "rope" run is also evaluated with (RopeExtension
  // types, factor = longest length / training length): rows "rope+linear", ...
  std::vector<std::string> rope_extensions;
};

// Whether a family of the encoding (a registry name, "A+B" allowed) has the input_scale setting: a sinusoidal
// input table (sinusoidal, learnable-sinusoidal).
bool reads_input_scale(const std::string& encoding);

// `listed` (in its order), then every other family of the registry's catalog
// that `model` can take (validate_encoding with its sizes and model kind) and
// `skipped` does not name, in catalog order: a suite's default covers the
// families added after it was written.
std::vector<std::string> with_every_family(std::vector<std::string> listed, const TrainConfig& model,
                                           const std::vector<std::string>& skipped = {});

// The suite's defaults (docs/experiments.md): quick is the whole pipeline in
// minutes (one seed, a tiny model, two lengths) for tests and smoke runs.
ExtrapolationPlan extrapolation_plan(bool quick);

struct ExperimentRun {
  int64_t order = 0;  // its place in the plan (the summary lists encodings in this order)
  std::string name;   // "rope-s0": encoding and seed
  TrainConfig config;
};

// One run per (encoding, seed), encodings in the plan's order, seeds 0 .. seeds-1.
// Throws std::invalid_argument naming a bad field ("[experiment] seeds must be >= 1, got 0").
std::vector<ExperimentRun> plan_runs(const ExtrapolationPlan& plan);

struct RunOutcome {
  std::string name;
  std::string encoding;
  uint64_t seed = 0;
  bool reused = false;             // result.json was already there
  double train_seconds = 0;        // wall time of the training that produced the checkpoint (this process's share)
  double tokens_per_second = 0;
  std::vector<EvalLength> lengths;  // perplexity = exp(loss); error set where the model cannot take the length
  // (extension type, its lengths) for a run whose encoding is "rope", in the plan's order.
  std::vector<std::pair<std::string, std::vector<EvalLength>>> extensions;
};

// Trains (resuming) and evaluates one run under suite_dir/runs/NAME, writing
// result.json atomically; returns the stored outcome when result.json exists
// for the same configuration, and refuses one written for another:
// "[experiment] DIR/runs/rope-s0/result.json was written for another configuration (dim 32, here 64): use another --out".
RunOutcome run_experiment(const ExperimentRun& run, const std::filesystem::path& suite_dir,
                          const std::vector<int64_t>& lengths, int64_t eval_batches,
                          const std::vector<std::string>& rope_extensions = {},
                          const TrainCallbacks& callbacks = {});

// Per encoding and length: the mean and standard deviation over seeds of the
// test perplexity, and how many seeds could be evaluated there.
struct SummaryCell {
  int64_t seq_len = 0;
  double mean = 0;
  double sd = 0;      // sample standard deviation (0 with one seed)
  int64_t seeds = 0;  // evaluated seeds; 0: not applicable (e.g. learned beyond its table)
  std::string error;  // the first run's reason when not applicable
  // (seed, test loss = log perplexity) of each evaluated seed, by seed: runs
  // of one seed share their data order, so encodings compare paired by seed.
  std::vector<std::pair<uint64_t, double>> seed_losses;
};
struct SummaryRow {
  std::string encoding;  // a registry name, or "rope+linear" for rope evaluated with that extension
  std::vector<SummaryCell> cells;
};
struct SuiteSummary {
  std::string suite = "extrapolation";
  int64_t train_seq_len = 0;
  std::vector<int64_t> lengths;
  std::vector<SummaryRow> rows;
  int64_t runs = 0;  // result.json files read
};

// A run's configuration as its result.json records it (its identity), with
// task_options.data named as the suite directory's layout names it:
// "corpus" or "corpus/tasks/NAME" where the path ends so, whatever directory
// holds the suite. So a suite directory's finished runs are reused from any
// copy of it (another checkout, another machine); results of earlier
// versions hold the absolute path and are read the same way.
nlohmann::json suite_relative_data(nlohmann::json config);

// A JSON file of a suite directory; "[experiment] PATH: not valid JSON".
nlohmann::json read_experiment_json(const std::filesystem::path& path);

// Every runs/*/result.json of suite_dir, parsed, in the plan's order (their
// "order", then path), each once. "[experiment] DIR: no runs/ directory: not an experiment".
struct StoredResult {
  std::filesystem::path path;
  nlohmann::json json;
};
std::vector<StoredResult> read_run_results(const std::filesystem::path& suite_dir);

// Reads every runs/*/result.json of suite_dir. Throws std::runtime_error
// naming a malformed result file.
SuiteSummary summarize_experiment(const std::filesystem::path& suite_dir);
std::string summary_json(const SuiteSummary& summary);

}  // namespace posenc::nn
