// Internal: the fused backward's class template, declared once for the files
// that define its members (attention_backward.cpp the driver,
// attention_backward_tables.cpp the per-call tables, scratch and partials,
// attention_backward_tile.cpp one key tile); formulas in attention_backward.h.
//
// Per task a head h, for each batch b in order: K and V of (b, h) are packed
// (K padded rows for dQ += dS K, K^T and V^T for S = Q K^T and dP = dO V^T). Then per query tile
// of kBM rows (Q, dO, D = rowsum(dO * out) and lse packed), per key tile of
// kBN keys:
//   S   = scale (q + u) K^T + terms, masks;  P = exp(S - lse)
//   dV += P^T dO;  dP = dO V^T (+ rel_v);  dS = P (dP - D)
//   dK += dS^T scale (q + u);  dQ += dS K (+ rel_k, grid)
// The relative terms live on the tile's diagonals: pair (m, n) has offset
// d = j0 + n - i0' - m, so the tile reaches W = kBM + kBN - 1 offsets, band
// column y = n - m + kBM - 1. The tables are expanded once per call to one
// row per reachable offset x (d = x + d_min, table row clip(d) + K); a tile
// reads W consecutive rows from x0. Gathers and scatters along the diagonals
// turn the band products into the pairwise terms:
//   R  = scale (q + w) band^T,  S[m][n] += R[m][n - m + kBM - 1]
//   Gd[m][y] = dS[m][y - kBM + 1 + m]:  dQ += Gd band,  dband += Gd^T scale (q + w)
// and likewise for rel_v with P and dO. The per-offset gradients are folded
// into the clipped table rows at the end.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "attention_simd.h"
#include "posenc/kernels/attention_backward.h"
#include "small_gemm.h"

namespace posenc::kernels::detail::attention_bwd {

inline constexpr bool kWide = detail::kVectorRegisters >= 32;
inline constexpr int kMR = kWide ? 6 : 3;  // rows of a register tile (4 vectors wide)
inline constexpr int64_t kBM = 48;         // queries per tile: a multiple of kMR
inline constexpr int64_t kBN = 64;         // keys per tile
inline constexpr int64_t kBand = kBM + kBN - 1;
static_assert(kBM % kMR == 0);

// Rows of q, k, v, dO and O are met once per head, long after the forward
// wrote them (L3 at best): fetched this many rows ahead, the copies in
// pack_head and pack_queries stop waiting on each row's first load (7 % of a
// small model's training step).
inline constexpr int64_t kRowsAhead = 8;

// C (rows x cols) (+)= A . B over `depth`, A(m, k) by layout, B rows ldb
// apart. Reads whole vectors of B rows and kMR-row groups of A: callers pad
// rows to whole vectors and leave slack after their buffers. Column panels
// outside, so a panel of B stays in L1 across the row tiles.
template <class T, ALayout kLayout>
void matmul(int64_t rows, int64_t cols, int64_t depth, const T* a, int64_t a_stride, const T* b, int64_t ldb, T* c,
            int64_t ldc, bool accumulate) noexcept {
  constexpr int64_t kLanes = detail::Simd<T>::kLanes, kPanel = 4 * kLanes;
  for (int64_t c0 = 0; c0 < cols; c0 += kPanel) {
    const int64_t nc = std::min(kPanel, cols - c0);
    const int nv = static_cast<int>((nc + kLanes - 1) / kLanes);
    for (int64_t m0 = 0; m0 < rows; m0 += kMR) {
      const T* am = kLayout == ALayout::kColumns ? a + m0 : a + m0 * a_stride;
      detail::gemm_tile_nv<T, kMR, kLayout>(nv, depth, am, a_stride, b + c0, ldb, c + m0 * ldc + c0, ldc,
                                            std::min<int64_t>(kMR, rows - m0), nc, accumulate);
    }
  }
}

template <class T>
class Backward {
  using S = detail::Simd<T>;
  using V = typename S::V;
  static constexpr int64_t kLanes = S::kLanes;
  static constexpr int64_t kTileLd = kBN + 16;  // rows of S, P, dS; slack for kMR-row reads in column layout

 public:
  Backward(const AttentionParams& params, BatchedMatrix<const T> q, BatchedMatrix<const T> k,
           BatchedMatrix<const T> v, const AttentionTerms<T>& terms, BatchedMatrix<const T> out, const T* lse,
           BatchedMatrix<const T> grad_out, const AttentionGradients<T>& grads);
  void run();

