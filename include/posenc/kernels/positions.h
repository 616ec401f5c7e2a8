// Positions: either an arithmetic range start, start+1, ... (count values) or
// a caller-owned int64 array. Kernels that see a range may use a rotation
// recurrence along positions; an array is evaluated position by position.
#pragma once

#include <cstdint>
#include <span>

namespace posenc::kernels {

// Largest table (rows x columns) a kernel will fill: 2^31 values (8 GiB of
// float32), far above any real position table, so a typo fails fast instead
// of asking the allocator for terabytes.
inline constexpr int64_t kMaxTableValues = int64_t{1} << 31;

struct Positions {
  const int64_t* data = nullptr;  // the list; unused for a range
  int64_t count = 0;
  int64_t start = 0;              // the range's first position
  bool from_list = false;

  static Positions range(int64_t start, int64_t count) noexcept {
    return Positions{nullptr, count, start, false};
  }
  static Positions list(std::span<const int64_t> values) noexcept {
    return Positions{values.data(), static_cast<int64_t>(values.size()), 0, true};
  }
  bool is_range() const noexcept { return !from_list; }
  int64_t operator[](int64_t k) const noexcept { return from_list ? data[k] : start + k; }
};

// Throws "[op] positions must be at least 1, got N" for count <= 0 and
// "[op] positions x dim must be at most 2147483648 values, got ..." when the
// table would be too large. An empty explicit list is allowed (empty table).
void validate_table_size(const char* op, const Positions& positions, int64_t dim);

}  // namespace posenc::kernels
