// Internal: how the relative-vector kernels write their large outputs. A
// (Tq, Tk) logits matrix per head is written once and not read again by this
// kernel; above a few MiB, non-temporal stores skip the read-for-ownership of
// every line (half the memory traffic). Plain loops where the target has no
// streaming stores.
#pragma once

#include <algorithm>
#include <cstdint>

#include "streaming_copy.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace posenc::kernels::detail {

// dst[0 .. n) = value.
template <class T>
inline void fill_row(T* dst, int64_t n, T value, bool streaming) noexcept {
#if defined(__AVX512F__)
  if (streaming) {
    int64_t j = 0;
    while (j < n && (reinterpret_cast<uintptr_t>(dst + j) & 63) != 0) dst[j++] = value;
    constexpr int64_t kLanes = 64 / sizeof(T);
    if constexpr (sizeof(T) == 4) {
      const __m512 v = _mm512_set1_ps(static_cast<float>(value));
      for (; j + kLanes <= n; j += kLanes) _mm512_stream_ps(reinterpret_cast<float*>(dst + j), v);
    } else {
      const __m512d v = _mm512_set1_pd(static_cast<double>(value));
      for (; j + kLanes <= n; j += kLanes) _mm512_stream_pd(reinterpret_cast<double*>(dst + j), v);
    }
    for (; j < n; ++j) dst[j] = value;
    return;
  }
#endif
  (void)streaming;
  std::fill(dst, dst + n, value);
}

// dst[0 .. n) = src[0 .. n).
template <class T>
inline void copy_row(const T* src, T* dst, int64_t n, bool streaming) noexcept {
#if defined(__AVX512F__)
  if (streaming) {
    int64_t j = 0;
    while (j < n && (reinterpret_cast<uintptr_t>(dst + j) & 63) != 0) {
      dst[j] = src[j];
      ++j;
    }
    constexpr int64_t kLanes = 64 / sizeof(T);
    for (; j + kLanes <= n; j += kLanes) {
      if constexpr (sizeof(T) == 4) {
        _mm512_stream_ps(reinterpret_cast<float*>(dst + j), _mm512_loadu_ps(reinterpret_cast<const float*>(src + j)));
      } else {
        _mm512_stream_pd(reinterpret_cast<double*>(dst + j),
                         _mm512_loadu_pd(reinterpret_cast<const double*>(src + j)));
      }
    }
    for (; j < n; ++j) dst[j] = src[j];
    return;
  }
#endif
  if (streaming) {
    copy_streaming(src, dst, n);  // 32-byte streams with AVX, a plain copy otherwise
  } else {
    std::copy(src, src + n, dst);
  }
}

}  // namespace posenc::kernels::detail
