#include "slurm_submit.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <system_error>

#include "posenc/error.h"
#include "posenc/io/atomic_file.h"

extern char** environ;

namespace posenc::cli {
namespace {

namespace fs = std::filesystem;

// An executable named `name` in a PATH directory (an empty entry is the current directory).
fs::path find_on_path(std::string_view name) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return {};
  std::string_view rest = path;
  while (true) {
    const size_t colon = rest.find(':');
    const std::string_view entry = rest.substr(0, colon);
    const fs::path candidate = fs::path(entry.empty() ? "." : std::string(entry)) / name;
    std::error_code ec;
    if (fs::is_regular_file(candidate, ec) && ::access(candidate.c_str(), X_OK) == 0) return candidate;
    if (colon == std::string_view::npos) return {};
    rest.remove_prefix(colon + 1);
  }
}

struct Captured {
  int status = 0;  // waitpid's
  std::string out, err;
};

// Runs exe with args (stdin /dev/null) and collects its stdout and stderr,
// read together so that neither pipe can fill and stall it.
Captured run_captured(std::string_view op, const fs::path& exe, std::vector<std::string> args) {
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) fail_runtime(op, "cannot create a pipe: ", std::strerror(errno));
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    const int e = errno;
    ::close(out_pipe[0]), ::close(out_pipe[1]);
    fail_runtime(op, "cannot create a pipe: ", std::strerror(e));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);  // dup2 drops O_CLOEXEC on the copy
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = ::posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out_pipe[1]), ::close(err_pipe[1]);
  if (spawned != 0) {
    ::close(out_pipe[0]), ::close(err_pipe[0]);
    fail_runtime(op, exe.string(), ": cannot run (", std::strerror(spawned), ")");
  }
  Captured c;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&c.out, &c.err};
  int open = 2;
  while (open > 0) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;  // the child is still waited for below
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buffer[4096];
      const ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open;
      }
    }
  }
  for (const pollfd& f : fds) {
    if (f.fd >= 0) ::close(f.fd);
  }
  while (::waitpid(pid, &c.status, 0) < 0) {
    if (errno != EINTR) fail_runtime(op, "waiting for ", exe.filename().string(), ": ", std::strerror(errno));
  }
  return c;
}

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
  s += ")\nexec";
  for (const std::string& word : a.command) {
    s += ' ';
    s += shell_word(word);
  }
  s += " --only \"${runs[$SLURM_ARRAY_TASK_ID]}\"\n";
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
  s += "exec " + shell_word(a.command.front()) + " experiment report " + shell_word(a.dir.string()) + "\n";
  return s;
}

fs::path find_sbatch(std::string_view op) {
  fs::path sbatch = find_on_path("sbatch");
  if (sbatch.empty()) fail_runtime(op, "--slurm needs sbatch on PATH (Debian: apt-get install slurm-client), not found");
  return sbatch;
}

SlurmSubmission submit_slurm_array(std::string_view op, const fs::path& sbatch, const SlurmArray& a) {
  require(!a.runs.empty() && !a.command.empty(), op, "a Slurm array needs runs and a command");
  require_directive_value(op, "the suite directory", a.dir.string());
  require_directive_value(op, "the working directory", a.workdir.string());
  const fs::path slurm_dir = a.dir / "slurm";
  refuse_while_queued(op, slurm_dir / "job.json");
  std::error_code ec;
  fs::create_directories(slurm_dir, ec);  // Slurm does not create the --output directory
  if (ec) fail_runtime(op, slurm_dir.string(), ": cannot create the directory: ", ec.message());
  SlurmSubmission s;
  s.script = slurm_dir / "array.sh";
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

}  // namespace posenc::cli
