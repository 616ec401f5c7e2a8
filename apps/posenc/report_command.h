// `posenc report [--out DIR] [--quick] [--table FILE[:NAME]]... [--model RUN_DIR]...`:
// the main job (docs/report.md). Progress on stderr, one summary line on stdout.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

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
  uint64_t seed_ = 0;
};

}  // namespace posenc::cli
