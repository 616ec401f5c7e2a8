// SOURCE of `posenc analyze / plot / probe`: a kind with the `posenc table`
// options (table_options.h; sizes default to the classic figure) or a .npy /
// .safetensors file (--tensor NAME picks a tensor of a checkpoint).
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <string>
#include <string_view>

#include "posenc/report/sources.h"
#include "table_options.h"

namespace posenc::cli {

class SourceOptions {
 public:
  SourceOptions() = default;
  SourceOptions(const SourceOptions&) = delete;  // CLI11 holds pointers into the members
  SourceOptions& operator=(const SourceOptions&) = delete;

  // SOURCE and --tensor, first in --help.
  void add_source(CLI::App& app);
  // The table options, after the command's own.
  void add_table(CLI::App& app);

  // The table to analyse; messages name `op`:
  //   "[op] SOURCE is required: a kind (posenc table --list) or a .npy / .safetensors file"
  //   "[op] --tensor applies only to a .npy or .safetensors SOURCE"
  //   "[op] --dim does not apply to a file source"
  // plus parse_source_kind's, the kernels' and the file readers' messages.
  report::TableSource load(std::string_view op) const;

  const std::string& source() const noexcept { return source_; }

 private:
  std::string source_;
  std::string tensor_;
  CLI::Option* tensor_opt_ = nullptr;
  TableOptions table_;
};

// Estimated multiply-adds per second assumed by the time estimates: posenc analyze ran at
// 2.2-2.7e10 of them on the 2-core development machine under load (docs/analysis.md).
constexpr double kAssumedRate = 1e10;
// The model's multiply-adds per second (GEMMs and the fused attention) assumed by
// `posenc eval`'s estimate: a third of what the training step reaches on 2 cores.
constexpr double kModelRate = 3e10;

// --max-memory SIZE and --force of `posenc analyze` and `posenc plot`: work
// whose memory grows with positions^2 is estimated before it starts and
// refused, in one line naming the estimate and these options, when it would
// not fit in the limit (default: MemAvailable of /proc/meminfo).
class ResourceOptions {
 public:
  void add(CLI::App& app);
  // Also --max-time DURATION ("90s", "20m", "2h", seconds): work estimated to
  // take longer is refused too, in one line naming both estimates.
  void add_time_bound(CLI::App& app, double default_seconds);
  // bytes and multiply_adds: the estimate; what: its largest part, e.g.
  // "S alone: 8.0 GiB for 32768 positions". Throws
  //   "[analyze] this needs about 9.0 GiB of memory (S alone: 8.0 GiB for 32768 positions) and about 1 min 45 s;
  //    7.9 GiB is available: pass --max-memory 10G to allow it, or --force"   (one line)
  // rate: the multiply-adds per second the time estimate assumes.
  void check(std::string_view op, double bytes, double multiply_adds, std::string_view what,
             double rate = kAssumedRate) const;

 private:
  std::string max_memory_;
  CLI::Option* max_memory_opt_ = nullptr;
  std::string max_time_;
  CLI::Option* max_time_opt_ = nullptr;
  double default_max_seconds_ = 0;  // 0: no time bound
  bool force_ = false;
};

// "90s", "20m", "1.5h", "600" (seconds), else
// "[op] --max-time must be a duration such as 90s, 20m or 2h, got 'x'".
double parse_duration(const std::string& text, std::string_view op);

// "16G", "1.5G", "512M", "64K", "1000" (bytes; K, M, G, T are powers of 1024),
// else "[op] --max-memory must be a size such as 16G, 512M or 1000000 (bytes), got 'x'".
double parse_memory_size(const std::string& text, std::string_view op);
// "8.0 GiB", "512.0 MiB", "12.0 KiB", "100 bytes".
std::string memory_text(double bytes);
// "1.2 s", "3 min 20 s", "2 h 5 min".
std::string duration_text(double seconds);
// The memory a new process can use now: MemAvailable of /proc/meminfo, else
// sysconf's available pages; 0 when neither is known.
double available_memory();

// Progress of one long command on stderr, only when stderr is a terminal:
// "[analyze] translation delta 64 (7 of 12): 45%, about 1 min 20 s left",
// rewritten in place; finish() ends the line.
class ProgressLine {
 public:
  explicit ProgressLine(std::string_view op);
  ~ProgressLine() { finish(); }
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;
  bool active() const noexcept { return active_; }
  void update(std::string_view step, double done);
  void finish();

 private:
  std::string op_;
  bool active_ = false;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace posenc::cli
