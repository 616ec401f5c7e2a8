// `posenc analyze SOURCE [--tensor NAME] [--proximity dot|cosine] [--window W] [--json]
// [--max-memory SIZE] [--force]`: the indicators of Wang et al. (with the
// violation rate and the within-diagonal variance share), the monotone
// range and the translation residual of one table, as a readable summary or
// one JSON object; refused up front when its memory estimate exceeds the
// limit; progress on stderr when that is a terminal.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "posenc/analysis/proximity.h"
#include "source_options.h"

namespace posenc::cli {

class AnalyzeCommand {
 public:
  explicit AnalyzeCommand(CLI::App& parent);
  AnalyzeCommand(const AnalyzeCommand&) = delete;  // CLI11 holds pointers into the members
  AnalyzeCommand& operator=(const AnalyzeCommand&) = delete;

  bool selected() const { return app_->parsed(); }
  void run() const;

 private:
  CLI::App* app_;
  SourceOptions source_;
  std::string proximity_ = "dot";
  int64_t window_ = 0;
  CLI::Option* window_opt_ = nullptr;
  bool json_ = false;
  ResourceOptions resources_;
};

// "dot" | "cosine", else "[op] --proximity must be dot or cosine, got 'x'".
analysis::ProximityKind parse_proximity_option(const std::string& name, std::string_view op);

}  // namespace posenc::cli
