// The table kinds the CLI offers: every absolute kind of the kernel registry
// (posenc::kernels::absolute_kinds), the 2D and 3D sinusoidal grids, and the
// RoPE cos/sin table. Each kind says which table options it reads; every
// other one given is refused (table_options.h), so none is silently ignored.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string_view>
#include <vector>

#include "posenc/kernels/absolute.h"

namespace posenc::cli {

enum class TableFamily { kAbsolute, kGrid2d, kGrid3d, kRope };

// The options of `posenc table` (and of a kind SOURCE of analyze / plot /
// probe), in --help order; kRopeScaling stands for the whole RoPE scaling group.
enum class TableOption {
  kPositions, kStart, kLength, kFrames, kHeight, kWidth, kDim, kBase, kScale, kLayout, kPrecision, kNormalize,
  kNormalizeScale, kRopeScaling,
};

class TableOptionSet {
 public:
  constexpr TableOptionSet() = default;
  constexpr TableOptionSet(std::initializer_list<TableOption> options) {
    for (TableOption o : options) bits_ |= bit(o);
  }
  constexpr bool contains(TableOption o) const { return (bits_ & bit(o)) != 0; }

 private:
  static constexpr uint32_t bit(TableOption o) { return uint32_t{1} << static_cast<int>(o); }
  uint32_t bits_ = 0;
};

struct TableKind {
  TableFamily family = TableFamily::kAbsolute;
  kernels::AbsoluteKind absolute = kernels::AbsoluteKind::kSinusoidal;  // kAbsolute only
  std::string_view name;
  std::string_view summary;
  TableOptionSet options;   // the options the kind reads
  TableOptionSet required;  // of those, the ones `posenc table` needs (analysis has defaults)
};

// Absolute kinds first, in registry order, then sinusoidal-2d, sinusoidal-3d, rope.
std::vector<TableKind> table_kinds();

// Throws "[table] KIND must be one of sinusoidal, ..., sinusoidal-3d, rope, got 'x'".
TableKind parse_table_kind(std::string_view name);
// The SOURCE of analyze / plot / probe when it is not a file; throws
// "[op] SOURCE must be a .npy or .safetensors file or one of sinusoidal, ..., rope, got 'x'".
TableKind parse_source_kind(std::string_view name, std::string_view op);

}  // namespace posenc::cli
