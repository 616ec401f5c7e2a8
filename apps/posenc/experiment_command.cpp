#include "experiment_command.h"

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>

#include "posenc/experiments/suite_run.h"
#include "posenc/experiments/suites.h"
#include "posenc/experiments/summary_markdown.h"
#include "experiment_report.h"
#include "processes.h"
#include "source_options.h"

namespace posenc::cli {

namespace fs = std::filesystem;

ExperimentCommand::ExperimentCommand(CLI::App& parent) {
  app_ = parent.add_subcommand("experiment", "Experiment suites on real text (docs/experiments.md)");
  app_->require_subcommand(1);
  run_ = app_->add_subcommand("run", "Run a suite: prepare the corpus, train and evaluate every run (resumable)");
  run_->add_option("suite", suite_, "extrapolation | properties")->required();
  run_->add_option("--out", out_, "Suite directory")->required();
  run_->add_option("--seeds", seeds_, "Seeds per encoding (default: the suite's)");
  run_->add_flag("--quick", quick_, "The whole pipeline in minutes: tiny models, few runs, short training");
  run_->add_option("--encodings", encodings_, "Comma-separated registry names (default: the suite's)")
      ->delimiter(',');
  run_->add_option("--steps", steps_,
                   "Training steps per run (properties: the most per stage, whole evaluation intervals; default: "
                   "the suite's)");
  run_->add_option("--vocab-size", vocab_size_, "SentencePiece vocabulary (default: 8000; --quick 1000)");
  run_->add_option("--threads", threads_, "Threads per run (results are reproducible per thread count)")
      ->capture_default_str();
  run_->add_option("--jobs", jobs_,
                   "Runs at once, each its own process (jobs x threads must fit the cores; results do not "
                   "depend on it)")
      ->capture_default_str();
  run_->add_option("--root", root_, "Read the corpus packages under this directory instead of /")
      ->capture_default_str();
  run_->add_option("--only", only_, "")->group("");  // what a job runs (--jobs, --slurm)
  run_->add_flag("--slurm", slurm_,
                 "Submit the runs not finished yet as a Slurm job array (one task per run, sbatch on PATH) and a "
                 "report job after it; the corpus is made here first");
  run_->add_option("--partition", slurm_options_.partition, "--slurm: the partition (default: the cluster's)");
  run_->add_option("--time", slurm_options_.time, "--slurm: time limit per run, e.g. 04:00:00 (default: the "
                                                  "partition's)");
  run_->add_option("--sbatch-arg", slurm_options_.extra,
                   "--slurm: one more #SBATCH option per use, written --sbatch-arg=--mem=4G")
      ->allow_extra_args(false);
  report_ = app_->add_subcommand("report", "Summarize a suite directory: table on stdout, DIR/summary.json");
  report_->add_option("dir", report_dir_, "Suite directory")->required();
  auto* as_json = report_->add_flag("--json", json_, "Print the summary as JSON");
  auto* as_markdown = report_->add_flag("--markdown", markdown_,
                                        "Print the summary as Markdown tables (as docs/experiments.md publishes them)");
  as_markdown->excludes(as_json);
  report_->add_option("--reference", reference_,
                      "--markdown: the encoding the paired tests are shown against (default: the first row's)")
      ->needs(as_markdown);
}

int ExperimentCommand::run() const {
  if (run_->parsed()) return run_suite();
  return report();
}

int ExperimentCommand::run_suite() const {
  experiments::SuiteRunOptions o;
  o.suite = suite_;
  o.dir = out_;
  o.plan.quick = quick_;
  if (run_->count("--seeds") > 0) o.plan.seeds = seeds_;
  o.plan.encodings = encodings_;
  if (run_->count("--steps") > 0) o.plan.steps = steps_;
  o.plan.threads = threads_;
  o.vocab_size = vocab_size_;
  o.root = root_;
  o.jobs = jobs_;
  o.only = only_;
  o.slurm = slurm_;
  o.slurm_options_given = run_->count("--partition") + run_->count("--time") + run_->count("--sbatch-arg") > 0;
  o.slurm_options = slurm_options_;
  o.executable = own_executable("experiment");
  o.job_args = job_args();
  o.report_args = {"posenc", "experiment", "report"};
  o.text_tool = o.executable.parent_path() / "posenc-text";

  // On a terminal, one line: the run, its stage and step and the sweep's time left.
  std::optional<ProgressLine> progress;
  experiments::SuiteRunEvents events;
  events.corpus = [](const std::string& sources, int64_t vocab, const fs::path& corpus) {
    std::cout << "corpus: " << sources << ", SentencePiece vocabulary " << vocab << " -> " << corpus.string()
              << std::endl;
  };
  events.job_trained = [](int64_t done, const std::string& name, double elapsed) {
    std::printf("job %lld: %s trained; elapsed %.0f s\n", static_cast<long long>(done), name.c_str(), elapsed);
    std::fflush(stdout);
  };
  events.nothing_to_submit = [](size_t runs) {
    std::printf("nothing to submit to Slurm: all %zu runs are finished\n", runs);
  };
  events.runs_begin = [&progress] { progress.emplace("experiment"); };
  events.step = [&progress](const experiments::RunStep& s) {
    progress->update("run " + std::to_string(s.index) + "/" + std::to_string(s.total) + " " + s.name + ", " +
                         s.stage + " step " + std::to_string(s.progress.step) + "/" + std::to_string(s.progress.steps),
                     s.fraction);
  };
  events.warning = [&progress](const std::string& w) {
    if (progress) progress->finish();
    std::cerr << "posenc: warning: " << w << '\n';
  };
  events.run_done = [&progress, this](const experiments::RunDone& d) {
    progress->finish();
    // With --jobs the runs were trained by the jobs: here they are read back.
    std::printf("run %lld/%lld %s: %s", static_cast<long long>(d.index), static_cast<long long>(d.total),
                d.name.c_str(), d.report.reused ? (jobs_ > 1 ? "done" : "done before") : "trained");
    if (!d.report.reused) std::printf(" (%.0f tokens/s)", d.report.tokens_per_second);
    std::printf(", %s; elapsed %.0f s\n", d.report.line.c_str(), d.elapsed);
    std::fflush(stdout);
  };
  const experiments::SuiteRunOutcome outcome = experiments::run_suite(o, events);
  if (outcome.end == experiments::SuiteRunOutcome::End::kSubmitted) {
    const experiments::SlurmSubmission& s = outcome.submission;
    std::printf("submitted Slurm job array %s: %zu runs; when it finishes: posenc experiment report %s\n",
                s.job_id.c_str(), outcome.submitted_runs, out_.c_str());
    if (s.report_error.empty()) {
      std::printf("report job %s writes the summary after it (%s)\n", s.report_job_id.c_str(),
                  s.report_output.c_str());
    } else {
      std::fflush(stdout);
      std::cerr << "posenc: warning: the report job was not submitted (" << s.report_error
                << "); run posenc experiment report " << out_ << " when the array has finished\n";
    }
    std::fflush(stdout);
  }
  std::cout << outcome.table;  // the summary (empty for a job and a submission)
  return 0;
}

std::vector<std::string> ExperimentCommand::job_args() const {
  std::vector<std::string> base = {"posenc", "experiment", "run", suite_, "--out", out_, "--threads",
                                   std::to_string(threads_), "--root", root_};
  if (quick_) base.push_back("--quick");
  if (run_->count("--seeds") > 0) base.insert(base.end(), {"--seeds", std::to_string(seeds_)});
  if (run_->count("--steps") > 0) base.insert(base.end(), {"--steps", std::to_string(steps_)});
  if (run_->count("--vocab-size") > 0) base.insert(base.end(), {"--vocab-size", std::to_string(vocab_size_)});
  if (!encodings_.empty()) {
    std::string joined;
    for (const std::string& e : encodings_) joined += (joined.empty() ? "" : ",") + e;
    base.insert(base.end(), {"--encodings", joined});
  }
  return base;
}

int ExperimentCommand::report() const {
  std::string text;
  const std::string table = experiments::summarize_suite(report_dir_, &text);
  // Only the requested format goes to stdout, so it can be redirected to a file.
  write_experiment_html(report_dir_, json_ || markdown_ ? std::cerr : std::cout);
  std::cout << (json_ ? text : markdown_ ? experiments::summary_markdown(text, reference_) : table);
  return 0;
}

}  // namespace posenc::cli
