// The options that describe one table of a kind (--positions, --dim, --base,
// ..., the grid sizes and the RoPE scalings), shared by `posenc table`
// (float32 table, every size required) and `posenc analyze / plot / probe`
// (float64 table, sizes defaulting to the classic figure: 256 positions,
// dim 128; bit kinds ceil(log2 N) columns; sinusoidal-2d 16 x 16;
// sinusoidal-3d 4 x 8 x 8 with dim 126). An option the kind does not read
// (TableKind::options) is refused, never ignored.
#pragma once

#include <CLI/CLI.hpp>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "kinds.h"
#include "posenc/report/sources.h"
#include "rope_table_command.h"
#include "tables.h"

namespace posenc::cli {

class TableOptions {
 public:
  TableOptions();
  TableOptions(const TableOptions&) = delete;  // CLI11 holds pointers into the members
  TableOptions& operator=(const TableOptions&) = delete;

  // Registers --positions .. --normalize-scale (the caller adds its own
  // options after them, then add_rope()).
  void add_shared(CLI::App& app);
  // Registers the RoPE scaling group (last, so it follows in --help).
  void add_rope(CLI::App& app) { rope_.add_to(app); }

  // `posenc table`: the float32 table; messages name "table". Also refuses a
  // --scale whose values would overflow float32.
  Table float_table(const TableKind& kind) const;
  // analyze / plot / probe: the float64 table; messages name `op`.
  report::TableSource analysis_source(const TableKind& kind, std::string_view op) const;
  // For a file SOURCE: "[op] --dim does not apply to a file source" for the first option given.
  void refuse_all(std::string_view op, std::string_view what) const;

 private:
  struct Values {
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
  };

  kernels::AbsoluteParams absolute_params(const TableKind& kind) const;
  kernels::SinusoidalGridParams grid_params(const TableKind& kind) const;
  // The options in TableOption order, each with its flag.
  std::array<std::pair<TableOption, const CLI::Option*>, 13> shared_options() const;
  // "[op] --x does not apply to kind 'k'" for any option the kind does not read
  // (kind.options), then, when `sizes_required`, "[op] --x is required for kind 'k'".
  void check_kind_options(const TableKind& kind, std::string_view op, bool sizes_required) const;
  // "[op] --start must be at least -9007199254740992 ..." / "[op] the last position ...":
  // positions must stay within +-2^53, where every integer is exact as a double.
  void check_position_range(const TableKind& kind, std::string_view op, int64_t positions) const;

  Values v_;
  CLI::Option* positions_ = nullptr;
  CLI::Option* start_ = nullptr;
  CLI::Option* length_ = nullptr;
  CLI::Option* frames_ = nullptr;
  CLI::Option* height_ = nullptr;
  CLI::Option* width_ = nullptr;
  CLI::Option* dim_ = nullptr;
  CLI::Option* base_ = nullptr;
  CLI::Option* scale_ = nullptr;
  CLI::Option* layout_ = nullptr;
  CLI::Option* precision_ = nullptr;
  CLI::Option* normalize_ = nullptr;
  CLI::Option* normalize_scale_ = nullptr;
  RopeTableOptions rope_;
};

}  // namespace posenc::cli
