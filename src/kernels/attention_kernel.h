// Internal: the fused forward's class template, declared once for the files
// that define its members (attention.cpp the driver, attention_layout.cpp the
// scratch, attention_scores.cpp a tile's scores and softmax,
// attention_relative.cpp the relative vectors); formula and layouts in attention.h.
//
// Work item: (b, h, a block of BM = 3 vectors of query rows). Per item the
// keys are streamed in tiles of kKeyTile; per tile
//   S^T = K_tile . Q_blk^T      (keys x queries: one vector spans BM/3 queries,
//                                so the softmax statistics are lane-wise and
//                                K and V are read in place, never packed)
//   S^T += terms, masks          (each a contiguous vector per key, see below)
//   online softmax: m = max(m, max_n S^T), P^T = exp(S^T - m), l = l alpha + sum P^T
//   O = O alpha + P^T' . V_tile
// and at the end out = O / l. A row is computed by one thread in one fixed
// order, so results do not depend on the thread count.
//
// The relative terms are addressed along the diagonals of the block. With
// e = j - i0' (key j; i0' the key position of the block's first query), lane m
// has offset d = e - m, so a key's band row c = e + K reads table row
// clip(c - m - K) + K: rows shifted by one per lane. Keys outside the band
// [0, 2K + BM - 1] are clipped to one side on every lane.
//   keys      R[m][y] = (q_m + w) . rel_k[clip(y + c_lo - BM + 1 - K) + K] is one
//             GEMM per block against rel_k transposed once per call (clipping
//             built into its columns); the tile's band rows are R viewed with
//             row stride ldr - 1, transposed lanes x lanes in registers.
//   values    the tile's band rows of P^T are transposed into W[m][c - c_lo]
//             (one key per column), keys outside the band summed into Wlo /
//             Whi (a tile with no band key adds the softmax's tile sum); W
//             keeps each tile's max and is rescaled once at the end;
//             then O += W . rel_v with W read at row stride ldw + 1, which turns
//             column c into table row c - m, plus the clipped sums on rows 0, 2K.
//   2D        Eh[y][m] = Rh^T[y - y_m + Hg - 1][m], Ew[x][m] likewise, from
//             Rh^T = grid_h . Q^T: key (y, x) adds Eh[y] + Ew[x].
//   1D bias   offset_bias read backwards: a contiguous run per key.
// Extra memory: per thread O((Tk + Dh + Dv) * BM) elements; rel_k transposed
// (the size of the reachable rows of the table) when used.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "attention_simd.h"
#include "posenc/kernels/attention.h"
#include "small_gemm.h"

namespace posenc::kernels::detail::attention_fwd {

// Register tiles within the vector register file (32 with AVX-512, else 16):
// S^T = K . Q^T as kKeyRows keys x 3 vectors, O += P^T' . V as kQueryRows
// queries x up to 4 vectors of Dv.
inline constexpr bool kWide = detail::kVectorRegisters >= 32;
inline constexpr int kBlockVectors = 3;
inline constexpr int kKeyRows = kWide ? 8 : 4;
inline constexpr int kQueryRows = kWide ? 6 : 3;
inline constexpr int64_t kKeyTile = 128;  // keys per tile: S^T tile + V tile within L1 / L2
static_assert(kKeyTile % kKeyRows == 0);

template <class T>
class Attention {
  using S = detail::Simd<T>;
  using V = typename S::V;
  static constexpr int64_t kLanes = S::kLanes;
  static constexpr int64_t kBM = kBlockVectors * kLanes;  // query rows per block (lanes of S^T)
  static constexpr int64_t kWideTile = 4 * kLanes;        // columns of a (queries x columns) register tile

 public:
  Attention(const AttentionParams& params, BatchedMatrix<const T> q, BatchedMatrix<const T> k,
            BatchedMatrix<const T> v, const AttentionTerms<T>& terms, BatchedMatrix<T> out, BatchedMatrix<T> weights,
            T* logsumexp);
  void run();

