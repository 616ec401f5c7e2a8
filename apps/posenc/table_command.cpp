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
  const kernels::AbsoluteParams defaults;
  const kernels::SinusoidalGridParams grid_defaults;
  options_.base = defaults.base;
  options_.scale = defaults.scale;
  options_.layout = std::string(kernels::layout_name(defaults.layout));
  options_.precision = std::string(kernels::precision_name(defaults.precision));
  options_.normalize_scale = grid_defaults.normalize_scale;

  app_->add_option("KIND", options_.kind, "Table kind, e.g. sinusoidal, binary, sinusoidal-2d");
  app_->add_flag("--list", options_.list, "List the kinds with their formulas");
  positions_ = app_->add_option("--positions", options_.positions, "Number of positions N (1D kinds)");
  start_ = app_->add_option("--start", options_.start, "First position (1D kinds)")->capture_default_str();
  length_ = app_->add_option("--length", options_.length, "normalized: L in p/(L-1); default N");
  frames_ = app_->add_option("--frames", options_.frames, "Frames F (sinusoidal-3d)");
  height_ = app_->add_option("--height", options_.height, "Grid height H (sinusoidal-2d/3d)");
  width_ = app_->add_option("--width", options_.width, "Grid width W (sinusoidal-2d/3d)");
  dim_ = app_->add_option("--dim", options_.dim, "Channels D");
  app_->add_option("--base", options_.base, "Frequency base (sinusoidal kinds, sine-only, rope)")
      ->capture_default_str();
  app_->add_option("--scale", options_.scale, "Amplitude (sinusoidal kinds)")->capture_default_str();
  app_->add_option("--layout", options_.layout, "interleaved | half | cos-sin (sinusoidal kinds)")
      ->capture_default_str();
  app_->add_option("--precision", options_.precision, "exact | fp32 (sinusoidal kinds, rope)")->capture_default_str();
  normalize_ = app_->add_flag("--normalize", options_.normalize,
                              "Grids: coordinate c on an axis of size S becomes c/(S-1)*normalize-scale");
  normalize_scale_ = app_->add_option("--normalize-scale", options_.normalize_scale, "Grids: see --normalize")
                         ->capture_default_str()
                         ->needs(normalize_);
  app_->add_option("--out", options_.out, "Output file, .npy or .csv (default KIND.npy)");
  rope_.add_to(*app_);
}

void TableCommand::require_given(std::string_view kind, std::initializer_list<const CLI::Option*> options) const {
  for (const CLI::Option* o : options) {
    if (o->count() == 0) fail_argument("table", o->get_name(), " is required for kind '", kind, "'");
  }
}

void TableCommand::refuse_given(std::string_view kind, std::initializer_list<const CLI::Option*> options) const {
  for (const CLI::Option* o : options) {
    if (o->count() > 0) fail_argument("table", o->get_name(), " does not apply to kind '", kind, "'");
  }
}

void TableCommand::run() const {
  if (options_.list) {
    print_kind_list(std::cout);
    return;
  }
  if (options_.kind.empty()) fail_argument("table", "KIND is required (posenc table --list shows them)");
  const TableKind kind = parse_table_kind(options_.kind);
  const std::string out = options_.out.empty() ? options_.kind + ".npy" : options_.out;
  table_format(out);  // refuse a bad file name before computing
  const Table table = kind.family == TableFamily::kAbsolute ? absolute_table(kind)
                      : kind.family == TableFamily::kRope   ? rope_table(kind)
                                                            : grid_table(kind);
  write_table(table, out);
  std::cout << "wrote " << out << ": " << kind.name << " table [" << table.rows << ", " << table.cols << "] float32\n";
}

Table TableCommand::absolute_table(const TableKind& kind) const {
  require_given(kind.name, {positions_, dim_});
  refuse_given(kind.name, {frames_, height_, width_, normalize_, normalize_scale_});
  rope_.refuse_for(kind.name);
  const char* op = "sinusoidal";  // the kernels name layout and precision errors by the family using them
  kernels::AbsoluteParams params;
  params.kind = kind.absolute;
  params.dim = options_.dim;
  params.base = options_.base;
  params.scale = options_.scale;
  params.layout = kernels::parse_layout(options_.layout, op);
  params.precision = kernels::parse_precision(options_.precision, op);
  params.length = options_.length;
  return make_absolute_table(kind.name, params, kernels::Positions::range(options_.start, options_.positions));
}

Table TableCommand::grid_table(const TableKind& kind) const {
  const bool three_d = kind.family == TableFamily::kGrid3d;
  require_given(kind.name, {height_, width_, dim_});
  if (three_d) require_given(kind.name, {frames_});
  refuse_given(kind.name, {positions_, start_, length_});
  if (!three_d) refuse_given(kind.name, {frames_});
  rope_.refuse_for(kind.name);
  const std::string op(kind.name);
  kernels::SinusoidalGridParams params;
  params.frames = options_.frames;
  params.height = options_.height;
  params.width = options_.width;
  params.dim = options_.dim;
  params.base = options_.base;
  params.scale = options_.scale;
  params.layout = kernels::parse_layout(options_.layout, op.c_str());
  params.precision = kernels::parse_precision(options_.precision, op.c_str());
  params.normalize = options_.normalize;
  params.normalize_scale = options_.normalize_scale;
  return make_grid_table(kind.name, three_d, params);
}

Table TableCommand::rope_table(const TableKind& kind) const {
  require_given(kind.name, {positions_, dim_});
  refuse_given(kind.name, {length_, frames_, height_, width_, normalize_, normalize_scale_,
                           app_->get_option("--scale"), app_->get_option("--layout")});
  return make_rope_table(kind.name, options_.dim, options_.base, rope_.scaling(), rope_.seq_len(),
                         kernels::parse_precision(options_.precision, "rope"), options_.start, options_.positions);
}

}  // namespace posenc::cli
