#include "kinds.h"

#include <string>

#include "posenc/error.h"

namespace posenc::cli {
namespace {

using enum TableOption;

// What each kind reads. Absolute kinds (src/kernels/absolute.cpp): sinusoidal
// takes all of SinusoidalParams; the naive ones (naive.cpp) only the positions
// and dim, normalized also L, sine-only also its base; none takes a scale,
// layout or precision (sine-binary and sine-only always reduce angles exactly).
TableOptionSet absolute_options(kernels::AbsoluteKind kind) {
  using kernels::AbsoluteKind;
  switch (kind) {
    case AbsoluteKind::kSinusoidal: return {kPositions, kStart, kDim, kBase, kScale, kLayout, kPrecision};
    case AbsoluteKind::kNormalized: return {kPositions, kStart, kDim, kLength};
    case AbsoluteKind::kSineOnly: return {kPositions, kStart, kDim, kBase};
    case AbsoluteKind::kIndex:
    case AbsoluteKind::kBinary:
    case AbsoluteKind::kSignedBinary:
    case AbsoluteKind::kSineBinary: return {kPositions, kStart, kDim};
  }
  return {};  // unreachable: -Wswitch names a new kind missing above
}

// Grids (sinusoidal_nd.h): every SinusoidalGridParams field; RoPE (rope.h):
// dim, base, precision and its scaling, no amplitude or layout (the cache is cos then sin).
constexpr TableOptionSet kGrid2dOptions{kHeight, kWidth, kDim, kBase, kScale, kLayout, kPrecision, kNormalize,
                                        kNormalizeScale};
constexpr TableOptionSet kGrid3dOptions{kFrames, kHeight, kWidth, kDim, kBase, kScale, kLayout, kPrecision,
                                        kNormalize, kNormalizeScale};
constexpr TableOptionSet kRopeOptions{kPositions, kStart, kDim, kBase, kPrecision, kRopeScaling};

}  // namespace

std::vector<TableKind> table_kinds() {
  std::vector<TableKind> kinds;
  for (const kernels::AbsoluteKindInfo& info : kernels::absolute_kinds()) {
    kinds.push_back({TableFamily::kAbsolute, info.kind, info.name, info.summary, absolute_options(info.kind),
                     {kPositions, kDim}});
  }
  kinds.push_back({TableFamily::kGrid2d,
                   {},
                   "sinusoidal-2d",
                   "rows y*W+x; channels [0, D/2) encode y, [D/2, D) encode x (DETR, MAE)",
                   kGrid2dOptions,
                   {kHeight, kWidth, kDim}});
  kinds.push_back({TableFamily::kGrid3d,
                   {},
                   "sinusoidal-3d",
                   "rows (t*H+y)*W+x; D/3 channels each for t, y, x (ViViT)",
                   kGrid3dOptions,
                   {kFrames, kHeight, kWidth, kDim}});
  kinds.push_back({TableFamily::kRope,
                   {},
                   "rope",
                   "RoPE cache: cos(p * w_i) in [0, D/2), sin in [D/2, D), w_i = base^(-2i/D) and its scalings",
                   kRopeOptions,
                   {kPositions, kDim}});
  return kinds;
}

namespace {

std::string kind_names() {
  std::string known;
  for (const TableKind& kind : table_kinds()) {
    known += known.empty() ? "" : ", ";
    known += kind.name;
  }
  return known;
}

}  // namespace

TableKind parse_table_kind(std::string_view name) {
  for (const TableKind& kind : table_kinds()) {
    if (kind.name == name) return kind;
  }
  fail_argument("table", "KIND must be one of ", kind_names(), ", got '", name, "'");
}

TableKind parse_source_kind(std::string_view name, std::string_view op) {
  for (const TableKind& kind : table_kinds()) {
    if (kind.name == name) return kind;
  }
  fail_argument(op, "SOURCE must be a .npy or .safetensors file or one of ", kind_names(), ", got '", name, "'");
}

}  // namespace posenc::cli
