// Internal: the pieces the fused attention's forward and backward share
// (attention.cpp, attention_backward.cpp), the vector ones written with the
// GCC vector extensions of small_gemm.h: exp over a vector, lane indices, the
// per-thread scratch allocation, the parallel threshold, offset clipping, and
// sums and dot products over lanes (also CoPE's).
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>
#include <utility>

#include "small_gemm.h"

namespace posenc::kernels::detail {

// Below this much work (multiply-adds) a parallel region costs more than it saves.
inline constexpr int64_t kParallelWork = int64_t{1} << 18;

// A relative offset clipped to [-k, k].
inline int64_t clip(int64_t d, int64_t k) noexcept { return d < -k ? -k : d > k ? k : d; }

// The integer vector with T's lane count (comparison masks, exponent bits).
template <class T>
struct SimdInt;
template <>
struct SimdInt<float> {
  typedef int32_t I __attribute__((vector_size(kVectorBytes)));
};
template <>
struct SimdInt<double> {
  typedef int64_t I __attribute__((vector_size(kVectorBytes)));
};

template <class To, class From>
inline To vector_cast(From from) noexcept {
  static_assert(sizeof(To) == sizeof(From));
  To to;
  std::memcpy(&to, &from, sizeof(To));
  return to;
}

// Constants of exp: Cody-Waite split of ln 2, the round-to-nearest shifter
// 1.5 * 2^mantissa_bits, and the smallest argument with a normal result.
template <class T>
struct ExpConstants;
template <>
struct ExpConstants<float> {
  static constexpr float kLog2e = 1.44269504088896341f, kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  static constexpr float kShifter = 12582912.0f, kLowest = -87.0f;
  static constexpr int32_t kBias = 127, kMantissa = 23;
};
template <>
struct ExpConstants<double> {
  static constexpr double kLog2e = 1.4426950408889634074, kLn2Hi = 6.93145751953125e-1,
                          kLn2Lo = 1.42860682030941723212e-6;
  static constexpr double kShifter = 6755399441055744.0, kLowest = -708.0;
  static constexpr int64_t kBias = 1023, kMantissa = 52;
};

// exp(x) lane by lane for x <= 0: n = round(x / ln 2), r = x - n ln 2 in
// [-ln2/2, ln2/2], exp(r) by a polynomial (Cephes expf: 1 ulp; degree-13
// Taylor for double: truncation 4e-18), times 2^n built in the exponent bits.
// x below kLowest (including -inf) gives exactly 0, so masked keys
// get probability 0; what is lost there is below 2^-125 (2^-1021) of the
// row's largest term.
// NaN gives NaN, so a NaN or +inf logit spoils its row as in a plain softmax.
template <class T>
inline typename Simd<T>::V exp_nonpositive(typename Simd<T>::V x) noexcept {
  using V = typename Simd<T>::V;
  using I = typename SimdInt<T>::I;
  using C = ExpConstants<T>;
  const V zero{};
  const V x0 = x;
  const auto live = x >= C::kLowest;
  x = live ? x : zero;
  const V t = x * C::kLog2e + C::kShifter;
  const V n = t - C::kShifter;
  V r = x - n * C::kLn2Hi;
  r = r - n * C::kLn2Lo;
  V p;
  if constexpr (sizeof(T) == 4) {
    p = T(1.9875691500e-4f) * r + T(1.3981999507e-3f);
    p = p * r + T(8.3334519073e-3f);
    p = p * r + T(4.1665795894e-2f);
    p = p * r + T(1.6666665459e-1f);
    p = p * r + T(5.0000001201e-1f);
    p = p * (r * r) + r + T(1);
  } else {
    constexpr double kInverseFactorial[] = {1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0,
                                            1.0 / 3628800.0,    1.0 / 362880.0,    1.0 / 40320.0,
                                            1.0 / 5040.0,       1.0 / 720.0,       1.0 / 120.0,
                                            1.0 / 24.0,         1.0 / 6.0,         0.5,
                                            1.0,                1.0};
    p = zero + kInverseFactorial[0];
    for (int c = 1; c < 14; ++c) p = p * r + kInverseFactorial[c];
  }
  // t's low mantissa bits hold n: 2^n = (n + bias) << mantissa.
  const I ni = vector_cast<I>(t) - vector_cast<I>(zero + C::kShifter);
  const V scale = vector_cast<V>((ni + C::kBias) << C::kMantissa);
  // NaN stays NaN (a NaN logit, or +inf - +inf), as in the composed softmax.
  return live ? p * scale : (x0 == x0 ? zero : x0);
}

// (0, 1, 2, ...) in T.
template <class T>
inline typename Simd<T>::V lane_index() noexcept {
  typename Simd<T>::V v;
  for (int64_t l = 0; l < Simd<T>::kLanes; ++l) v[l] = T(l);
  return v;
}

template <class T>
inline typename Simd<T>::V broadcast(T x) noexcept {
  return typename Simd<T>::V{} + x;
}

// L x L transpose (L = lanes) in registers: log2 L stages; stage s swaps the
// off-diagonal s x s quadrants of every 2s x 2s block, pairing rows i and i + s
// with two-input shuffles.
template <class T, int64_t kStage, bool kHigh, size_t... Is>
inline typename SimdInt<T>::I transpose_mask(std::index_sequence<Is...>) noexcept {
  using I = typename SimdInt<T>::I;
  using E = std::remove_reference_t<decltype(I{}[0])>;
  constexpr int64_t kL = Simd<T>::kLanes;
  return I{static_cast<E>(kHigh ? ((int64_t(Is) % (2 * kStage)) < kStage ? int64_t(Is) + kStage : kL + int64_t(Is))
                                : ((int64_t(Is) % (2 * kStage)) < kStage ? int64_t(Is) : kL + int64_t(Is) - kStage))...};
}

template <class T, int64_t kStage>
inline void transpose_stage(typename Simd<T>::V* r) noexcept {
  constexpr int64_t kL = Simd<T>::kLanes;
  const auto lo = transpose_mask<T, kStage, false>(std::make_index_sequence<kL>{});
  const auto hi = transpose_mask<T, kStage, true>(std::make_index_sequence<kL>{});
#pragma GCC unroll 16
  for (int64_t i = 0; i < kL; ++i) {
    if ((i & kStage) != 0) continue;
    const auto a = r[i], b = r[i + kStage];
    r[i] = __builtin_shuffle(a, b, lo);
    r[i + kStage] = __builtin_shuffle(a, b, hi);
  }
  if constexpr (kStage > 1) transpose_stage<T, kStage / 2>(r);
}

// dst[c * ldd + i] = src[i * lds + c] for i, c < lanes (unaligned rows).
template <class T>
inline void transpose_block(const T* src, int64_t lds, T* dst, int64_t ldd) noexcept {
  using S = Simd<T>;
  typename S::V r[S::kLanes];
#pragma GCC unroll 16
  for (int64_t i = 0; i < S::kLanes; ++i) r[i] = S::load(src + i * lds);
  transpose_stage<T, S::kLanes / 2>(r);
#pragma GCC unroll 16
  for (int64_t i = 0; i < S::kLanes; ++i) S::store(dst + i * ldd, r[i]);
}

// Lane l + width (mod lanes) to lane l: the tree's step of that width, in registers.
template <class T, int64_t kWidth, size_t... Is>
inline typename SimdInt<T>::I fold_mask(std::index_sequence<Is...>) noexcept {
  using I = typename SimdInt<T>::I;
  using E = std::remove_reference_t<decltype(I{}[0])>;
  return I{static_cast<E>((int64_t(Is) + kWidth) % Simd<T>::kLanes)...};
}

// lanes[l] += lanes[l + width] for width = lanes / 2, ..., 1; the sum in lane 0.
template <class T, int64_t kWidth = Simd<T>::kLanes / 2>
inline T tree_over_lanes(typename Simd<T>::V acc) noexcept {
  if constexpr (kWidth == 0) {
    return acc[0];
  } else {
    acc += __builtin_shuffle(acc, fold_mask<T, kWidth>(std::make_index_sequence<Simd<T>::kLanes>{}));
    return tree_over_lanes<T, kWidth / 2>(acc);
  }
}

// Sum and dot product through one vector of partial sums, then a tree over its
// lanes: a plain running sum is one serial chain of adds that the compiler may
// not reorder (four cycles an element where a vector takes one for sixteen).
// The tail (fewer than lanes elements) after the tree, one by one: through a
// zero-padded buffer it was slower (the scalar stores do not forward to the vector load).
template <class T>
inline T lane_sum(const T* a, int64_t n) noexcept {
  using S = Simd<T>;
  typename S::V acc{};
  int64_t i = 0;
  for (; i + S::kLanes <= n; i += S::kLanes) acc += S::load(a + i);
  T r = tree_over_lanes<T>(acc);
  for (; i < n; ++i) r += a[i];
  return r;
}

template <class T>
inline T lane_dot(const T* a, const T* b, int64_t n) noexcept {
  using S = Simd<T>;
  typename S::V acc{};
  int64_t i = 0;
  for (; i + S::kLanes <= n; i += S::kLanes) acc += S::load(a + i) * S::load(b + i);
  T r = tree_over_lanes<T>(acc);
  for (; i < n; ++i) r += a[i] * b[i];
  return r;
}

// An odd number of cache lines at least n elements long: rows this far apart
// fall in different L1 sets.
template <class T>
int64_t padded_stride(int64_t n) noexcept {
  const int64_t lines = round_up(n * static_cast<int64_t>(sizeof(T)), 64) / 64;
  return (lines | 1) * 64 / static_cast<int64_t>(sizeof(T));
}

// One 64-byte aligned allocation cut into equal per-thread slices of
// `per_thread` elements (rounded up to whole cache lines), left uninitialized.
template <class T>
class ThreadScratch {
 public:
  ThreadScratch(int threads, int64_t per_thread)
      : per_(round_up(per_thread < 1 ? 1 : per_thread, kAlign)), raw_(new T[threads * per_ + kAlign]) {
    const auto addr = reinterpret_cast<uintptr_t>(raw_.get());
    base_ = raw_.get() + (round_up(static_cast<int64_t>(addr), 64) - static_cast<int64_t>(addr)) / sizeof(T);
  }
  T* slice(int thread) const noexcept { return base_ + thread * per_; }

 private:
  static constexpr int64_t kAlign = 64 / sizeof(T);
  int64_t per_;
  std::unique_ptr<T[]> raw_;
  T* base_ = nullptr;
};

}  // namespace posenc::kernels::detail
