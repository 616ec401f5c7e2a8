#include "posenc/experiments/slurm_submit.h"

#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <ctime>
#include <system_error>

#include "child_processes.h"
#include "posenc/error.h"
#include "posenc/io/atomic_file.h"

namespace posenc::experiments {
namespace {

namespace fs = std::filesystem;

std::string first_line(const std::string& text) {
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(begin, end - begin);
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    if (!line.empty()) return line;
    begin = end + 1;
  }
  return "";
}

// `sbatch --parsable` prints "ID" or "ID;CLUSTER".
std::string submit(std::string_view op, const fs::path& sbatch, std::vector<std::string> args) {
  args.insert(args.begin(), {"sbatch", "--parsable"});
  const Captured c = run_captured(op, sbatch, std::move(args));
  if (!WIFEXITED(c.status) || WEXITSTATUS(c.status) != 0) {
    const std::string why = first_line(c.err);
    const std::string how = WIFEXITED(c.status) ? "exit " + std::to_string(WEXITSTATUS(c.status))
                                                : "signal " + std::to_string(WTERMSIG(c.status));
    fail_runtime(op, "sbatch failed (", how, "): ", why.empty() ? "no message on stderr" : why);
  }
  const std::string line = first_line(c.out);
  const std::string id = line.substr(0, line.find(';'));
  if (id.empty() || !std::all_of(id.begin(), id.end(), [](unsigned char ch) { return std::isdigit(ch); })) {
    fail_runtime(op, "sbatch --parsable printed no job id, got '", line, "'");
  }
  return id;
}

// One word of a bash command line: bare when it cannot be misread, else single-quoted.
std::string shell_word(std::string_view word) {
  const bool plain = !word.empty() && std::all_of(word.begin(), word.end(), [](unsigned char ch) {
    return std::isalnum(ch) || std::strchr("_-./:=,+@%", ch) != nullptr;
  });
  if (plain) return std::string(word);
  std::string quoted = "'";
  for (const char ch : word) quoted += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return quoted + "'";
}

// " w1 w2 ...": each word after a blank, as shell_word writes it.
std::string shell_words(const std::vector<std::string>& words) {
  std::string s;
  for (const std::string& word : words) {
    s += ' ';
    s += shell_word(word);
  }
  return s;
}

// An #SBATCH line; sbatch splits its arguments at blanks outside double quotes.
std::string directive(std::string_view option) {
  const bool blank = std::any_of(option.begin(), option.end(), [](unsigned char ch) { return std::isspace(ch); });
  return "#SBATCH " + (blank ? "\"" + std::string(option) + "\"" : std::string(option)) + "\n";
}

// A value that would end or unbalance an #SBATCH line.
void require_directive_value(std::string_view op, std::string_view what, std::string_view value) {
  require(value.find_first_of("\"\n\r") == std::string_view::npos, op, what,
          " cannot go into an sbatch script (a double quote or a line break), got '", value, "'");
}

// The directives both scripts share: where, how long, and the user's own.
std::string common_directives(const SlurmArray& a) {
  std::string s = directive("--cpus-per-task=" + std::to_string(a.cpus_per_task));
  s += directive("--chdir=" + a.workdir.string());
  if (!a.options.partition.empty()) s += directive("--partition=" + a.options.partition);
  if (!a.options.time.empty()) s += directive("--time=" + a.options.time);
  for (const std::string& e : a.options.extra) s += directive(e);
  return s;
}

std::string iso_time_now() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

// An array recorded by an earlier --slurm that squeue still lists: its tasks
// would train the same runs as a new one. Without squeue, or with a job.json
// that is not ours, there is nothing to check.
void refuse_while_queued(std::string_view op, const fs::path& job_json) {
  std::error_code ec;
  if (!fs::exists(job_json, ec)) return;
  const fs::path squeue = find_on_path("squeue");
  if (squeue.empty()) return;
  const nlohmann::json job = nlohmann::json::parse(io::read_regular_file(op, job_json.string()), nullptr, false);
  if (!job.is_object() || !job.contains("job_id") || !job["job_id"].is_string()) return;
  const std::string id = job["job_id"].get<std::string>();
  const Captured c = run_captured(op, squeue, {"squeue", "--noheader", "--jobs", id, "--format", "%i"});
  if (WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0 && !first_line(c.out).empty()) {
    fail_runtime(op, job_json.string(), ": Slurm job array ", id,
                 " is still queued or running (squeue): wait for it or scancel it, then submit again");
  }
}

}  // namespace

