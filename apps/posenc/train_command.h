// `posenc train --task TASK --encoding NAME --out DIR [...]`: trains a small
// model (posenc::nn::train) with a progress bar on a terminal (plain periodic
// lines otherwise) on stderr and a summary line on stdout. `--resume`
// continues from DIR's newest valid checkpoint.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "posenc/training/trainer.h"

namespace posenc::cli {

class TrainCommand {
 public:
  explicit TrainCommand(CLI::App& parent);
  TrainCommand(const TrainCommand&) = delete;  // CLI11 holds pointers into config_
  TrainCommand& operator=(const TrainCommand&) = delete;

  bool selected() const { return app_->parsed(); }
  int run() const;

 private:
  CLI::App* app_;
  CLI::Option* lookback_ = nullptr;
  CLI::Option* max_span_ = nullptr;
  CLI::Option* data_ = nullptr;
  CLI::Option* eval_split_ = nullptr;
  CLI::Option* vocab_size_ = nullptr;
  nn::TrainConfig config_;
  std::vector<std::string> settings_;  // --encoding-setting key=value
  std::string out_;
  bool resume_ = false;
};

}  // namespace posenc::cli
