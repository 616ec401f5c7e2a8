#include "posenc/experiments/suite_run.h"

#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <system_error>

#include <nlohmann/json.hpp>

#include "child_processes.h"
#include "posenc/error.h"
#include "posenc/io/atomic_file.h"
#include "posenc/io/directory_lock.h"
#include "posenc/kernels/build_info.h"
#include "posenc/text/task_format.h"

namespace posenc::experiments {
namespace {

namespace fs = std::filesystem;
constexpr const char* kOp = "experiment";

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

bool finished(const fs::path& dir, const std::string& run) {
  std::error_code ec;
  return fs::exists(dir / "runs" / run / "result.json", ec);
}

// A corpus directory from a posenc whose fine-tuning tasks had another layout
// (format 1: definition passages without delimiters) is refused: the finished
// runs beside it were fine-tuned on it, and new ones must not be mixed in.
void require_current_tasks(const fs::path& dir) {
  std::error_code ec;
  for (const fs::directory_entry& task : fs::directory_iterator(dir / "tasks", ec)) {
    const fs::path meta = task.path() / "task.json";
    std::string format;
    try {
      format = nlohmann::json::parse(io::read_regular_file(kOp, meta.string())).value("format", "");
    } catch (const nlohmann::json::exception&) {
      fail_runtime(kOp, meta.string(), ": not a posenc corpus task description");
    }
    if (format != text::kTaskFormat) {
      fail_runtime(kOp, meta.string(), ": task format '", format, "', this posenc writes '", text::kTaskFormat,
                   "'; the runs in ", dir.parent_path().string(), " were fine-tuned on the older tasks: use a new --out");
    }
  }
}

// The corpus for the suite, written by posenc-text. Skipped when present.
void prepare_corpus(const fs::path& dir, const std::string& sources, const SuiteRunOptions& o,
                    const SuiteRunEvents& events) {
  if (fs::exists(dir / "corpus.json")) return require_current_tasks(dir);
  const int64_t vocab = o.vocab_size > 0 ? o.vocab_size : o.plan.quick ? 1000 : 8000;
  const std::string out = dir.string(), cache = (dir.parent_path() / "tokenizer").string();
  if (events.corpus) events.corpus(sources, vocab, dir);
  // Its table goes to our stdout; its one-line error to our stderr.
  const pid_t pid = spawn_process(kOp, o.text_tool,
                                  {"posenc-text", "corpus", "--sources", sources, "--vocab-size", std::to_string(vocab),
                                   "--cache", cache, "--out", out, "--root", o.root, "--tokenizer-texts",
                                   o.plan.quick ? "20000" : "0"},
                                  "the corpus step runs posenc-text, built beside posenc");
  const int status = wait_for_process(kOp, pid, "posenc-text");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fail_runtime(kOp, "the corpus step (posenc-text corpus) failed; its message is above");
  }
}

// --slurm: the refusals and sbatch's path (empty without --slurm), before the corpus step.
fs::path check_slurm(const SuiteRunOptions& o) {
  if (!o.slurm) {
    require(!o.slurm_options_given, kOp, "--partition, --time and --sbatch-arg go with --slurm");
    return {};
  }
  require(o.jobs == 1, kOp, "--slurm runs each run as an array task: --jobs must be 1 with it, got ", o.jobs);
  require(o.only.empty(), kOp, "--slurm submits the whole suite: --only cannot go with it, got '", o.only, "'");
  validate_slurm_options(kOp, o.slurm_options);
  return find_sbatch(kOp);
}

// --slurm: submits the runs (plan order) not finished yet; false when there is none.
bool submit_to_slurm(const SuiteRunOptions& o, const std::vector<std::string>& names, const fs::path& sbatch,
                     SuiteRunOutcome& outcome) {
  SlurmArray array;
  for (const std::string& name : names) {
    if (!finished(o.dir, name)) array.runs.push_back(name);
  }
  if (array.runs.empty()) return false;
  array.suite = o.suite;
  array.dir = fs::absolute(o.dir);
  array.workdir = fs::current_path();  // the tasks read --out and --root as this process does
  array.command = o.job_args;
  array.command.front() = o.executable.string();
  array.report_command = o.report_args;
  array.report_command.front() = o.executable.string();
  array.report_command.push_back(array.dir.string());
  array.cpus_per_task = o.plan.threads;
  array.options = o.slurm_options;
  outcome.submission = submit_slurm_array(kOp, sbatch, array);
  outcome.submitted_runs = array.runs.size();
  outcome.end = SuiteRunOutcome::End::kSubmitted;
  return true;
}

// --jobs N: each run not finished in its own posenc process, N at a time.
void run_in_jobs(const SuiteRunOptions& o, const std::vector<std::string>& names, const SuiteRunEvents& events) {
  const auto start = std::chrono::steady_clock::now();
  std::map<pid_t, std::string> running;
  std::vector<std::string> failed;
  size_t next = 0;
  int64_t done = 0;
  while (next < names.size() || !running.empty()) {
    while (next < names.size() && static_cast<int64_t>(running.size()) < o.jobs) {
      const std::string& name = names[next++];
      if (finished(o.dir, name)) continue;  // reported by the runs after as done
      std::vector<std::string> args = o.job_args;
      args.insert(args.end(), {"--only", name});
      running[spawn_process(kOp, o.executable, std::move(args), "a job of the sweep")] = name;
    }
    if (running.empty()) break;
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      fail_runtime(kOp, "waiting for a job: ", std::strerror(errno));
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
    if (events.job_trained) events.job_trained(done, name, seconds_since(start));
  }
  if (!failed.empty()) {
    std::string list;
    for (const std::string& f : failed) list += (list.empty() ? "" : ", ") + f;
    fail_runtime(kOp, failed.size(), " of ", names.size(), " runs failed (", list,
                 "); their messages are above; the others are kept: run the same command again");
  }
}

// Trains (or reads back) every run here in plan order, reporting each step and each run.
void run_here(const Suite& suite, const fs::path& dir, const std::vector<std::string>& names,
              const SuiteRunEvents& events) {
  if (events.runs_begin) events.runs_begin();
  const auto start = std::chrono::steady_clock::now();
  int64_t steps_left = 0;
  for (const std::string& name : names) {
    if (!fs::exists(dir / "runs" / name / "result.json")) steps_left += suite.run_steps();
  }
  const int64_t total = static_cast<int64_t>(names.size());
  int64_t steps_done = 0, index = 0;
  for (const std::string& name : names) {
    ++index;
    RunProgress callbacks;
    callbacks.warning = events.warning;
    int64_t stage_base = 0, last_step = 0;  // steps of the run's finished stages
    std::string current;
    if (events.step) {
      callbacks.step = [&](const std::string& stage, const nn::TrainProgress& p) {
        if (stage != current) {
          stage_base += last_step;
          current = stage;
        }
        last_step = p.step;
        const double fraction = steps_left > 0 ? static_cast<double>(steps_done + stage_base + p.step) /
                                                     static_cast<double>(steps_left)
                                               : 1.0;
        events.step({index, total, name, stage, p, std::min(1.0, fraction)});
      };
    }
    const RunReport r = suite.run(name, dir, callbacks);
    if (!r.reused) steps_done += suite.run_steps();
    if (events.run_done) events.run_done({index, total, name, r, seconds_since(start)});
  }
}

}  // namespace

