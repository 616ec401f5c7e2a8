#include "experiment_command.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <stdexcept>

#include "posenc/error.h"
#include "posenc/io/atomic_file.h"
#include "posenc/io/directory_lock.h"
#include "posenc/kernels/build_info.h"
#include "posenc/nn/experiment.h"
#include "experiment_report.h"
#include "processes.h"
#include "source_options.h"

namespace posenc::cli {
namespace {

namespace fs = std::filesystem;

// The corpus for the suite, written by posenc-text beside this executable
// (the tokenizer cannot share a process with libtorch). Skipped when present.
void prepare_corpus(const fs::path& dir, bool quick, int64_t vocab_size, const std::string& root) {
  if (fs::exists(dir / "corpus.json")) return;
  const fs::path tool = own_executable("experiment").parent_path() / "posenc-text";
  const std::string vocab = std::to_string(vocab_size > 0 ? vocab_size : quick ? 1000 : 8000);
  const std::string sources = quick ? "wordnet" : "wordnet,gcide,fortunes";
  const std::string out = dir.string(), cache = (dir.parent_path() / "tokenizer").string();
  std::cout << "corpus: " << sources << ", SentencePiece vocabulary " << vocab << " -> " << out << std::endl;
  // Its table goes to our stdout; its one-line error to our stderr.
  const pid_t pid = spawn_process("experiment", tool,
                                  {"posenc-text", "corpus", "--sources", sources, "--vocab-size", vocab, "--cache",
                                   cache, "--out", out, "--root", root},
                                  "the corpus step runs posenc-text, built beside posenc");
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) fail_runtime("experiment", "waiting for posenc-text: ", std::strerror(errno));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fail_runtime("experiment", "the corpus step (posenc-text corpus) failed; its message is above");
  }
}

void print_run_line(int64_t done, size_t total, const nn::RunOutcome& o, const char* how, double elapsed) {
  std::printf("run %lld/%zu %s: %s", static_cast<long long>(done), total, o.name.c_str(), how);
  if (!o.reused) std::printf(" (%.0f tokens/s)", o.tokens_per_second);
  for (const nn::EvalLength& l : o.lengths) {
    if (l.error.empty()) {
      std::printf(", ppl@%lld %.2f", static_cast<long long>(l.seq_len), std::exp(l.loss));
    } else {
      std::printf(", ppl@%lld n/a", static_cast<long long>(l.seq_len));
    }
  }
  std::printf("; elapsed %.0f s\n", elapsed);
  std::fflush(stdout);
}

void print_summary(const nn::SuiteSummary& s) {
  std::printf("test perplexity (mean +- sd over seeds), trained at seq_len %lld, %lld runs\n",
              static_cast<long long>(s.train_seq_len), static_cast<long long>(s.runs));
  std::printf("%-18s", "encoding");
  for (int64_t L : s.lengths) std::printf(" %19lld", static_cast<long long>(L));
  std::printf("\n");
  for (const nn::SummaryRow& r : s.rows) {
    std::printf("%-18s", r.encoding.c_str());
    for (const nn::SummaryCell& c : r.cells) {
      char cell[64];
      if (c.seeds == 0) {
        std::snprintf(cell, sizeof cell, "n/a");
      } else if (c.seeds == 1) {
        std::snprintf(cell, sizeof cell, "%.2f", c.mean);
      } else {
        std::snprintf(cell, sizeof cell, "%.2f +- %.2f", c.mean, c.sd);
      }
      std::printf(" %19s", cell);
    }
    std::printf("\n");
  }
}

}  // namespace

ExperimentCommand::ExperimentCommand(CLI::App& parent) {
  app_ = parent.add_subcommand("experiment", "Experiment suites on real text (docs/experiments.md)");
  app_->require_subcommand(1);
  run_ = app_->add_subcommand("run", "Run a suite: prepare the corpus, train and evaluate every run (resumable)");
  run_->add_option("suite", suite_, "extrapolation")->required();
  run_->add_option("--out", out_, "Suite directory")->required();
  run_->add_option("--seeds", seeds_, "Seeds per encoding (default: the suite's)");
  run_->add_flag("--quick", quick_, "The whole pipeline in minutes: tiny model, one seed, two lengths");
  run_->add_option("--encodings", encodings_, "Comma-separated registry names (default: the suite's)")
      ->delimiter(',');
  run_->add_option("--steps", steps_, "Training steps per run (default: the suite's)");
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
  report_->add_flag("--json", json_, "Print the summary as JSON");
}

