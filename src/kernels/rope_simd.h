// Internal: converting runs of 16-bit floats to and from float32 so that the
// loops vectorize (shift / round-to-nearest-even for bfloat16, F16C for
// float16), with the same results as the scalar conversions of half_types.h.
#pragma once

#include <bit>
#include <cstdint>

#include "posenc/kernels/half_types.h"

#if defined(__F16C__) || defined(__AVX512F__) || defined(__AVX512BF16__)
#include <immintrin.h>
#endif

namespace posenc::kernels::detail {

// Scalar widening to the math type (float, or double for double).
inline float widen(bfloat16 v) noexcept { return to_float(v); }
inline float widen(float16 v) noexcept { return to_float(v); }
inline float widen(float v) noexcept { return v; }
inline double widen(double v) noexcept { return v; }

[[gnu::always_inline]] inline void widen(const bfloat16* src, float* dst, int64_t n) noexcept {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dst[i] = std::bit_cast<float>(static_cast<uint32_t>(src[i].bits) << 16);
}

// to_bfloat16 in a form that vectorizes: NaN first replaced by the quiet NaN
// 0x7fc00000 (which the rounding maps to 0x7fc0), then round to nearest even.
[[gnu::always_inline]] inline void narrow(const float* src, bfloat16* dst, int64_t n) noexcept {
  int64_t i = 0;
#if defined(__AVX512BF16__) && defined(__AVX512BW__)
  // The hardware conversion rounds to nearest even like the rule below, but
  // keeps NaN payloads and flushes subnormals: it takes 32 values at a time
  // unless one of them is NaN or subnormal, and the rule does the rest.
  for (; i + 32 <= n; i += 32) {
    const __m512 lo = _mm512_loadu_ps(src + i);
    const __m512 hi = _mm512_loadu_ps(src + i + 16);
    constexpr int kNanOrSubnormal = 0x01 | 0x20 | 0x80;  // quiet NaN, subnormal, signalling NaN
    if ((_mm512_fpclass_ps_mask(lo, kNanOrSubnormal) | _mm512_fpclass_ps_mask(hi, kNanOrSubnormal)) != 0) break;
    _mm512_storeu_si512(dst + i, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo)));
  }
#endif
#pragma omp simd
  for (int64_t k = i; k < n; ++k) {
    const float f = src[k];
    uint32_t u = f != f ? 0x7fc00000u : std::bit_cast<uint32_t>(f);
    u += 0x7fffu + ((u >> 16) & 1u);
    dst[k].bits = static_cast<uint16_t>(u >> 16);
  }
}

[[gnu::always_inline]] inline void widen(const float16* src, float* dst, int64_t n) noexcept {
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    _mm512_storeu_ps(dst + i, _mm512_maskz_cvtph_ps(0xffff, h));  // maskz: see narrow
  }
#endif
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
#endif
  for (; i < n; ++i) dst[i] = to_float(src[i]);
}

[[gnu::always_inline]] inline void narrow(const float* src, float16* dst, int64_t n) noexcept {
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) {
    // maskz form: the plain one trips GCC 12's -Wmaybe-uninitialized on its undefined source.
    const __m256i h =
        _mm512_maskz_cvtps_ph(0xffff, _mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), h);
  }
#endif
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
#endif
  for (; i < n; ++i) dst[i] = to_float16(src[i]);
}

}  // namespace posenc::kernels::detail
