// `posenc table KIND ...`: one position table to a .npy or .csv file, and
// `posenc table --list`.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "kinds.h"
#include "rope_table_command.h"
#include "tables.h"

namespace posenc::cli {

class TableCommand {
 public:
  explicit TableCommand(CLI::App& parent);     // registers the subcommand
  TableCommand(const TableCommand&) = delete;  // CLI11 holds pointers into options_
  TableCommand& operator=(const TableCommand&) = delete;

  bool selected() const { return app_->parsed(); }
  void run() const;

 private:
  struct Options {
    std::string kind;
    bool list = false;
    int64_t positions = 0;
    int64_t start = 0;
    int64_t length = 0;
    int64_t frames = 1;
    int64_t height = 0;
    int64_t width = 0;
    int64_t dim = 0;
    double base = 0.0;
    double scale = 0.0;
    std::string layout;
    std::string precision;
    bool normalize = false;
    double normalize_scale = 0.0;
    std::string out;
  };

  Table absolute_table(const TableKind& kind) const;
  Table grid_table(const TableKind& kind) const;
  Table rope_table(const TableKind& kind) const;
  // "[table] --x is required for kind 'k'" / "[table] --x does not apply to kind 'k'".
  void require_given(std::string_view kind, std::initializer_list<const CLI::Option*> options) const;
  void refuse_given(std::string_view kind, std::initializer_list<const CLI::Option*> options) const;

  CLI::App* app_;
  Options options_;
  CLI::Option* positions_;
  CLI::Option* start_;
  CLI::Option* length_;
  CLI::Option* frames_;
  CLI::Option* height_;
  CLI::Option* width_;
  CLI::Option* dim_;
  CLI::Option* normalize_;
  CLI::Option* normalize_scale_;
  RopeTableOptions rope_;  // registered last: its options follow the shared ones in --help
};

}  // namespace posenc::cli
