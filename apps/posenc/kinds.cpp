#include "kinds.h"

#include <string>

#include "posenc/error.h"

namespace posenc::cli {

std::vector<TableKind> table_kinds() {
  std::vector<TableKind> kinds;
  for (const kernels::AbsoluteKindInfo& info : kernels::absolute_kinds()) {
    kinds.push_back({TableFamily::kAbsolute, info.kind, info.name, info.summary});
  }
  kinds.push_back({TableFamily::kGrid2d,
                   {},
                   "sinusoidal-2d",
                   "rows y*W+x; channels [0, D/2) encode y, [D/2, D) encode x (DETR, MAE)"});
  kinds.push_back(
      {TableFamily::kGrid3d, {}, "sinusoidal-3d", "rows (t*H+y)*W+x; D/3 channels each for t, y, x (ViViT)"});
  kinds.push_back({TableFamily::kRope, {}, "rope",
                   "RoPE cache: cos(p * w_i) in [0, D/2), sin in [D/2, D), w_i = base^(-2i/D) and its scalings"});
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