void validate_slurm_options(std::string_view op, const SlurmOptions& o) {
  const auto blank = [](unsigned char ch) { return std::isspace(ch) || ch == '"'; };
  require(std::none_of(o.partition.begin(), o.partition.end(), blank), op,
          "--partition must be a Slurm partition name, got '", o.partition, "'");
  // Slurm's forms: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS.
  const bool time_ok = o.time.empty() || (std::isdigit(static_cast<unsigned char>(o.time.front())) &&
                                          std::isdigit(static_cast<unsigned char>(o.time.back())) &&
                                          std::all_of(o.time.begin(), o.time.end(), [](unsigned char ch) {
                                            return std::isdigit(ch) || ch == ':' || ch == '-';
                                          }));
  require(time_ok, op, "--time must be a Slurm time limit such as 04:00:00, 90 (minutes) or 1-12:00:00, got '",
          o.time, "'");
  for (const std::string& e : o.extra) {
    require(e.starts_with("-"), op, "--sbatch-arg must be one sbatch option such as --sbatch-arg=--mem=4G, got '", e,
            "'");
    require(!e.starts_with("--array") && !e.starts_with("-a"), op,
            "--sbatch-arg cannot set --array: posenc sets it to the runs not finished yet, got '", e, "'");
    require_directive_value(op, "--sbatch-arg", e);
  }
}

std::string slurm_array_script(const SlurmArray& a) {
  std::string s = "#!/bin/bash\n";
  s += "# posenc experiment run " + a.suite + " --slurm: one array task per run not finished at submission;\n";
  s += "# task i runs runs[i], the process `posenc experiment run --jobs N` would start for it.\n";
  s += directive("--job-name=posenc-" + a.suite);
  s += directive("--array=0-" + std::to_string(a.runs.size() - 1));
  s += directive("--output=" + (a.dir / "slurm" / "%A_%a.out").string());
  s += common_directives(a);
  s += "set -euo pipefail\n";
  s += "runs=(";
  for (size_t i = 0; i < a.runs.size(); ++i) {
    if (i > 0) s += ' ';
    s += shell_word(a.runs[i]);
  }
  s += ")\nexec" + shell_words(a.command) + " --only \"${runs[$SLURM_ARRAY_TASK_ID]}\"\n";
  return s;
}

std::string slurm_report_script(const SlurmArray& a) {
  std::string s = "#!/bin/bash\n";
  s += "# posenc experiment run " + a.suite + " --slurm: the summary once the array has ended\n";
  s += "# (submitted with --dependency=afterany:ARRAY; runs that failed are left out of it).\n";
  s += directive("--job-name=posenc-" + a.suite + "-report");
  s += directive("--output=" + (a.dir / "slurm" / "report.out").string());
  s += common_directives(a);
  s += "set -euo pipefail\n";
  s += "exec" + shell_words(a.report_command) + "\n";
  return s;
}

fs::path find_sbatch(std::string_view op) {
  fs::path sbatch = find_on_path("sbatch");
  if (sbatch.empty()) fail_runtime(op, "--slurm needs sbatch on PATH (Debian: apt-get install slurm-client), not found");
  return sbatch;
}

SlurmSubmission submit_slurm_array(std::string_view op, const fs::path& sbatch, const SlurmArray& a) {
  require(!a.runs.empty() && !a.command.empty() && !a.report_command.empty(), op,
          "a Slurm array needs runs, a command and a report command");
  require_directive_value(op, "the suite directory", a.dir.string());
  require_directive_value(op, "the working directory", a.workdir.string());
  const fs::path slurm_dir = a.dir / "slurm";
  refuse_while_queued(op, slurm_dir / "job.json");
  std::error_code ec;
  fs::create_directories(slurm_dir, ec);  // Slurm does not create the --output directory
  if (ec) fail_runtime(op, slurm_dir.string(), ": cannot create the directory: ", ec.message());
  SlurmSubmission s;
  s.script = slurm_dir / "array.sh";
  s.report_output = slurm_dir / "report.out";
  const fs::path report_script = slurm_dir / "report.sh";
  io::write_file_atomically(op, s.script.string(), slurm_array_script(a));
  io::write_file_atomically(op, report_script.string(), slurm_report_script(a));
  s.job_id = submit(op, sbatch, {s.script.string()});
  // The array runs whatever happens next: a report job that fails to go in is a warning, not an error.
  try {
    s.report_job_id = submit(op, sbatch, {"--dependency=afterany:" + s.job_id, report_script.string()});
  } catch (const std::runtime_error& e) {
    s.report_error = e.what();
  }
  nlohmann::ordered_json j;
  j["job_id"] = s.job_id;
  j["runs"] = a.runs;
  j["submitted"] = iso_time_now();
  j["script"] = s.script.string();
  j["report_job_id"] = s.report_job_id.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(s.report_job_id);
  j["report_script"] = report_script.string();
  io::write_file_atomically(op, (slurm_dir / "job.json").string(), j.dump(2) + "\n");
  return s;
}

}  // namespace posenc::experiments
