// SOURCE of `posenc analyze / plot / probe`: a kind with the `posenc table`
// options (table_options.h; sizes default to the classic figure) or a .npy /
// .safetensors file (--tensor NAME picks a tensor of a checkpoint).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <string_view>

#include "posenc/report/sources.h"
#include "table_options.h"

namespace posenc::cli {

class SourceOptions {
 public:
  SourceOptions() = default;
  SourceOptions(const SourceOptions&) = delete;  // CLI11 holds pointers into the members
  SourceOptions& operator=(const SourceOptions&) = delete;

  // SOURCE and --tensor, first in --help.
  void add_source(CLI::App& app);
  // The table options, after the command's own.
  void add_table(CLI::App& app);

  // The table to analyse; messages name `op`:
  //   "[op] SOURCE is required: a kind (posenc table --list) or a .npy / .safetensors file"
  //   "[op] --tensor applies only to a .npy or .safetensors SOURCE"
  //   "[op] --dim does not apply to a file source"
  // plus parse_source_kind's, the kernels' and the file readers' messages.
  report::TableSource load(std::string_view op) const;

  const std::string& source() const noexcept { return source_; }

 private:
  std::string source_;
  std::string tensor_;
  CLI::Option* tensor_opt_ = nullptr;
  TableOptions table_;
};

}  // namespace posenc::cli