SuiteRunOutcome run_suite(const SuiteRunOptions& o, const SuiteRunEvents& events) {
  const int64_t cores = kernels::available_cores();
  const int64_t threads = o.plan.threads;
  // With --slurm the runs use the compute nodes' cores, not this host's.
  require(threads >= 1 && (o.slurm || threads <= cores), kOp, "threads must be in 1..", cores,
          " (the cores available to this process), got ", threads);
  require(o.jobs >= 1 && o.jobs * threads <= cores, kOp, "jobs x threads must be in 1..", cores,
          " (the cores available to this process), got ", o.jobs, " x ", threads);
  const std::unique_ptr<Suite> suite = make_suite(o.suite, o.plan);  // validates before anything is written
  const fs::path sbatch = check_slurm(o);
  const std::vector<std::string> names = suite->run_names();
  SuiteRunOutcome outcome;
  if (!o.only.empty()) {
    // A job of a --jobs sweep or a Slurm array: the parent made the corpus (and holds the suite's lock).
    require(std::find(names.begin(), names.end(), o.only) != names.end(), kOp,
            "--only names no run of this plan, got '", o.only, "'");
    suite->run(o.only, o.dir, {});
    return outcome;
  }
  require(!o.job_args.empty() && !o.report_args.empty(), kOp, "a sweep needs the jobs' and the report's argv");
  fs::create_directories(o.dir);
  const io::DirectoryLock lock(kOp, o.dir.string());
  claim_suite_dir(o.dir, suite->name());
  prepare_corpus(o.dir / "corpus", suite->corpus_sources(), o, events);
  if (o.slurm) {
    if (submit_to_slurm(o, names, sbatch, outcome)) return outcome;
    if (events.nothing_to_submit) events.nothing_to_submit(names.size());  // the summary, as below
  }
  if (o.jobs > 1) run_in_jobs(o, names, events);
  run_here(*suite, o.dir, names, events);
  outcome.table = summarize_suite(o.dir);
  outcome.end = SuiteRunOutcome::End::kSummarized;
  return outcome;
}

}  // namespace posenc::experiments
