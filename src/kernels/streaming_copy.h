// Internal: write rows to memory that will not be read again soon, with
// non-temporal stores where the target has them. A large table written with
// ordinary stores first reads every line it writes (read-for-ownership);
// streaming stores skip that read, which is half the traffic. Used by the
// sinusoid tables, the relative logits and the attention biases.
#pragma once

#include <algorithm>
#include <cstdint>

#if defined(__AVX__)
#include <immintrin.h>
#endif

namespace posenc::kernels::detail {

// Outputs above this size bypass the cache; smaller ones are likely read next.
inline constexpr int64_t kStreamingBytes = int64_t{4} << 20;

#if defined(__AVX512F__)
inline constexpr int64_t kStreamBytes = 64;
inline void stream_store(float* p, const float* src) noexcept { _mm512_stream_ps(p, _mm512_loadu_ps(src)); }
inline void stream_store(double* p, const double* src) noexcept { _mm512_stream_pd(p, _mm512_loadu_pd(src)); }
inline void stream_fill(float* p, float v) noexcept { _mm512_stream_ps(p, _mm512_set1_ps(v)); }
inline void stream_fill(double* p, double v) noexcept { _mm512_stream_pd(p, _mm512_set1_pd(v)); }
#elif defined(__AVX__)
inline constexpr int64_t kStreamBytes = 32;
inline void stream_store(float* p, const float* src) noexcept { _mm256_stream_ps(p, _mm256_loadu_ps(src)); }
inline void stream_store(double* p, const double* src) noexcept { _mm256_stream_pd(p, _mm256_loadu_pd(src)); }
inline void stream_fill(float* p, float v) noexcept { _mm256_stream_ps(p, _mm256_set1_ps(v)); }
inline void stream_fill(double* p, double v) noexcept { _mm256_stream_pd(p, _mm256_set1_pd(v)); }
#endif

// dst[0 .. n) = src[0 .. n) with streaming stores: scalar head up to the
// vector alignment, vector body, scalar tail. T is float or double.
template <class T>
inline void copy_streaming(const T* src, T* dst, int64_t n) noexcept {
#if defined(__AVX__)
  int64_t k = 0;
  while (k < n && (reinterpret_cast<uintptr_t>(dst + k) & (kStreamBytes - 1)) != 0) {
    dst[k] = src[k];
    ++k;
  }
  constexpr int64_t kLanes = kStreamBytes / sizeof(T);
  for (; k + kLanes <= n; k += kLanes) stream_store(dst + k, src + k);
  for (; k < n; ++k) dst[k] = src[k];
#else
  std::copy(src, src + n, dst);
#endif
}

// dst[0 .. n) = value with streaming stores.
template <class T>
inline void fill_streaming(T* dst, int64_t n, T value) noexcept {
#if defined(__AVX__)
  int64_t k = 0;
  while (k < n && (reinterpret_cast<uintptr_t>(dst + k) & (kStreamBytes - 1)) != 0) dst[k++] = value;
  constexpr int64_t kLanes = kStreamBytes / sizeof(T);
  for (; k + kLanes <= n; k += kLanes) stream_fill(dst + k, value);
  for (; k < n; ++k) dst[k] = value;
#else
  std::fill(dst, dst + n, value);
#endif
}

// The two above when `streaming`, else plain stores.
template <class T>
inline void copy_row(const T* src, T* dst, int64_t n, bool streaming) noexcept {
  if (streaming) {
    copy_streaming(src, dst, n);
  } else {
    std::copy(src, src + n, dst);
  }
}
template <class T>
inline void fill_row(T* dst, int64_t n, T value, bool streaming) noexcept {
  if (streaming) {
    fill_streaming(dst, n, value);
  } else {
    std::fill(dst, dst + n, value);
  }
}

// Orders this thread's streaming stores before what follows (a barrier).
inline void streaming_fence() noexcept {
#if defined(__AVX__)
  _mm_sfence();
#endif
}

}  // namespace posenc::kernels::detail
