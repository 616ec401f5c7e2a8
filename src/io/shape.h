// Element counts of shapes, shared by the readers, the writers and
// StoredTensor. Internal to posenc::io.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>

namespace posenc::io::detail {

// The number of elements of `shape` (1 for 0-d), or nothing when a dimension
// is negative or the product overflows int64. A zero dimension makes the
// count 0 whatever the others are, as numpy and the readers have it.
inline std::optional<int64_t> checked_numel(std::span<const int64_t> shape) noexcept {
  if (std::any_of(shape.begin(), shape.end(), [](int64_t d) { return d < 0; })) return std::nullopt;
  if (std::find(shape.begin(), shape.end(), int64_t{0}) != shape.end()) return 0;
  int64_t n = 1;
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(n, d, &n)) return std::nullopt;
  }
  return n;
}

}  // namespace posenc::io::detail
