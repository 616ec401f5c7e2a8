// The current length a RoPE table of positions start .. start+count-1 stands
// for when the caller gives none: max position + 1 (Hugging Face's
// convention), at least 1, saturated at INT64_MAX. It selects the regime of
// the dynamic and longrope scalings (rope_scaling.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>

namespace posenc::kernels {

// seq_len itself when given, or when count < 1 (no position to measure).
inline std::optional<int64_t> range_seq_len(std::optional<int64_t> seq_len, int64_t start, int64_t count) noexcept {
  if (seq_len || count < 1) return seq_len;
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const int64_t last = start > kMax - (count - 1) ? kMax : start + (count - 1);
  return last == kMax ? kMax : std::max<int64_t>(last, 0) + 1;
}

}  // namespace posenc::kernels
