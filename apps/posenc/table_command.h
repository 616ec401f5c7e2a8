// `posenc table KIND ...`: one position table to a .npy or .csv file, and
// `posenc table --list`.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "table_options.h"

namespace posenc::cli {

class TableCommand {
 public:
  explicit TableCommand(CLI::App& parent);     // registers the subcommand
  TableCommand(const TableCommand&) = delete;  // CLI11 holds pointers into the members
  TableCommand& operator=(const TableCommand&) = delete;

  bool selected() const { return app_->parsed(); }
  void run() const;

 private:
  CLI::App* app_;
  std::string kind_;
  bool list_ = false;
  std::string out_;
  TableOptions table_;
};

}  // namespace posenc::cli
