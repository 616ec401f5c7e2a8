// `posenc encodings [--json]`: every encoding name of the registry with its
// point, description and parameters with their defaults.
#pragma once

#include <CLI/CLI.hpp>

namespace posenc::cli {

class EncodingsCommand {
 public:
  explicit EncodingsCommand(CLI::App& parent);
  EncodingsCommand(const EncodingsCommand&) = delete;  // CLI11 holds a pointer to json_
  EncodingsCommand& operator=(const EncodingsCommand&) = delete;

  bool selected() const { return app_->parsed(); }
  void run() const;

 private:
  CLI::App* app_;
  bool json_ = false;
};

}  // namespace posenc::cli
