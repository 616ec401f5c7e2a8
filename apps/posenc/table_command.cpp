#include "table_command.h"

#include <algorithm>
#include <iostream>

#include "posenc/error.h"

namespace posenc::cli {
namespace {

void print_kind_list(std::ostream& os) {
  const std::vector<TableKind> kinds = table_kinds();
  size_t width = 0;
  for (const TableKind& k : kinds) width = std::max(width, k.name.size());
  for (const TableKind& k : kinds) {
    os << k.name << std::string(width + 2 - k.name.size(), ' ') << k.summary << '\n';
  }
}

}  // namespace

TableCommand::TableCommand(CLI::App& parent) {
  app_ = parent.add_subcommand("table", "Write one position table [rows, dim] as float32 .npy (or .csv)");
  app_->footer(
      "Kinds: posenc table --list. 1D kinds take --positions and --dim; sinusoidal-2d takes --height, --width, "
      "--dim; sinusoidal-3d also --frames; rope takes --positions, --dim and the RoPE scaling options.");
  app_->add_option("KIND", kind_, "Table kind, e.g. sinusoidal, binary, sinusoidal-2d");
  app_->add_flag("--list", list_, "List the kinds with their formulas");
  table_.add_shared(*app_);
  app_->add_option("--out", out_, "Output file, .npy or .csv (default KIND.npy)");
  table_.add_rope(*app_);  // last: its options follow the shared ones in --help
}

void TableCommand::run() const {
  if (list_) {
    print_kind_list(std::cout);
    return;
  }
  if (kind_.empty()) fail_argument("table", "KIND is required (posenc table --list shows them)");
  const TableKind kind = parse_table_kind(kind_);
  const std::string out = out_.empty() ? kind_ + ".npy" : out_;
  table_format(out);  // refuse a bad file name before computing
  const Table table = table_.float_table(kind);
  write_table(table, out);
  std::cout << "wrote " << out << ": " << kind.name << " table [" << table.rows << ", " << table.cols << "] float32\n";
}

}  // namespace posenc::cli
