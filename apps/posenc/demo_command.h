// `posenc demo [--out DIR]`: one table per kind in DIR with a summary line
// each (shape, value range, neighbour vs self dot products). `make demo` runs it.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace posenc::cli {

class DemoCommand {
 public:
  explicit DemoCommand(CLI::App& parent);
  DemoCommand(const DemoCommand&) = delete;  // CLI11 holds a pointer to out_dir_
  DemoCommand& operator=(const DemoCommand&) = delete;

  bool selected() const { return app_->parsed(); }
  void run() const;

 private:
  CLI::App* app_;
  std::string out_dir_ = "out";
};

}  // namespace posenc::cli
