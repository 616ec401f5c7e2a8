// Internal: the register-blocked product behind the relative-vector kernels,
// written with GCC vector extensions (no intrinsics) so that it compiles to
// full-width FMAs on the target: 16 floats per vector with AVX-512, 8 with
// AVX, 4 elsewhere.
//
//   C[m, n] (+)= sum_k A(m, k) B[k, n]      m < MR, n < NV * lanes
//
// MR x NV vector accumulators stay in registers for the whole k loop; each
// step loads NV vectors of a B row and broadcasts MR scalars of A.
#pragma once

#include <cstdint>
#include <cstring>

namespace posenc::kernels::detail {

#if defined(__AVX512F__)
inline constexpr int kVectorBytes = 64;
inline constexpr int kVectorRegisters = 32;
#elif defined(__AVX__)
inline constexpr int kVectorBytes = 32;
inline constexpr int kVectorRegisters = 16;
#else
inline constexpr int kVectorBytes = 16;
inline constexpr int kVectorRegisters = 16;
#endif

template <class T>
struct Simd {
  typedef T V __attribute__((vector_size(kVectorBytes)));
  static constexpr int64_t kLanes = kVectorBytes / sizeof(T);
  // memcpy: unaligned, and compiles to one vector load / store.
  static V load(const T* p) noexcept {
    V v;
    std::memcpy(&v, p, sizeof(V));
    return v;
  }
  static void store(T* p, V v) noexcept { std::memcpy(p, &v, sizeof(V)); }
};

constexpr int64_t round_up(int64_t n, int64_t m) noexcept { return (n + m - 1) / m * m; }

// Asks for the cache lines of n elements from `row` on, ahead of their use.
template <class T>
inline void prefetch_row(const T* row, int64_t n) noexcept {
  for (int64_t i = 0; i < n; i += 64 / static_cast<int64_t>(sizeof(T))) __builtin_prefetch(row + i);
}

// How A is stored: A(m, k) = a[m * stride + k] (kRows) or a[k * stride + m] (kColumns).
enum class ALayout { kRows, kColumns };

// One MR x (NV * lanes) tile of C, over k < depth. All MR rows of A and
// whole vectors of B are read (callers pad them); only rows < `rows` and
// columns < `cols` of C are read or written, through a small buffer when the
// tile is partial. Each element of C gets the same sequence of multiply-adds
// whatever the tile shape, so results do not depend on how C is cut into tiles.
template <class T, int MR, int NV, ALayout kLayout>
inline void gemm_tile(int64_t depth, const T* __restrict a, int64_t a_stride, const T* __restrict b, int64_t ldb,
                      T* __restrict c, int64_t ldc, int64_t rows, int64_t cols, bool accumulate) noexcept {
  using S = Simd<T>;
  using V = typename S::V;
  constexpr int64_t kLanes = S::kLanes;
  constexpr int64_t kCols = NV * kLanes;

  const bool full = rows == MR && cols == kCols;
  alignas(64) T edge[MR * kCols];
  T* cp = c;
  int64_t ldcp = ldc;
  if (!full) {
    cp = edge;
    ldcp = kCols;
    for (int64_t m = 0; m < MR * kCols; ++m) edge[m] = T(0);
    if (accumulate) {
      for (int64_t m = 0; m < rows; ++m) std::memcpy(edge + m * kCols, c + m * ldc, cols * sizeof(T));
    }
  }

  V acc[MR][NV];
#pragma GCC unroll 16
  for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[m][v] = accumulate ? S::load(cp + m * ldcp + v * kLanes) : V{};
  }
  for (int64_t k = 0; k < depth; ++k) {
    V bv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) bv[v] = S::load(b + k * ldb + v * kLanes);
#pragma GCC unroll 16
    for (int m = 0; m < MR; ++m) {
      const T am = kLayout == ALayout::kRows ? a[m * a_stride + k] : a[k * a_stride + m];
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[m][v] += am * bv[v];
    }
  }
#pragma GCC unroll 16
  for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) S::store(cp + m * ldcp + v * kLanes, acc[m][v]);
  }

  if (!full) {
    for (int64_t m = 0; m < rows; ++m) std::memcpy(c + m * ldc, edge + m * kCols, cols * sizeof(T));
  }
}

// gemm_tile with NV picked at run time (1 .. 4), for a C tile `nv` vectors wide.
template <class T, int MR, ALayout kLayout>
inline void gemm_tile_nv(int nv, int64_t depth, const T* a, int64_t a_stride, const T* b, int64_t ldb, T* c,
                         int64_t ldc, int64_t rows, int64_t cols, bool accumulate) noexcept {
  switch (nv) {
    case 1: gemm_tile<T, MR, 1, kLayout>(depth, a, a_stride, b, ldb, c, ldc, rows, cols, accumulate); break;
    case 2: gemm_tile<T, MR, 2, kLayout>(depth, a, a_stride, b, ldb, c, ldc, rows, cols, accumulate); break;
    case 3: gemm_tile<T, MR, 3, kLayout>(depth, a, a_stride, b, ldb, c, ldc, rows, cols, accumulate); break;
    default: gemm_tile<T, MR, 4, kLayout>(depth, a, a_stride, b, ldb, c, ldc, rows, cols, accumulate); break;
  }
}

}  // namespace posenc::kernels::detail
