// `posenc report [--out DIR] [--quick] [--table FILE[:NAME]]... [--model RUN_DIR]...
// [--experiments DIR]... [--max-memory SIZE] [--force]`: the main job (docs/report.md). Progress on
// stderr, one summary line on stdout. A --table whose analysis would not fit
// in memory is refused before the report starts, as posenc analyze does.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "source_options.h"

namespace posenc::cli {

class ReportCommand {
 public:
  explicit ReportCommand(CLI::App& parent);
  ReportCommand(const ReportCommand&) = delete;  // CLI11 holds pointers into the members
  ReportCommand& operator=(const ReportCommand&) = delete;

  bool selected() const { return app_->parsed(); }
  void run() const;

 private:
  CLI::App* app_;
  std::string out_ = "out";
  bool quick_ = false;
  std::vector<std::string> tables_;
  std::vector<std::string> models_;
  std::vector<std::string> experiments_;  // suite directories with a summary.json
  uint64_t seed_ = 0;
  ResourceOptions resources_;
};

}  // namespace posenc::cli
