// 16-bit float storage types for the kernels, layout-compatible with
// at::BFloat16 and at::Half (a uint16_t payload), so the torch layer can pass
// its buffers through reinterpret_cast. Math happens in float32; these only
// convert, with round-to-nearest-even on the way down.
#pragma once

#include <bit>
#include <cstdint>

namespace posenc::kernels {

struct bfloat16 {
  uint16_t bits;
};
struct float16 {
  uint16_t bits;
};
static_assert(sizeof(bfloat16) == 2 && sizeof(float16) == 2);

inline float to_float(bfloat16 v) noexcept { return std::bit_cast<float>(static_cast<uint32_t>(v.bits) << 16); }

// Round to nearest even; NaN stays a (quiet) NaN, as torch does.
inline bfloat16 to_bfloat16(float f) noexcept {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bfloat16{0x7fc0};
  const uint32_t rounded = u + 0x7fffu + ((u >> 16) & 1u);
  return bfloat16{static_cast<uint16_t>(rounded >> 16)};
}

inline float to_float(float16 v) noexcept { return static_cast<float>(std::bit_cast<_Float16>(v.bits)); }
inline float16 to_float16(float f) noexcept { return float16{std::bit_cast<uint16_t>(static_cast<_Float16>(f))}; }

}  // namespace posenc::kernels
