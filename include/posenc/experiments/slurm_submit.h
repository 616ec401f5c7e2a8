// `posenc experiment run SUITE --out DIR --slurm`: the runs not finished yet
// as one Slurm job array (task i runs runs[i], each the same
// `posenc experiment run ... --only NAME` process that --jobs starts), and a
// report job that waits for the array (afterany) and writes DIR/summary.json.
// Written under DIR/slurm: array.sh, report.sh, job.json; the tasks' output
// goes to DIR/slurm/%A_%a.out. Errors throw "[op] ..." (invalid_argument for
// a bad option, runtime_error for sbatch missing or failing).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace posenc::experiments {

struct SlurmOptions {
  std::string partition;           // --partition; empty: the cluster's default
  std::string time;                // --time; empty: the partition's default limit
  std::vector<std::string> extra;  // --sbatch-arg: one #SBATCH line each, e.g. "--mem=4G"
};

struct SlurmArray {
  std::string suite;
  std::filesystem::path dir;      // the suite directory, absolute
  std::filesystem::path workdir;  // the tasks' working directory: the submitter's, so relative paths in command hold
  std::vector<std::string> runs;  // run names in plan order
  std::vector<std::string> command;  // a task's argv without "--only NAME"; command[0]: posenc's absolute path
  std::vector<std::string> report_command;  // the report job's argv (posenc experiment report DIR), absolute too
  int64_t cpus_per_task = 1;
  SlurmOptions options;
};

// Refuses a partition, time or sbatch argument that cannot go into a script.
void validate_slurm_options(std::string_view op, const SlurmOptions& options);

// The scripts' text (pure: the tests read them back from DIR/slurm).
std::string slurm_array_script(const SlurmArray& array);
std::string slurm_report_script(const SlurmArray& array);

// sbatch's path from PATH, or "[op] --slurm needs sbatch on PATH (Debian: ...), not found".
std::filesystem::path find_sbatch(std::string_view op);

struct SlurmSubmission {
  std::string job_id;         // the array's
  std::string report_job_id;  // empty when the report job could not be submitted
  std::string report_error;   // then why (the array is submitted all the same)
  std::filesystem::path script;
  std::filesystem::path report_output;  // the report job's output file, DIR/slurm/report.out
};

// Writes the scripts, submits the array with `sbatch --parsable`, then the
// report job, and writes DIR/slurm/job.json. Refuses while an array recorded
// in job.json is still queued or running (squeue), which would train the same
// runs twice at once. "[op] sbatch failed (exit N): <its first stderr line>".
SlurmSubmission submit_slurm_array(std::string_view op, const std::filesystem::path& sbatch, const SlurmArray& array);

}  // namespace posenc::experiments
