// `posenc eval --checkpoint DIR [--lengths 64,128,256] [--batches 8] [--json]`:
// loss and accuracy of a trained model at several sequence lengths (length
// extrapolation). A length that cannot be evaluated (a learned table too
// short, say) is reported in its row and on stderr; the others still run, and
// the exit status is then 1.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace posenc::cli {

class EvalCommand {
 public:
  explicit EvalCommand(CLI::App& parent);
  EvalCommand(const EvalCommand&) = delete;  // CLI11 holds pointers into the options
  EvalCommand& operator=(const EvalCommand&) = delete;

  bool selected() const { return app_->parsed(); }
  int run() const;

 private:
  CLI::App* app_;
  std::string checkpoint_;
  std::vector<int64_t> lengths_;
  int64_t batches_ = 8;
  bool json_ = false;
};

}  // namespace posenc::cli
