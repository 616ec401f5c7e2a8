#include "table_options.h"

#include "posenc/error.h"

namespace posenc::cli {
namespace {

// Analysis defaults: the classic figure (D = 128, 256 positions).
constexpr int64_t kAnalysisPositions = 256;
constexpr int64_t kAnalysisDim = 128;
constexpr int64_t kAnalysisGridSide = 16;                        // 16 x 16 = 256 cells
constexpr int64_t kAnalysisFrames = 4, kAnalysisGrid3dSide = 8;  // 4 x 8 x 8 = 256 cells
constexpr int64_t kAnalysisGrid3dDim = 126;                      // the multiple of 6 nearest 128

bool is_bit_kind(kernels::AbsoluteKind kind) {
  using enum kernels::AbsoluteKind;
  return kind == kBinary || kind == kSignedBinary || kind == kSineBinary;
}

// ceil(log2(n)), at least 1: the bits that tell n positions apart.
int64_t bit_width(int64_t n) {
  int64_t bits = 1;
  while (bits < 62 && (int64_t{1} << bits) < n) ++bits;
  return bits;
}

}  // namespace

TableOptions::TableOptions() {
  const kernels::AbsoluteParams defaults;
  const kernels::SinusoidalGridParams grid_defaults;
  v_.base = defaults.base;
  v_.scale = defaults.scale;
  v_.layout = std::string(kernels::layout_name(defaults.layout));
  v_.precision = std::string(kernels::precision_name(defaults.precision));
  v_.normalize_scale = grid_defaults.normalize_scale;
}

void TableOptions::add_shared(CLI::App& app) {
  positions_ = app.add_option("--positions", v_.positions, "Number of positions N (1D kinds)");
  start_ = app.add_option("--start", v_.start, "First position (1D kinds)")->capture_default_str();
  length_ = app.add_option("--length", v_.length, "normalized: L in p/(L-1); default N");
  frames_ = app.add_option("--frames", v_.frames, "Frames F (sinusoidal-3d)");
  height_ = app.add_option("--height", v_.height, "Grid height H (sinusoidal-2d/3d)");
  width_ = app.add_option("--width", v_.width, "Grid width W (sinusoidal-2d/3d)");
  dim_ = app.add_option("--dim", v_.dim, "Channels D");
  base_ = app.add_option("--base", v_.base, "Frequency base (sinusoidal kinds, sine-only, rope)")->capture_default_str();
  scale_ = app.add_option("--scale", v_.scale, "Amplitude (sinusoidal kinds)")->capture_default_str();
  layout_ = app.add_option("--layout", v_.layout, "interleaved | half | cos-sin (sinusoidal kinds)")
                ->capture_default_str();
  precision_ =
      app.add_option("--precision", v_.precision, "exact | fp32 (sinusoidal kinds, rope)")->capture_default_str();
  normalize_ = app.add_flag("--normalize", v_.normalize,
                            "Grids: coordinate c on an axis of size S becomes c/(S-1)*normalize-scale");
  normalize_scale_ = app.add_option("--normalize-scale", v_.normalize_scale, "Grids: see --normalize")
                         ->capture_default_str()
                         ->needs(normalize_);
}

void TableOptions::require_given(std::string_view op, std::string_view kind,
                                 std::initializer_list<const CLI::Option*> options) const {
  for (const CLI::Option* o : options) {
    if (o->count() == 0) fail_argument(op, o->get_name(), " is required for kind '", kind, "'");
  }
}

void TableOptions::refuse_given(std::string_view op, std::string_view kind,
                                std::initializer_list<const CLI::Option*> options) const {
  for (const CLI::Option* o : options) {
    if (o->count() > 0) fail_argument(op, o->get_name(), " does not apply to kind '", kind, "'");
  }
}

void TableOptions::refuse_all(std::string_view op, std::string_view what) const {
  for (const CLI::Option* o : {positions_, start_, length_, frames_, height_, width_, dim_, base_, scale_, layout_,
                               precision_, normalize_, normalize_scale_}) {
    if (o->count() > 0) fail_argument(op, o->get_name(), " does not apply to ", what);
  }
  rope_.refuse_for(op, what);
}

kernels::AbsoluteParams TableOptions::absolute_params(const TableKind& kind, std::string_view op) const {
  refuse_given(op, kind.name, {frames_, height_, width_, normalize_, normalize_scale_});
  rope_.refuse_for(op, "kind '" + std::string(kind.name) + "'");
  const char* family = "sinusoidal";  // the kernels name layout and precision errors by the family using them
  kernels::AbsoluteParams params;
  params.kind = kind.absolute;
  params.dim = v_.dim;
  params.base = v_.base;
  params.scale = v_.scale;
  params.layout = kernels::parse_layout(v_.layout, family);
  params.precision = kernels::parse_precision(v_.precision, family);
  params.length = v_.length;
  return params;
}

kernels::SinusoidalGridParams TableOptions::grid_params(const TableKind& kind, std::string_view op) const {
  const bool three_d = kind.family == TableFamily::kGrid3d;
  refuse_given(op, kind.name, {positions_, start_, length_});
  if (!three_d) refuse_given(op, kind.name, {frames_});
  rope_.refuse_for(op, "kind '" + std::string(kind.name) + "'");
  const std::string family(kind.name);
  kernels::SinusoidalGridParams params;
  params.frames = v_.frames;
  params.height = v_.height;
  params.width = v_.width;
  params.dim = v_.dim;
  params.base = v_.base;
  params.scale = v_.scale;
  params.layout = kernels::parse_layout(v_.layout, family.c_str());
  params.precision = kernels::parse_precision(v_.precision, family.c_str());
  params.normalize = v_.normalize;
  params.normalize_scale = v_.normalize_scale;
  return params;
}

void TableOptions::check_rope(const TableKind& kind, std::string_view op) const {
  refuse_given(op, kind.name, {length_, frames_, height_, width_, normalize_, normalize_scale_, scale_, layout_});
}

Table TableOptions::float_table(const TableKind& kind) const {
  const char* op = "table";
  switch (kind.family) {
    case TableFamily::kAbsolute: {
      require_given(op, kind.name, {positions_, dim_});
      const kernels::AbsoluteParams params = absolute_params(kind, op);
      return make_absolute_table(kind.name, params, kernels::Positions::range(v_.start, v_.positions));
    }
    case TableFamily::kRope:
      require_given(op, kind.name, {positions_, dim_});
      check_rope(kind, op);
      return make_rope_table(kind.name, v_.dim, v_.base, rope_.scaling(), rope_.seq_len(),
                             kernels::parse_precision(v_.precision, "rope"), v_.start, v_.positions);
    case TableFamily::kGrid2d:
    case TableFamily::kGrid3d: {
      const bool three_d = kind.family == TableFamily::kGrid3d;
      require_given(op, kind.name, {height_, width_, dim_});
      if (three_d) require_given(op, kind.name, {frames_});
      return make_grid_table(kind.name, three_d, grid_params(kind, op));
    }
  }
  fail_argument(op, "unknown kind '", kind.name, "'");
}

report::TableSource TableOptions::analysis_source(const TableKind& kind, std::string_view op) const {
  const int64_t positions = positions_->count() > 0 ? v_.positions : kAnalysisPositions;
  switch (kind.family) {
    case TableFamily::kAbsolute: {
      kernels::AbsoluteParams params = absolute_params(kind, op);
      if (dim_->count() == 0) params.dim = is_bit_kind(kind.absolute) ? bit_width(positions) : kAnalysisDim;
      return report::absolute_source(kind.name, params, kernels::Positions::range(v_.start, positions));
    }
    case TableFamily::kRope:
      check_rope(kind, op);
      return report::rope_source(kind.name, dim_->count() > 0 ? v_.dim : kAnalysisDim, v_.base, rope_.scaling(),
                                 rope_.seq_len(), kernels::parse_precision(v_.precision, "rope"), v_.start,
                                 positions);
    case TableFamily::kGrid2d:
    case TableFamily::kGrid3d: {
      const bool three_d = kind.family == TableFamily::kGrid3d;
      kernels::SinusoidalGridParams params = grid_params(kind, op);
      const int64_t side = three_d ? kAnalysisGrid3dSide : kAnalysisGridSide;
      if (height_->count() == 0) params.height = side;
      if (width_->count() == 0) params.width = side;
      if (three_d && frames_->count() == 0) params.frames = kAnalysisFrames;
      if (dim_->count() == 0) params.dim = three_d ? kAnalysisGrid3dDim : kAnalysisDim;
      return report::grid_source(kind.name, three_d, params);
    }
  }
  fail_argument(op, "unknown kind '", kind.name, "'");
}

}  // namespace posenc::cli
