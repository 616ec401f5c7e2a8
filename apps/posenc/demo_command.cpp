#include "demo_command.h"

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <system_error>

#include "kinds.h"
#include "posenc/analysis/summary.h"
#include "posenc/error.h"
#include "rope_table_command.h"
#include "tables.h"

namespace posenc::cli {
namespace {

// Demo sizes: a typical context and head width; bit encodings of 256
// positions need only 8 columns, so 16 keeps them readable.
constexpr int64_t kPositions = 256;
constexpr int64_t kDim = 64;
constexpr int64_t kBitDim = 16;

bool is_bit_kind(kernels::AbsoluteKind kind) {
  using enum kernels::AbsoluteKind;
  return kind == kBinary || kind == kSignedBinary || kind == kSineBinary;
}

Table demo_table(const TableKind& kind) {
  if (kind.family == TableFamily::kAbsolute) {
    kernels::AbsoluteParams params;
    params.kind = kind.absolute;
    params.dim = is_bit_kind(kind.absolute) ? kBitDim : kDim;
    return make_absolute_table(kind.name, params, kernels::Positions::range(0, kPositions));
  }
  if (kind.family == TableFamily::kRope) {
    return make_rope_table(kind.name, kDim, 10000.0, {}, std::nullopt, kernels::Precision::kExact, 0, kPositions);
  }
  kernels::SinusoidalGridParams params;
  const bool three_d = kind.family == TableFamily::kGrid3d;
  if (three_d) {
    params.frames = 4, params.height = 8, params.width = 8, params.dim = 96;
  } else {
    params.height = 16, params.width = 16, params.dim = 64;
  }
  return make_grid_table(kind.name, three_d, params);
}

constexpr const char* kRowFormat = "%-14s %-11s %9s %9s %9s %9s %9s %9s  %s\n";

void print_row(const char* kind, const char* shape, const char* min, const char* max, const char* mean_abs,
               const char* self, const char* next, const char* first, const char* file) {
  std::printf(kRowFormat, kind, shape, min, max, mean_abs, self, next, first, file);
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

}  // namespace

DemoCommand::DemoCommand(CLI::App& parent) {
  app_ = parent.add_subcommand("demo", "Write a table of every kind to DIR/<kind>.npy and summarize each");
  app_->add_option("--out", out_dir_, "Output directory")->capture_default_str();
}

void DemoCommand::run() const {
  std::error_code error;
  std::filesystem::create_directories(out_dir_, error);
  if (error) fail_runtime("demo", "cannot create directory '", out_dir_, "': ", error.message());

  std::cout << "posenc demo: one float32 table per kind in " << out_dir_ << "/\n"
            << "dot products: self = mean PE[p].PE[p], next = mean PE[p].PE[p+1], first = PE[0].PE[1]\n\n";
  std::cout.flush();
  print_row("kind", "shape", "min", "max", "mean|x|", "self", "next", "first", "file");
  for (const TableKind& kind : table_kinds()) {
    const Table table = demo_table(kind);
    const std::string path = (std::filesystem::path(out_dir_) / (std::string(kind.name) + ".npy")).string();
    write_table(table, path);
    const analysis::TableSummary s = analysis::summarize_table<float>(table.values, table.rows, table.cols);
    const std::string shape = "[" + std::to_string(s.rows) + ", " + std::to_string(s.cols) + "]";
    print_row(std::string(kind.name).c_str(), shape.c_str(), number(s.min).c_str(), number(s.max).c_str(),
              number(s.mean_abs).c_str(), number(s.self_dot_mean).c_str(), number(s.neighbour_dot_mean).c_str(),
              number(s.neighbour_dot_first).c_str(), path.c_str());
  }
  std::fflush(stdout);
}

}  // namespace posenc::cli
