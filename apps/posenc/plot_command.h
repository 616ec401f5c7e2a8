// `posenc plot SOURCE --figure encoding|similarity|decay [--reference P]
// [--proximity dot|cosine] --out FILE.png`: one picture of one table
// (report/pictures.h): the table as a heatmap, its proximity matrix, or
// proximity against position for the reference position P (default N/2).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "source_options.h"

namespace posenc::cli {

class PlotCommand {
 public:
  explicit PlotCommand(CLI::App& parent);
  PlotCommand(const PlotCommand&) = delete;  // CLI11 holds pointers into the members
  PlotCommand& operator=(const PlotCommand&) = delete;

  bool selected() const { return app_->parsed(); }
  void run() const;

 private:
  CLI::App* app_;
  SourceOptions source_;
  std::string figure_;
  int64_t reference_ = 0;
  CLI::Option* reference_opt_ = nullptr;
  std::string proximity_ = "dot";
  CLI::Option* proximity_opt_ = nullptr;
  std::string out_;
  ResourceOptions resources_;
};

}  // namespace posenc::cli