 private:
  // Per-thread buffers (elements of T; lanes run along the block's queries).
  struct Work {
    T *qp, *qc, *qw;      // (Dh, BM): scale q, scale (q + u), scale (q + w)
    T* st;                // (kKeyTile + lanes, BM): S^T, then P^T
    T* o;                 // (BM, Dvp)
    T *m, *l, *ms, *al;   // (BM): running max, sum, max used for exp, rescale factor
    T* ts;                // (BM): the tile's sum of P^T
    T *kpad, *vpad;       // (kKeyRows, Dh), (kKeyTile, Dvp): rows past the end of K / unaligned V
    T *rext, *et, *lohi;  // relative keys: R (BM, ldr), a tile's E rows, R's all-clipped rows
    T *wst, *mt, *wlo;    // relative values: W (BM, ldw), per-tile max, clipped sums (2 BM)
    T *rh, *rw, *eh, *ew; // 2D relative
    T* zero;              // (BM) zeros: the 2D term of an axis without a table
    T* tb;                // the tile bias's scratch
    T* eq;                // relative queries: (BM, 2 BM) products of a sub-tile of keys with its band
    int64_t* gb_off;      // grid bias: per lane offset
  };

  // A work item and its band: rows c = e + K of the keys (e = j - i0') where
  // some lane is unclipped, clamped to [0, 2K + BM - 1]; c_lo <= c_hi always.
  struct Block {
    int64_t b, h, i0, mb, i0p, jend;
    int64_t c_lo = 0, c_hi = -1;
    bool band_keys = false;  // false: every key clipped to one side, the band row is no key's
  };

  Block make_block(int64_t b, int64_t h, int64_t blk) const {
    Block bk{b, h, blk * kBM, std::min(kBM, tq_ - blk * kBM), blk * kBM + shift_, 0};
    bk.jend = p_.causal ? std::min(tk_, bk.i0p + bk.mb) : tk_;
    if ((relk_ || relv_) && bk.jend > 0) {
      const int64_t top = 2 * kd_ + kBM - 1;
      bk.c_lo = std::clamp<int64_t>(kd_ - bk.i0p, 0, top);
      bk.c_hi = std::clamp<int64_t>(bk.jend - 1 - bk.i0p + kd_, 0, top);
      bk.band_keys = kd_ - bk.i0p <= top && bk.jend - 1 - bk.i0p + kd_ >= 0;
    }
    return bk;
  }

  // attention_layout.cpp: sizes, scratch and the inputs shared by the threads.
  void band_extents();
  void layout_scratch();
  Work carve(T* base, int64_t* offsets) const;
  void prepare_shared();

  // attention_relative.cpp: relative keys, values and queries.
  void pack_rel_k();
  void prepare_rel_q();
  void add_rel_q(const Work& w, const Block& bk, int64_t j0, int64_t nn) const;
  void prepare_rel_k(const Work& w, const Block& bk) const;
  void bin_tile(const Work& w, const Block& bk, int64_t j0, int64_t nn) const;
  void finish_values(const Work& w, const Block& bk) const;

  // Rows of rel_k / rel_q: clip(d, -K, K) + K itself, or through rel_index.
  int64_t rel_rows() const noexcept { return t_.rel_index != nullptr ? t_.rel_rows : 2 * kd_ + 1; }
  int64_t table_row(int64_t c) const noexcept { return t_.rel_index != nullptr ? t_.rel_index[c] : c; }

  // O[BM][Dvp] += A . B, A(m, n) = a[n * BM + m] (kColumns) or a[m * lda + n]
  // (kRows), n < depth; B rows ldb apart.
  template <ALayout kLayout>
  void accumulate_o(const Work& w, const T* a, int64_t lda, int64_t depth, const T* bmat, int64_t ldb) const {
    for (int64_t c0 = 0; c0 < dvp_; c0 += kWideTile) {
      const int nv = static_cast<int>(std::min<int64_t>(4, (dvp_ - c0) / kLanes));
      for (int64_t m0 = 0; m0 < kBM; m0 += kQueryRows) {
        const T* am = kLayout == ALayout::kColumns ? a + m0 : a + m0 * lda;
        detail::gemm_tile_nv<T, kQueryRows, kLayout>(nv, depth, am, lda, bmat + c0, ldb, w.o + m0 * dvp_ + c0, dvp_,
                                                     kQueryRows, nv * kLanes, true);
      }
    }
  }

