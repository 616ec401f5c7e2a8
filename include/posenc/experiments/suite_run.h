// A sweep of one suite (suites.h) over a suite directory, as `posenc
// experiment run SUITE --out DIR` drives it: refuse a directory of another
// suite, make the corpus (posenc-text, a separate process: the tokenizer cannot
// share a process with libtorch), then either submit the runs not finished
// yet to Slurm (slurm_submit.h), or train them, each in its own process N at a
// time (--jobs) and/or here one after the other, and write the summary. Every
// run is resumable and a finished one is never recomputed. The suite
// directory's lock (io::DirectoryLock) is held throughout, except by a job
// (`only`), which runs one run of a sweep whose parent holds it.
//
// Never prints: what happens is reported through SuiteRunEvents, in order,
// and the outcome returned. Errors throw "[experiment] ..."
// (std::invalid_argument for a bad option, std::runtime_error otherwise).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "posenc/experiments/slurm_submit.h"
#include "posenc/experiments/suites.h"

namespace posenc::experiments {

struct SuiteRunOptions {
  std::string suite;          // make_suite's name
  std::filesystem::path dir;  // the suite directory as given: the jobs and array tasks are given the same
  SuiteOptions plan;          // quick, seeds, encodings, steps, threads per run
  int64_t vocab_size = 0;     // the corpus's SentencePiece vocabulary; 0: 8000 (quick: 1000)
  std::string root = "/";     // the corpus packages are read under this directory
  int64_t jobs = 1;           // runs at once, each its own process; jobs x threads must fit the cores
  std::string only;           // a job: this one run, no corpus step, no suite lock, no summary
  bool slurm = false;         // submit instead of training here
  bool slurm_options_given = false;  // the Slurm options were set (refused without slurm)
  SlurmOptions slurm_options;
  // The processes a sweep starts.
  std::filesystem::path executable;      // posenc: the jobs, the array tasks and the report job
  std::vector<std::string> job_args;     // a job's argv without "--only NAME"; [0] the name it sees
  std::vector<std::string> report_args;  // the report job's argv without the directory; [0] likewise
  std::filesystem::path text_tool;       // posenc-text: the corpus step
};

// A training step of run `index` (from 1) of `total`, and how far the sweep
// is: its training steps done over those to do when it started (runs with a
// result.json cost nothing; early stopping makes it pessimistic, a resumed run's
// earlier steps counted as done a little optimistic).
struct RunStep {
  int64_t index = 0;
  int64_t total = 0;
  std::string name;
  std::string stage;  // "train", "pretrain" or a task
  nn::TrainProgress progress;
  double fraction = 0;  // in [0, 1]
};

struct RunDone {
  int64_t index = 0;
  int64_t total = 0;
  std::string name;
  RunReport report;      // reused: finished before, or (with jobs > 1) by a job
  double elapsed = 0;    // seconds since the first run began here
};

// Each may be empty.
struct SuiteRunEvents {
  // Before posenc-text makes the corpus (only when DIR/corpus has none).
  std::function<void(const std::string& sources, int64_t vocab_size, const std::filesystem::path& corpus_dir)> corpus;
  // jobs > 1: a job ended well (`done` counts the jobs ended, failed ones too).
  std::function<void(int64_t done, const std::string& name, double elapsed)> job_trained;
  // slurm: every run is finished, nothing is submitted and the sweep goes on to its summary.
  std::function<void(size_t runs)> nothing_to_submit;
  // Before the first run is trained or read back here, in plan order.
  std::function<void()> runs_begin;
  std::function<void(const RunStep&)> step;
  std::function<void(const std::string&)> warning;
  std::function<void(const RunDone&)> run_done;
};

struct SuiteRunOutcome {
  enum class End {
    kOneRun,      // `only`: that run is finished
    kSubmitted,   // slurm: the array (and perhaps the report job) submitted
    kSummarized,  // every run finished; DIR/summary.json written
  };
  End end = End::kOneRun;
  SlurmSubmission submission;  // kSubmitted
  size_t submitted_runs = 0;   // kSubmitted
  std::string table;           // kSummarized: summarize_suite's plain-text table
};

// Validates every option before anything is written ("[experiment] threads
// must be in 1..N (the cores available to this process), got T", the plan's
// and the Slurm options' refusals), then runs the sweep. When some --jobs
// job failed: "[experiment] F of N runs failed (a, b); their messages are
// above; the others are kept: run the same command again".
SuiteRunOutcome run_suite(const SuiteRunOptions& options, const SuiteRunEvents& events);

}  // namespace posenc::experiments
