// Internal: copy a row to memory that will not be read again soon, with
// non-temporal stores where the target has them. A large table written with
// ordinary stores first reads every line it writes (read-for-ownership);
// streaming stores skip that read, which is half the traffic.
#pragma once

#include <algorithm>
#include <cstdint>

#if defined(__AVX__)
#include <immintrin.h>
#endif

namespace posenc::kernels::detail {

// Tables above this size bypass the cache; smaller ones are likely read next.
inline constexpr int64_t kStreamingBytes = int64_t{4} << 20;

template <class T>
inline void copy_streaming(const T* src, T* dst, int64_t n) noexcept {
#if defined(__AVX__)
  int64_t k = 0;
  // Scalar head up to 32-byte alignment, vector body, scalar tail.
  while (k < n && (reinterpret_cast<uintptr_t>(dst + k) & 31) != 0) {
    dst[k] = src[k];
    ++k;
  }
  constexpr int64_t kLanes = 32 / sizeof(T);
  for (; k + kLanes <= n; k += kLanes) {
    if constexpr (sizeof(T) == 4) {
      _mm256_stream_ps(reinterpret_cast<float*>(dst + k), _mm256_loadu_ps(reinterpret_cast<const float*>(src + k)));
    } else {
      _mm256_stream_pd(reinterpret_cast<double*>(dst + k), _mm256_loadu_pd(reinterpret_cast<const double*>(src + k)));
    }
  }
  for (; k < n; ++k) dst[k] = src[k];
#else
  std::copy(src, src + n, dst);
#endif
}

// Orders this thread's streaming stores before what follows (a barrier).
inline void streaming_fence() noexcept {
#if defined(__AVX__)
  _mm_sfence();
#endif
}

}  // namespace posenc::kernels::detail