 private:
  // Per-thread buffers.
  struct Work {
    T *kp, *kt, *vt;           // K rows (Tk, Dhp), K^T (Dh, ldk), V^T (Dv, ldk)
    T *qc, *qw, *qs, *go;      // (kBM, Dhp): scale (q+u), scale (q+w), scale q; dO (kBM, Dvp)
    T *dd, *ls;                // (kBM): D, lse
    T *s, *p, *dp;             // (kBM, kTileLd)
    T *dqc, *dqr, *dqg;        // (kBM, Dhp): dS K, Gd rel_k, grid
    T *r, *gd;                 // (kBM, ldg): band products (or a clipped rel_v row), diagonal scatter
    T *rh, *rw, *drh, *drw;    // (kBM, ldh | ldw): grid axes
    int64_t* runs;             // a key tile's grid rows: (first key, y, first x) per run
    // Table-gradient partials of the task's head (one table: its own, or the shared one).
    T *du, *dw, *drk, *drv, *dgh, *dgw, *dob, *dgb;
    T *rq, *gq;                // relative queries: (kBN, ldg) band products K band^T, diagonal scatter of dS
    T* drq;                    // its table-gradient partial (offset rows, unscaled)
    T* tb;                     // the tile bias's scratch
    double* dtb;               // its parameter-gradient partial (the task's head), or null
  };

  // attention_backward_tables.cpp: the relative and grid tables once per call,
  // the scratch and partials' layout, the fold of each head's partials.
  void prepare_tables();
  void layout_scratch();
  Work carve(T* base) const;
  void set_partials(Work& w, T* part) const;
  void fold_partials(const T* part, int64_t h) const;

  // attention_backward.cpp: the outputs zeroed, a head's packing and its query tiles.
  void zero_outputs() const;
  void pack_head(const Work& w, int64_t b, int64_t h) const;
  void head(const Work& w, int64_t b, int64_t h) const;
  void pack_queries(const Work& w, int64_t b, int64_t h, int64_t i0, int64_t mb) const;
  void query_tile(const Work& w, int64_t b, int64_t h, int64_t i0) const;
  void finish_axis(const T* dr, int64_t ld, int64_t rows, const T* table_rows, T* dtable, const Work& w,
                   int64_t mb) const;

  // attention_backward_tile.cpp: one key tile of a query tile.
  int64_t grid_runs(int64_t* runs, int64_t j0, int64_t nn) const noexcept;
  void gather_diagonals(const T* band, T* dst, int64_t mb, int64_t nn) const;
  void scatter_diagonals(const T* src, T* band, int64_t mb, int64_t nn) const;
  void key_tile(const Work& w, int64_t b, int64_t h, int64_t i0, int64_t mb, int64_t j0, int64_t nn,
                const int64_t* ys, const int64_t* xs) const;

  // Table row of offset d: clip(d, -K, K) + K itself, or through rel_index.
  int64_t row_of(int64_t d) const noexcept {
    const int64_t c = clip(d, kd_) + kd_;
    return t_.rel_index != nullptr ? t_.rel_index[c] : c;
  }

  // d = j0 + n - i0' - m lies at band column y = n - m + kBM - 1; the band starts at offset row x0.
  int64_t band_start(int64_t i0p, int64_t j0) const { return j0 - i0p - (kBM - 1) - d_min_; }

  const AttentionParams& p_;
  BatchedMatrix<const T> q_, k_, v_;
  const AttentionTerms<T>& t_;
  BatchedMatrix<const T> out_;
  const T* lse_;
  BatchedMatrix<const T> go_;
  const AttentionGradients<T>& g_;
  int64_t nb_, nh_, tq_, tk_, dh_, dv_, dhp_, dvp_, shift_, kd_, hg_, wg_;
  T scale_;
  bool relk_, relv_, relq_, gridh_, gridw_;
  int64_t rel_rows_;
  int64_t d_min_, nx_, ldx_, ldk_, ldg_, nob_, ngb_, ldh_, ldw_;
  int64_t per_thread_ = 0, partial_size_ = 0;
  struct {
    int64_t kp, kt, vt, qc, qw, qs, go, dd, s, p, dp, dqc, r, rh, rw, tb, rq;
  } off_{};
  struct {
    int64_t du, dw, drk, drv, dgh, dgw, dob, dgb, drq;
  } part_{};
  std::vector<T> rkx_, rkt_, rvt_, pqx_, pqt_, ghp_, ght_, gwp_, gwt_;
};

}  // namespace posenc::kernels::detail::attention_bwd