  // The tile's keys [j0, j0 + nn) that fall in the band: [n_a, n_b), first band column.
  struct BandRun {
    int64_t n_a, n_b, cc_a;
  };
  BandRun band_run(const Block& bk, int64_t j0, int64_t nn) const {
    const int64_t first = bk.c_lo - kd_ + bk.i0p - j0, last = bk.c_hi - kd_ + bk.i0p - j0;
    const int64_t n_a = std::clamp<int64_t>(first, 0, nn), n_b = std::clamp<int64_t>(last + 1, 0, nn);
    return {n_a, std::max(n_a, n_b), j0 + n_a - bk.i0p + kd_ - bk.c_lo};
  }

  // attention_scores.cpp: a tile's scores (terms, masks) and its softmax statistics.
  void rows_times_qt(const T* a, int64_t lda, int64_t rows, int64_t avail, const T* xt, T* out, T* pad) const;
  void prepare_axis(const Work& w, const Block& bk, const T* table, int64_t n, const int64_t* coord, int64_t lo,
                    int64_t hi, T* rt, T* e) const;
  void prepare_grid(const Work& w, const Block& bk) const;
  void score_tile(const Work& w, const Block& bk, int64_t j0, int64_t nn, V (&tile_max)[kBlockVectors]) const;
  void finish_scores(const Work& w, const Block& bk, int64_t j0, int64_t nn, V (&tile_max)[kBlockVectors]) const;
  template <bool kRel, bool kGrid, bool kOffset, bool kMasks>
  void finish_keys(const Work& w, const Block& bk, int64_t j0, int64_t nn, const BandRun& run,
                   V (&tile_max)[kBlockVectors]) const;
  using FinishKeys = void (Attention::*)(const Work&, const Block&, int64_t, int64_t, const BandRun&,
                                         V (&)[kBlockVectors]) const;
  template <size_t... kSets>
  static constexpr std::array<FinishKeys, sizeof...(kSets)> finish_table(std::index_sequence<kSets...>);
  static const std::array<FinishKeys, 16> kFinishKeys;
  void softmax_tile(const Work& w, int64_t nn, const V (&mx)[kBlockVectors]) const;

  // attention.cpp: the block loop.
  void pack_queries(const Work& w, const Block& bk) const;
  void block(const Work& w, int64_t b, int64_t h, int64_t blk) const;
  void write_weights(const Work& w, const Block& bk) const;

  const AttentionParams& p_;
  BatchedMatrix<const T> q_, k_, v_;
  const AttentionTerms<T>& t_;
  BatchedMatrix<T> out_, w_;
  T* lse_;
  int64_t nb_, nh_, tq_, tk_, dh_, dv_, dvp_, shift_, kd_, hg_, wg_, nblocks_;
  bool relk_, relv_, relq_, grid_, vector_terms_, weights_, v_direct_;
  int64_t band_max_ = 1, x_first_ = 0, x_last_ = 0, ldr_ = 0, ldw_ = 0, ldx_ = 0, per_thread_ = 0;
  struct {
    int64_t qp, qc, qw, st, o, m, kpad, vpad, rext, et, lohi, wst, mt, wlo, rh, rw, eh, ew, zero, tb, eq;
  } off_{};
  std::vector<T> ob_rev_, relv_pad_, relk_t_, relq_t_;
  int64_t dq_top_ = 0, ldq_ = 0;
  int64_t ob_ld_ = 0;
  const T* relv_base_ = nullptr;
  int64_t relv_first_ = 0, relv_ld_ = 0, relv_table_ = 0;
};

}  // namespace posenc::kernels::detail::attention_fwd
