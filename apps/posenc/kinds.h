// The table kinds the CLI offers: every absolute kind of the kernel registry
// (posenc::kernels::absolute_kinds), the 2D and 3D sinusoidal grids, and the
// RoPE cos/sin table.
#pragma once

#include <string_view>
#include <vector>

#include "posenc/kernels/absolute.h"

namespace posenc::cli {

enum class TableFamily { kAbsolute, kGrid2d, kGrid3d, kRope };

struct TableKind {
  TableFamily family = TableFamily::kAbsolute;
  kernels::AbsoluteKind absolute = kernels::AbsoluteKind::kSinusoidal;  // kAbsolute only
  std::string_view name;
  std::string_view summary;
};

// Absolute kinds first, in registry order, then sinusoidal-2d, sinusoidal-3d, rope.
std::vector<TableKind> table_kinds();

// Throws "[table] KIND must be one of sinusoidal, ..., sinusoidal-3d, rope, got 'x'".
TableKind parse_table_kind(std::string_view name);
// The SOURCE of analyze / plot / probe when it is not a file; throws
// "[op] SOURCE must be a .npy or .safetensors file or one of sinusoidal, ..., rope, got 'x'".
TableKind parse_source_kind(std::string_view name, std::string_view op);

}  // namespace posenc::cli
