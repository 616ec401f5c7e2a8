#include "table_options.h"

#include <cmath>
#include <limits>

#include "posenc/error.h"

namespace posenc::cli {
namespace {

// Analysis defaults: the classic figure (D = 128, 256 positions).
constexpr int64_t kAnalysisPositions = 256;
constexpr int64_t kAnalysisDim = 128;
constexpr int64_t kAnalysisGridSide = 16;                        // 16 x 16 = 256 cells
constexpr int64_t kAnalysisFrames = 4, kAnalysisGrid3dSide = 8;  // 4 x 8 x 8 = 256 cells
constexpr int64_t kAnalysisGrid3dDim = 126;                      // the multiple of 6 nearest 128
// Kernels turn a position into a double (angles, index values): every integer
// up to 2^53 is exact there; beyond, neighbouring positions would merge.
constexpr int64_t kMaxExactPosition = int64_t{1} << 53;

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

std::array<std::pair<TableOption, const CLI::Option*>, 13> TableOptions::shared_options() const {
  using enum TableOption;
  return {{{kPositions, positions_},
           {kStart, start_},
           {kLength, length_},
           {kFrames, frames_},
           {kHeight, height_},
           {kWidth, width_},
           {kDim, dim_},
           {kBase, base_},
           {kScale, scale_},
           {kLayout, layout_},
           {kPrecision, precision_},
           {kNormalize, normalize_},
           {kNormalizeScale, normalize_scale_}}};
}

void TableOptions::check_kind_options(const TableKind& kind, std::string_view op, bool sizes_required) const {
  for (const auto& [which, option] : shared_options()) {
    if (option->count() > 0 && !kind.options.contains(which)) {
      fail_argument(op, option->get_name(), " does not apply to kind '", kind.name, "'");
    }
  }
  if (!kind.options.contains(TableOption::kRopeScaling)) rope_.refuse_for(op, "kind '" + std::string(kind.name) + "'");
  if (!sizes_required) return;
  for (const auto& [which, option] : shared_options()) {
    if (option->count() == 0 && kind.required.contains(which) && !(which == TableOption::kDim && rope_.has_hf_config())) {
      fail_argument(op, option->get_name(), " is required for kind '", kind.name, "'");
    }
  }
}

void TableOptions::check_position_range(const TableKind& kind, std::string_view op, int64_t positions) const {
  if (!kind.options.contains(TableOption::kStart) || positions < 1) return;  // the kernels refuse N < 1
  const int64_t start = v_.start;
  if (start < -kMaxExactPosition) {
    fail_argument(op, "--start must be at least ", -kMaxExactPosition, " (-2^53; positions are exact in double), got ",
                  start);
  }
  // start >= -2^53, so kMaxExactPosition - start cannot overflow.
  if (start > kMaxExactPosition || positions - 1 > kMaxExactPosition - start) {
    fail_argument(op, "the last position --start + --positions - 1 must be at most ", kMaxExactPosition,
                  " (2^53; positions are exact in double), got ", start, " + ", positions, " - 1");
  }
}

void TableOptions::refuse_all(std::string_view op, std::string_view what) const {
  for (const auto& [which, option] : shared_options()) {
    if (option->count() > 0) fail_argument(op, option->get_name(), " does not apply to ", what);
  }
  rope_.refuse_for(op, what);
}

kernels::AbsoluteParams TableOptions::absolute_params(const TableKind& kind) const {
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

kernels::SinusoidalGridParams TableOptions::grid_params(const TableKind& kind) const {
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

Table TableOptions::float_table(const TableKind& kind) const {
  const char* op = "table";
  check_kind_options(kind, op, true);
  check_position_range(kind, op, v_.positions);
  // Values are scale * sin / cos, so |scale| <= FLT_MAX keeps every float32 value finite.
  constexpr double kMaxFloat = std::numeric_limits<float>::max();
  if (kind.options.contains(TableOption::kScale) && std::isfinite(v_.scale) && std::abs(v_.scale) > kMaxFloat) {
    fail_argument(op, "--scale must be at most ", kMaxFloat,
                  " in magnitude (the largest float32: the table is written as float32), got ", v_.scale);
  }
  switch (kind.family) {
    case TableFamily::kAbsolute:
      return make_absolute_table(kind.name, absolute_params(kind), kernels::Positions::range(v_.start, v_.positions));
    case TableFamily::kRope: {
      const RopeTableOptions::Resolved r = rope_.resolve(op, dim_, v_.dim, base_, v_.base);  // --hf-config
      return make_rope_table(kind.name, r.dim, r.base, r.scaling, rope_.seq_len(),
                             kernels::parse_precision(v_.precision, "rope"), v_.start, v_.positions);
    }
    case TableFamily::kGrid2d:
    case TableFamily::kGrid3d:
      return make_grid_table(kind.name, kind.family == TableFamily::kGrid3d, grid_params(kind));
  }
  fail_argument(op, "unknown kind '", kind.name, "'");
}

report::TableSource TableOptions::analysis_source(const TableKind& kind, std::string_view op) const {
  const int64_t positions = positions_->count() > 0 ? v_.positions : kAnalysisPositions;
  check_kind_options(kind, op, false);
  check_position_range(kind, op, positions);
  switch (kind.family) {
    case TableFamily::kAbsolute: {
      kernels::AbsoluteParams params = absolute_params(kind);
      if (dim_->count() == 0) params.dim = is_bit_kind(kind.absolute) ? bit_width(positions) : kAnalysisDim;
      return report::absolute_source(kind.name, params, kernels::Positions::range(v_.start, positions));
    }
    case TableFamily::kRope: {
      const RopeTableOptions::Resolved r =
          rope_.resolve(op, dim_, dim_->count() > 0 ? v_.dim : kAnalysisDim, base_, v_.base);  // --hf-config
      return report::rope_source(kind.name, r.dim, r.base, r.scaling, rope_.seq_len(),
                                 kernels::parse_precision(v_.precision, "rope"), v_.start, positions);
    }
    case TableFamily::kGrid2d:
    case TableFamily::kGrid3d: {
      const bool three_d = kind.family == TableFamily::kGrid3d;
      kernels::SinusoidalGridParams params = grid_params(kind);
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
