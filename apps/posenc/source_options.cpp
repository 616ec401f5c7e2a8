#include "source_options.h"

#include <unistd.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "posenc/error.h"

namespace posenc::cli {

void SourceOptions::add_source(CLI::App& app) {
  app.add_option("SOURCE", source_, "A kind (posenc table --list), or a .npy / .safetensors file");
  tensor_opt_ = app.add_option("--tensor", tensor_,
                               "Tensor of a .safetensors file, e.g. bert.embeddings.position_embeddings.weight "
                               "(default: the only one, or the one named like a position table)");
}

void SourceOptions::add_table(CLI::App& app) {
  table_.add_shared(app);
  table_.add_rope(app);
}

report::TableSource SourceOptions::load(std::string_view op) const {
  if (source_.empty()) {
    fail_argument(op, "SOURCE is required: a kind (posenc table --list) or a .npy / .safetensors file");
  }
  if (report::is_file_source(source_)) {
    table_.refuse_all(op, "a file source");
    const std::optional<std::string> tensor =
        tensor_opt_->count() > 0 ? std::optional<std::string>(tensor_) : std::nullopt;
    return report::file_source(op, source_, tensor);
  }
  const TableKind kind = parse_source_kind(source_, op);
  if (tensor_opt_->count() > 0) fail_argument(op, "--tensor applies only to a .npy or .safetensors SOURCE");
  return table_.analysis_source(kind, op);
}

void ResourceOptions::add(CLI::App& app) {
  max_memory_opt_ = app.add_option("--max-memory", max_memory_,
                                   "Refuse work estimated to need more memory than this, e.g. 16G (default: the "
                                   "memory available now, MemAvailable)");
  app.add_flag("--force", force_, "Run even when an estimate (memory, time) exceeds its limit");
}

void ResourceOptions::add_time_bound(CLI::App& app, double default_seconds) {
  default_max_seconds_ = default_seconds;
  max_time_opt_ = app.add_option("--max-time", max_time_,
                                 "Refuse work estimated to take longer than this, e.g. 20m or 2h (default: " +
                                     duration_text(default_seconds) + ")");
}

void ResourceOptions::check(std::string_view op, double bytes, double multiply_adds, std::string_view what,
                            double rate) const {
  const bool given = max_memory_opt_ != nullptr && max_memory_opt_->count() > 0;
  const double limit = given ? parse_memory_size(max_memory_, op) : available_memory();
  const double seconds = multiply_adds / rate;
  if (default_max_seconds_ > 0 && !force_) {
    const bool time_given = max_time_opt_ != nullptr && max_time_opt_->count() > 0;
    const double max_seconds = time_given ? parse_duration(max_time_, op) : default_max_seconds_;
    if (seconds > max_seconds) {
      // The bound to pass: the estimate rounded up to whole minutes (hours above 10 hours).
      const double minutes = std::ceil(seconds / 60);
      const std::string allow = minutes > 600 ? std::to_string(static_cast<long long>(std::ceil(minutes / 60))) + "h"
                                              : std::to_string(static_cast<long long>(minutes)) + "m";
      char work[64];
      std::snprintf(work, sizeof work, "%.1e multiply-adds at an assumed %.0e per second", multiply_adds,
                    rate);
      fail_runtime(op, "this needs about ", duration_text(seconds), " (", work, ") and about ", memory_text(bytes),
                   " of memory (", what, "); the time limit is ", duration_text(max_seconds),
                   time_given ? " (--max-time)" : "", ": pass --max-time ", allow, " to allow it, or --force");
    }
  }
  if (force_ || limit <= 0 || bytes <= limit) return;
  // The size to pass: the estimate rounded up to whole GiB (MiB below 1 GiB).
  const double gib = 1024.0 * 1024.0 * 1024.0;
  const std::string allow = bytes >= gib ? std::to_string(static_cast<long long>(std::ceil(bytes / gib))) + "G"
                                         : std::to_string(static_cast<long long>(std::ceil(bytes / (gib / 1024)))) + "M";
  fail_runtime(op, "this needs about ", memory_text(bytes), " of memory (", what, ") and about ",
               duration_text(seconds), "; ", memory_text(limit), " is ",
               given ? "allowed by --max-memory" : "available", ": pass --max-memory ", allow,
               " to allow it, or --force");
}

namespace {

// "12.5", "16G", "90s": a number > 0 times the unit of an optional one-letter
// suffix (unit_of gives 0 for a letter it does not know), finite; nullopt
// when malformed.
std::optional<double> parse_scaled(const std::string& text, double (*unit_of)(char)) {
  if (text.empty() || std::isdigit(static_cast<unsigned char>(text[0])) == 0) return std::nullopt;
  double value = 0;
  std::size_t used = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  double unit = 1;
  if (used + 1 == text.size()) {
    unit = unit_of(text.back());
  } else if (used != text.size()) {
    return std::nullopt;
  }
  const double scaled = value * unit;  // finite: 1e308T would be infinite
  if (unit <= 0 || value <= 0 || !std::isfinite(scaled)) return std::nullopt;
  return scaled;
}

double memory_unit(char suffix) {
  const std::string units = "KMGT";
  const std::size_t at = units.find(static_cast<char>(std::toupper(static_cast<unsigned char>(suffix))));
  return at == std::string::npos ? 0 : std::pow(1024.0, static_cast<double>(at + 1));
}

double duration_unit(char suffix) { return suffix == 's' ? 1 : suffix == 'm' ? 60 : suffix == 'h' ? 3600 : 0; }

}  // namespace

double parse_memory_size(const std::string& text, std::string_view op) {
  const std::optional<double> bytes = parse_scaled(text, memory_unit);
  if (!bytes) fail_argument(op, "--max-memory must be a size such as 16G, 512M or 1000000 (bytes), got '", text, "'");
  return *bytes;
}

double parse_duration(const std::string& text, std::string_view op) {
  const std::optional<double> seconds = parse_scaled(text, duration_unit);
  if (!seconds) fail_argument(op, "--max-time must be a duration such as 90s, 20m or 2h, got '", text, "'");
  return *seconds;
}

std::string memory_text(double bytes) {
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return std::to_string(static_cast<long long>(bytes)) + " bytes";
  double v = bytes / 1024;
  int u = 0;
  while (v >= 1024 && u < 3) v /= 1024, ++u;
  char text[32];
  std::snprintf(text, sizeof text, "%.1f %s", v, units[u]);
  return text;
}

std::string duration_text(double seconds) {
  char text[48];
  if (seconds < 60) {
    std::snprintf(text, sizeof text, "%.1f s", seconds);
  } else if (seconds < 3600) {
    const auto s = static_cast<long long>(std::lround(seconds));
    std::snprintf(text, sizeof text, "%lld min %lld s", s / 60, s % 60);
  } else {
    const auto m = static_cast<long long>(std::lround(seconds / 60));
    std::snprintf(text, sizeof text, "%lld h %lld min", m / 60, m % 60);
  }
  return text;
}

double available_memory() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  double kib = 0;
  std::string unit;
  while (meminfo >> key >> kib) {
    std::getline(meminfo, unit);
    if (key == "MemAvailable:") return kib * 1024.0;
  }
  const long pages = sysconf(_SC_AVPHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0.0;
}

ProgressLine::ProgressLine(std::string_view op)
    : op_(op), active_(isatty(STDERR_FILENO) == 1), start_(std::chrono::steady_clock::now()) {}

void ProgressLine::update(std::string_view step, double done) {
  if (!active_) return;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::ostringstream line;
  line << '[' << op_ << "] " << step << ": " << static_cast<int>(std::floor(100.0 * done)) << '%';
  // The ETA extrapolates the time so far over the estimated work, once there is some to go on.
  if (done > 0.01 && elapsed > 1.0) line << ", about " << duration_text(elapsed * (1.0 - done) / done) << " left";
  std::string text = line.str();
  if (text.size() < 79) text.resize(79, ' ');  // covers a longer previous line
  std::cerr << '\r' << text << std::flush;
  drawn_ = true;
}

void ProgressLine::finish() {
  if (drawn_) std::cerr << '\r' << std::string(79, ' ') << '\r' << std::flush;
  drawn_ = false;
}

}  // namespace posenc::cli
