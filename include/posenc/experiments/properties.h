// The `properties` suite (docs/experiments.md), after Wang et al. (ICLR 2021,
// "On Position Embeddings in BERT"): per encoding and seed, a small encoder
// pretrained with masked language modelling on the corpus, then fine-tuned on
// each labelled task of the corpus (posenc corpus --out: DIR/tasks/NAME), with
// early stopping on validation in both stages; the test score of the best
// validation checkpoint is what is reported. Each pretrained model is also
// probed: the indicators (monotonicity, translation invariance, symmetry) of
// its position table's dot proximity where it has an input table, and of its
// identical-word attention always. The summary compares encodings with paired
// t-tests over seeds and correlates the indicators with the task scores.
//
// A run (one encoding, one seed) lives in SUITE/runs/NAME: pretrain/ and one
// posenc train run per task, each with validation.jsonl (the early-stopping
// record), and result.json once everything is evaluated. A finished run is
// never recomputed; an interrupted one continues from its checkpoints and its
// validation record, with results equal to an uninterrupted run's.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "posenc/training/trainer.h"

namespace posenc::experiments {

// How a stage trains: up to config.steps, evaluating on validation every
// eval_every steps, stopping after `patience` evaluations without a better
// score (the schedule is the full run's; an early stop leaves it part-way).
struct EarlyStopping {
  int64_t eval_every = 100;
  int64_t patience = 3;
};

struct PropertiesPlan {
  std::vector<std::string> encodings;  // registry names
  int64_t seeds = 5;
  std::vector<std::string> tasks;      // task directories of the corpus: lexname, pos, definition
  nn::TrainConfig pretrain;            // task mlm; encoding, seed and data set per run
  nn::TrainConfig finetune;            // task, data, seq_len, init_from set per run and task
  // The amplitude of the sinusoidal input tables (the families with an input_scale setting: sinusoidal,
  // learnable-sinusoidal), set in the stages of the runs whose encoding has one; every other run keeps the
  // pretrain / finetune configs' input_scale, which has no effect on it. 0: the configs' value for all.
  double sinusoid_input_scale = 0;
  EarlyStopping pretrain_stopping;
  EarlyStopping finetune_stopping;
  int64_t pretrain_eval_batches = 16;  // masked-LM batches per validation / test evaluation
  int64_t validation_rows = 2048;      // a labelled validation split is read up to this many rows (0: all)
  int64_t probe_length = 64;           // identical-word probe length and position-table rows analysed
  int64_t probe_words = 64;
};

// quick: the whole pipeline in a few minutes (tests, smoke runs).
PropertiesPlan properties_plan(bool quick);

struct PropertiesRun {
  int64_t order = 0;
  std::string name;  // "learned-s0"
  std::string encoding;
  uint64_t seed = 0;
};
// One run per (encoding, seed). Throws std::invalid_argument "[experiment] seeds must be >= 1, got 0",
// and for bad stopping, rows, tasks or encodings (the registry's message).
std::vector<PropertiesRun> plan_properties_runs(const PropertiesPlan& plan);

struct StageOutcome {
  std::string stage;          // "pretrain" or the task's name
  int64_t best_step = 0;      // the checkpoint reported
  int64_t last_step = 0;      // where training stopped
  double validation = 0;      // the best validation score (pretrain: masked-LM loss; tasks: accuracy)
  double test = 0;            // the best checkpoint's test score (same metric)
  int64_t test_count = 0;     // scored items
  double seconds = 0;         // training wall time in this process
  double tokens_per_second = 0;
};

struct Probe {
  double monotonicity = 0, translation_invariance = 0, symmetry = 0;
};

struct PropertiesOutcome {
  std::string name, encoding;
  uint64_t seed = 0;
  bool reused = false;
  std::vector<StageOutcome> stages;  // pretrain, then the tasks in the plan's order
  std::optional<Probe> table;        // the input table's dot proximity (encodings with one)
  std::optional<Probe> attention;    // identical-word attention (absent when the map is constant: "none")
  std::string attention_note;        // why attention is absent
};

struct PropertiesCallbacks {
  nn::TrainCallbacks train;
  std::function<void(const std::string& stage)> stage;  // a stage begins ("pretrain", "lexname", ...)
};

// Trains, evaluates and probes one run (resuming what exists) and writes
// result.json; returns the stored outcome when it exists for the same plan,
// refusing one written for another. suite_dir/corpus must hold the corpus.
PropertiesOutcome run_properties(const PropertiesRun& run, const PropertiesPlan& plan,
                                 const std::filesystem::path& suite_dir, const PropertiesCallbacks& callbacks = {});

// Every runs/*/result.json of a properties suite, as the summary JSON
// (docs/experiments.md): per encoding the mean and sd over seeds of each
// stage's test score and of the probes, paired t-tests between encodings per
// task, and correlations across encodings of probes with task scores.
std::string summarize_properties(const std::filesystem::path& suite_dir);

// The summary as a plain-text table (the CLI's output).
std::string properties_table(const std::string& summary_json);

}  // namespace posenc::experiments
