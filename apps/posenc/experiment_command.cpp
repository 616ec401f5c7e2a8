#include "experiment_command.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "posenc/error.h"
#include "posenc/experiments/summary_markdown.h"
#include "posenc/io/atomic_file.h"
#include "posenc/io/directory_lock.h"
#include "posenc/text/task_format.h"
#include "posenc/kernels/build_info.h"
#include "experiment_report.h"
#include "processes.h"
#include "source_options.h"
#include "suites.h"

namespace posenc::cli {
namespace {

namespace fs = std::filesystem;

// A corpus directory from a posenc whose fine-tuning tasks had another layout
// (format 1: definition passages without delimiters) is refused: the finished
// runs beside it were fine-tuned on it, and new ones must not be mixed in.
void require_current_tasks(const fs::path& dir) {
  std::error_code ec;
  for (const fs::directory_entry& task : fs::directory_iterator(dir / "tasks", ec)) {
    const fs::path meta = task.path() / "task.json";
    std::string format;
    try {
      format = nlohmann::json::parse(io::read_regular_file("experiment", meta.string())).value("format", "");
    } catch (const nlohmann::json::exception&) {
      fail_runtime("experiment", meta.string(), ": not a posenc corpus task description");
    }
    if (format != text::kTaskFormat) {
      fail_runtime("experiment", meta.string(), ": task format '", format, "', this posenc writes '", text::kTaskFormat,
                   "'; the runs in ", dir.parent_path().string(), " were fine-tuned on the older tasks: use a new --out");
    }
  }
}

// The corpus for the suite, written by posenc-text beside this executable
// (the tokenizer cannot share a process with libtorch). Skipped when present.
void prepare_corpus(const fs::path& dir, const std::string& sources, bool quick, int64_t vocab_size,
                    const std::string& root) {
  if (fs::exists(dir / "corpus.json")) return require_current_tasks(dir);
  const fs::path tool = own_executable("experiment").parent_path() / "posenc-text";
  const std::string vocab = std::to_string(vocab_size > 0 ? vocab_size : quick ? 1000 : 8000);
  const std::string out = dir.string(), cache = (dir.parent_path() / "tokenizer").string();
  std::cout << "corpus: " << sources << ", SentencePiece vocabulary " << vocab << " -> " << out << std::endl;
  // Its table goes to our stdout; its one-line error to our stderr.
  const pid_t pid = spawn_process("experiment", tool,
                                  {"posenc-text", "corpus", "--sources", sources, "--vocab-size", vocab, "--cache",
                                   cache, "--out", out, "--root", root, "--tokenizer-texts", quick ? "20000" : "0"},
                                  "the corpus step runs posenc-text, built beside posenc");
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) fail_runtime("experiment", "waiting for posenc-text: ", std::strerror(errno));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fail_runtime("experiment", "the corpus step (posenc-text corpus) failed; its message is above");
  }
}

}  // namespace

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
  const int64_t cores = kernels::available_cores();
  // With --slurm the runs use the compute nodes' cores, not this host's.
  require(threads_ >= 1 && (slurm_ || threads_ <= cores), "experiment", "threads must be in 1..", cores,
          " (the cores available to this process), got ", threads_);
  require(jobs_ >= 1 && jobs_ * threads_ <= cores, "experiment", "jobs x threads must be in 1..", cores,
          " (the cores available to this process), got ", jobs_, " x ", threads_);
  SuiteOptions options;
  options.quick = quick_;
  if (run_->count("--seeds") > 0) options.seeds = seeds_;
  options.encodings = encodings_;
  if (run_->count("--steps") > 0) options.steps = steps_;
  options.threads = threads_;
  const std::unique_ptr<Suite> suite = make_suite(suite_, options);  // validates before anything is written
  const fs::path sbatch = check_slurm();
  const fs::path dir = out_;
  const std::vector<std::string> names = suite->run_names();
  if (!only_.empty()) {
    // A job of a --jobs sweep or a Slurm array: the parent made the corpus (and holds the suite's lock).
    require(std::find(names.begin(), names.end(), only_) != names.end(), "experiment",
            "--only names no run of this plan, got '", only_, "'");
    suite->run(only_, dir, {});
    return 0;
  }
  fs::create_directories(dir);
  const io::DirectoryLock lock("experiment", dir.string());
  claim_suite_dir(dir, suite->name());
  prepare_corpus(dir / "corpus", suite->corpus_sources(), quick_, vocab_size_, root_);
  if (slurm_ && submit_to_slurm(names, sbatch)) return 0;  // nothing to submit: the summary, as below
  if (jobs_ > 1) run_in_jobs(names, names.size());
  const auto start = std::chrono::steady_clock::now();
  // On a terminal, one line: the run, its stage and step and the sweep's time left, from
  // the training steps still to do (runs with a result.json cost nothing; early stopping makes it pessimistic).
  ProgressLine progress("experiment");
  int64_t steps_left = 0;
  for (const std::string& name : names) {
    if (!fs::exists(dir / "runs" / name / "result.json")) steps_left += suite->run_steps();
  }
  int64_t steps_done = 0, done = 0;
  for (const std::string& name : names) {
    RunProgress callbacks;
    callbacks.warning = [&progress](const std::string& w) {
      progress.finish();
      std::cerr << "posenc: warning: " << w << '\n';
    };
    const std::string label = "run " + std::to_string(done + 1) + "/" + std::to_string(names.size()) + " " + name;
    int64_t stage_base = 0, last_step = 0;  // steps of the run's finished stages
    std::string current;
    // A resumed run counts its earlier steps as done: the time left is then a little optimistic.
    callbacks.step = [&](const std::string& stage, const nn::TrainProgress& p) {
      if (stage != current) {
        stage_base += last_step;
        current = stage;
      }
      last_step = p.step;
      const double fraction = steps_left > 0 ? static_cast<double>(steps_done + stage_base + p.step) /
                                                   static_cast<double>(steps_left)
                                             : 1.0;
      progress.update(label + ", " + stage + " step " + std::to_string(p.step) + "/" + std::to_string(p.steps),
                      std::min(1.0, fraction));
    };
    const RunReport r = suite->run(name, dir, callbacks);
    if (!r.reused) steps_done += suite->run_steps();
    progress.finish();
    ++done;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // With --jobs the runs were trained by the jobs: here they are read back.
    std::printf("run %lld/%zu %s: %s", static_cast<long long>(done), names.size(), name.c_str(),
                r.reused ? (jobs_ > 1 ? "done" : "done before") : "trained");
    if (!r.reused) std::printf(" (%.0f tokens/s)", r.tokens_per_second);
    std::printf(", %s; elapsed %.0f s\n", r.line.c_str(), elapsed);
    std::fflush(stdout);
  }
  std::cout << summarize_suite(dir);
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
  std::string text;
  const std::string table = summarize_suite(report_dir_, &text);
  // Only the requested format goes to stdout, so it can be redirected to a file.
  write_experiment_html(report_dir_, json_ || markdown_ ? std::cerr : std::cout);
  std::cout << (json_ ? text : markdown_ ? experiments::summary_markdown(text, reference_) : table);
  return 0;
}

}  // namespace posenc::cli