int ExperimentCommand::run() const {
  if (run_->parsed()) return run_suite();
  return report();
}

int ExperimentCommand::run_suite() const {
  require(suite_ == "extrapolation", "experiment", "suite must be 'extrapolation' (the one built so far), got '",
          suite_, "'");
  nn::ExtrapolationPlan plan = nn::extrapolation_plan(quick_);
  if (run_->count("--seeds") > 0) plan.seeds = seeds_;
  if (!encodings_.empty()) plan.encodings = encodings_;
  if (run_->count("--steps") > 0) plan.train.steps = steps_;
  const int64_t cores = kernels::available_cores();
  // With --slurm the runs use the compute nodes' cores, not this host's.
  require(threads_ >= 1 && (slurm_ || threads_ <= cores), "experiment", "threads must be in 1..", cores,
          " (the cores available to this process), got ", threads_);
  plan.train.threads = threads_;
  require(jobs_ >= 1 && jobs_ * threads_ <= cores, "experiment", "jobs x threads must be in 1..", cores,
          " (the cores available to this process), got ", jobs_, " x ", threads_);
  const fs::path sbatch = check_slurm();
  const fs::path dir = out_;
  const std::vector<nn::ExperimentRun> runs = nn::plan_runs(plan);  // validates before anything is written
  if (!only_.empty()) {
    // A job of a --jobs sweep: the parent holds the suite's lock and made the corpus.
    for (nn::ExperimentRun run : runs) {
      if (run.name != only_) continue;
      run.config.task_options.data = (dir / "corpus").string();
      nn::run_experiment(run, dir, plan.lengths, plan.eval_batches, plan.rope_extensions);
      return 0;
    }
    fail_argument("experiment", "--only names no run of this plan, got '", only_, "'");
  }
  fs::create_directories(dir);
  const io::DirectoryLock lock("experiment", dir.string());
  prepare_corpus(dir / "corpus", quick_, vocab_size_, root_);
  std::vector<std::string> names;
  for (const nn::ExperimentRun& r : runs) names.push_back(r.name);
  if (slurm_ && submit_to_slurm(names, sbatch)) return 0;  // nothing to submit: the summary, as below
  if (jobs_ > 1) run_in_jobs(names, runs.size());
  const auto start = std::chrono::steady_clock::now();
  // On a terminal, one line: the run, its step and the sweep's time left, from
  // the training steps still to do (runs with a result.json cost nothing).
  ProgressLine progress("experiment");
  int64_t steps_left = 0;
  for (const nn::ExperimentRun& r : runs) {
    if (!fs::exists(dir / "runs" / r.name / "result.json")) steps_left += r.config.steps;
  }
  int64_t steps_done = 0;
  int64_t done = 0;
  for (const nn::ExperimentRun& r : runs) {
    nn::ExperimentRun run = r;
    run.config.task_options.data = (dir / "corpus").string();
    nn::TrainCallbacks callbacks;
    callbacks.warning = [&progress](const std::string& w) {
      progress.finish();
      std::cerr << "posenc: warning: " << w << '\n';
    };
    const std::string label = "run " + std::to_string(done + 1) + "/" + std::to_string(runs.size()) + " " + r.name;
    // A resumed run counts its earlier steps as done: the time left is then a little optimistic.
    callbacks.progress = [&](const nn::TrainProgress& p) {
      const double fraction =
          steps_left > 0 ? static_cast<double>(steps_done + p.step) / static_cast<double>(steps_left) : 1.0;
      progress.update(label + ", step " + std::to_string(p.step) + "/" + std::to_string(p.steps),
                      std::min(1.0, fraction));
    };
    const nn::RunOutcome o =
        nn::run_experiment(run, dir, plan.lengths, plan.eval_batches, plan.rope_extensions, callbacks);
    if (!o.reused) steps_done += run.config.steps;
    progress.finish();
    ++done;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // With --jobs the runs were trained by the jobs: here they are read back.
    print_run_line(done, runs.size(), o, o.reused ? (jobs_ > 1 ? "done" : "done before") : "trained", elapsed);
  }
  const nn::SuiteSummary summary = nn::summarize_experiment(dir);
  io::write_file_atomically("experiment", (dir / "summary.json").string(), nn::summary_json(summary));
  print_summary(summary);
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

fs::path ExperimentCommand::check_slurm() const {
  if (!slurm_) {
    require(run_->count("--partition") + run_->count("--time") + run_->count("--sbatch-arg") == 0, "experiment",
            "--partition, --time and --sbatch-arg go with --slurm");
    return {};
  }
  require(jobs_ == 1, "experiment", "--slurm runs each run as an array task: --jobs must be 1 with it, got ", jobs_);
  require(only_.empty(), "experiment", "--slurm submits the whole suite: --only cannot go with it, got '", only_,
          "'");
  validate_slurm_options("experiment", slurm_options_);
  return find_sbatch("experiment");
}

bool ExperimentCommand::submit_to_slurm(const std::vector<std::string>& names, const fs::path& sbatch) const {
  SlurmArray array;
  std::error_code ec;
  for (const std::string& name : names) {
    if (!fs::exists(fs::path(out_) / "runs" / name / "result.json", ec)) array.runs.push_back(name);
  }
  if (array.runs.empty()) {
    std::printf("nothing to submit to Slurm: all %zu runs are finished\n", names.size());
    return false;
  }
  array.suite = suite_;
  array.dir = fs::absolute(out_);
  array.workdir = fs::current_path();  // the tasks read --out and --root as this process does
  array.command = job_args();
  array.command.front() = own_executable("experiment").string();
  array.cpus_per_task = threads_;
  array.options = slurm_options_;
  const SlurmSubmission s = submit_slurm_array("experiment", sbatch, array);
  std::printf("submitted Slurm job array %s: %zu runs; when it finishes: posenc experiment report %s\n",
              s.job_id.c_str(), array.runs.size(), out_.c_str());
  if (s.report_error.empty()) {
    std::printf("report job %s writes the summary after it (%s)\n", s.report_job_id.c_str(),
                (array.dir / "slurm" / "report.out").c_str());
  } else {
    std::fflush(stdout);
    std::cerr << "posenc: warning: the report job was not submitted (" << s.report_error
              << "); run posenc experiment report " << out_ << " when the array has finished\n";
  }
  std::fflush(stdout);
  return true;
}

void ExperimentCommand::run_in_jobs(const std::vector<std::string>& names, size_t total) const {
  std::error_code ec;
  const fs::path self = own_executable("experiment");
  const std::vector<std::string> base = job_args();
  const auto start = std::chrono::steady_clock::now();
  std::map<pid_t, std::string> running;
  std::vector<std::string> failed;
  size_t next = 0;
  int64_t done = 0;
  while (next < names.size() || !running.empty()) {
    while (next < names.size() && static_cast<int64_t>(running.size()) < jobs_) {
      const std::string& name = names[next++];
      if (fs::exists(fs::path(out_) / "runs" / name / "result.json", ec)) continue;  // reported below as done before
      std::vector<std::string> args = base;
      args.insert(args.end(), {"--only", name});
      running[spawn_process("experiment", self, std::move(args), "a job of the sweep")] = name;
    }
    if (running.empty()) break;
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      fail_runtime("experiment", "waiting for a job: ", std::strerror(errno));
    }
    const auto it = running.find(pid);
    if (it == running.end()) continue;
    const std::string name = it->second;
    running.erase(it);
    ++done;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      failed.push_back(name);
      continue;
    }
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("job %lld: %s trained; elapsed %.0f s\n", static_cast<long long>(done), name.c_str(), elapsed);
    std::fflush(stdout);
  }
  if (!failed.empty()) {
    std::string list;
    for (const std::string& f : failed) list += (list.empty() ? "" : ", ") + f;
    fail_runtime("experiment", failed.size(), " of ", total, " runs failed (", list,
                 "); their messages are above; the others are kept: run the same command again");
  }
}

int ExperimentCommand::report() const {
  const nn::SuiteSummary summary = nn::summarize_experiment(report_dir_);
  const std::string text = nn::summary_json(summary);
  io::write_file_atomically("experiment", (fs::path(report_dir_) / "summary.json").string(), text);
  write_experiment_html(report_dir_, json_ ? std::cerr : std::cout);
  if (json_) {
    std::cout << text;
  } else {
    print_summary(summary);
  }
  return 0;
}

}  // namespace posenc::cli
