// Fused attention forward (formula and layouts in attention.h).
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
#include "posenc/kernels/attention.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "attention_simd.h"
#include "posenc/error.h"
#include "small_gemm.h"

namespace posenc::kernels {

namespace {

using detail::ALayout;
using detail::clip;
using detail::kParallelWork;
using detail::round_up;

// Register tiles within the vector register file (32 with AVX-512, else 16):
// S^T = K . Q^T as kKeyRows keys x 3 vectors, O += P^T' . V as kQueryRows
// queries x up to 4 vectors of Dv.
constexpr bool kWide = detail::kVectorRegisters >= 32;
constexpr int kBlockVectors = 3;
constexpr int kKeyRows = kWide ? 8 : 4;
constexpr int kQueryRows = kWide ? 6 : 3;
constexpr int64_t kKeyTile = 128;  // keys per tile: S^T tile + V tile within L1 / L2
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
            T* logsumexp)
      : p_(params), q_(q), k_(k), v_(v), t_(terms), out_(out), w_(weights), lse_(logsumexp) {
    nb_ = q.batch, nh_ = q.heads, tq_ = q.rows, tk_ = k.rows, dh_ = q.cols, dv_ = v.cols;
    dvp_ = round_up(dv_, kLanes);
    shift_ = tk_ - tq_;
    kd_ = t_.max_distance;
    relk_ = t_.rel_k != nullptr && dh_ > 0;  // with Dh = 0 the term is 0
    relv_ = t_.rel_v != nullptr && dv_ > 0;
    relq_ = t_.rel_q != nullptr && dh_ > 0;
    grid_ = t_.grid_h != nullptr || t_.grid_w != nullptr;
    hg_ = t_.grid_height, wg_ = t_.grid_width;
    vector_terms_ = relk_ || grid_ || t_.offset_bias != nullptr;
    weights_ = w_.data != nullptr;
    v_direct_ = dv_ % kLanes == 0;
    nblocks_ = (tq_ + kBM - 1) / kBM;
    if (relk_ || relv_) band_extents();
    layout_scratch();
  }

  void run() {
    if (nb_ == 0 || nh_ == 0 || tq_ == 0) return;
    prepare_shared();
    const int64_t items = nb_ * nh_ * nblocks_;
    const int64_t work = nb_ * nh_ * tq_ * tk_ * (dh_ + dv_ + 1);
    const int threads = work < kParallelWork ? 1 : std::max(1, omp_get_max_threads());
    detail::ThreadScratch<T> scratch(threads, per_thread_);
    detail::ThreadScratch<int64_t> offsets(threads, t_.grid_bias != nullptr ? kBM : 0);
#pragma omp parallel num_threads(threads)
    {
      const Work w = carve(scratch.slice(omp_get_thread_num()), offsets.slice(omp_get_thread_num()));
      if (relk_) pack_rel_k();  // ends with a barrier
#pragma omp for schedule(dynamic, 1)
      for (int64_t it = 0; it < items; ++it) {
        // Causal blocks near the end cost the most: hand them out first.
        const int64_t b = it / (nh_ * nblocks_), h = it / nblocks_ % nh_, n = it % nblocks_;
        block(w, b, h, p_.causal ? nblocks_ - 1 - n : n);
      }
    }
  }

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

  // Largest band and the range of (unclipped) table rows r - m any block's R reaches.
  void band_extents() {
    band_max_ = 1;
    x_first_ = std::numeric_limits<int64_t>::max(), x_last_ = std::numeric_limits<int64_t>::min();
    for (int64_t blk = 0; blk < nblocks_; ++blk) {
      const Block bk = make_block(0, 0, blk);
      if (bk.jend == 0) continue;
      band_max_ = std::max(band_max_, bk.c_hi - bk.c_lo + 1);
      x_first_ = std::min(x_first_, bk.c_lo - (kBM - 1));
      x_last_ = std::max(x_last_, bk.c_hi);
    }
    if (x_first_ > x_last_) x_first_ = x_last_ = 0;
  }

  void layout_scratch() {
    const int64_t bm = kBM;
    int64_t n = 0;
    const auto take = [&](int64_t count) {
      const int64_t at = n;
      n += round_up(count, 64 / static_cast<int64_t>(sizeof(T)));
      return at;
    };
    off_.qp = take(dh_ * bm);
    off_.qc = t_.content_shift != nullptr ? take(dh_ * bm) : off_.qp;
    off_.qw = relk_ && t_.relative_shift != nullptr ? take(dh_ * bm) : off_.qp;
    off_.st = take((kKeyTile + kLanes) * bm);
    off_.o = take(bm * dvp_);
    off_.m = take(5 * bm);
    off_.kpad = take(kKeyRows * dh_);
    off_.vpad = v_direct_ ? 0 : take(kKeyTile * dvp_);
    const int64_t ntiles = (tk_ + kKeyTile - 1) / kKeyTile;
    if (relk_) {
      // R columns y < W = band + BM - 1, computed (and read by the transposes) past W + lanes.
      ldr_ = detail::padded_stride<T>(round_up(band_max_ + bm + kLanes, kWideTile));
      off_.rext = take(bm * ldr_);
      off_.et = take((kKeyTile + kLanes) * bm);
      off_.lohi = take(2 * bm);
    }
    if (relv_) {
      // W columns: BM zeros, the band (written up to a whole block of lanes past it), zeros.
      ldw_ = detail::padded_stride<T>(bm + round_up(band_max_, kLanes) + bm + kLanes);
      off_.wst = take(bm * ldw_);
      off_.mt = take(ntiles * bm);
      off_.wlo = take(2 * bm);
    }
    if (grid_) {
      off_.rh = take(round_up(2 * hg_ - 1, kKeyRows) * bm);
      off_.rw = take(round_up(2 * wg_ - 1, kKeyRows) * bm);
      off_.eh = take(hg_ * bm);
      off_.ew = take(wg_ * bm);
      off_.zero = take(bm);
    }
    if (t_.tile_bias != nullptr) off_.tb = take(t_.tile_bias->scratch_size(bm, kKeyTile));
    if (relq_) off_.eq = take(bm * 2 * bm);
    per_thread_ = n;
  }

  Work carve(T* base, int64_t* offsets) const {
    Work w{};
    w.qp = base + off_.qp, w.qc = base + off_.qc, w.qw = base + off_.qw;
    w.st = base + off_.st, w.o = base + off_.o;
    w.m = base + off_.m, w.l = w.m + kBM, w.ms = w.l + kBM, w.al = w.ms + kBM, w.ts = w.al + kBM;
    w.kpad = base + off_.kpad, w.vpad = base + off_.vpad;
    w.rext = base + off_.rext, w.et = base + off_.et, w.lohi = base + off_.lohi;
    w.wst = base + off_.wst, w.mt = base + off_.mt, w.wlo = base + off_.wlo;
    w.rh = base + off_.rh, w.rw = base + off_.rw, w.eh = base + off_.eh, w.ew = base + off_.ew;
    w.zero = base + off_.zero;
    if (grid_) std::fill(w.zero, w.zero + kBM, T(0));
    w.tb = base + off_.tb;
    w.eq = base + off_.eq;
    w.gb_off = offsets;
    // Rows past a tile's keys are read by whole-block transposes (never used): keep them finite.
    std::fill(w.st, w.st + (kKeyTile + kLanes) * kBM, T(0));
    if (relv_) {
      for (int64_t m = 0; m < kBM; ++m) std::fill(w.wst + m * ldw_, w.wst + m * ldw_ + kBM, T(0));
    }
    return w;
  }

  // Shared read-only inputs derived once per call: the offset bias reversed
  // (so a key reads a contiguous run over the block's lanes) and, when Dv is
  // not whole vectors, the reachable rows of rel_v padded to Dvp.
  void prepare_shared() {
    if (t_.offset_bias != nullptr) {
      ob_ld_ = tq_ + tk_ - 1 + kBM;
      ob_rev_.assign(static_cast<size_t>(nh_ * ob_ld_), T(0));
      for (int64_t h = 0; h < nh_; ++h) {
        const T* src = t_.offset_bias + h * (tq_ + tk_ - 1);
        T* dst = ob_rev_.data() + h * ob_ld_;
        for (int64_t x = 0; x < tq_ + tk_ - 1; ++x) dst[x] = src[tq_ + tk_ - 2 - x];
      }
    }
    if (relk_) {
      ldx_ = round_up(x_last_ - x_first_ + 1 + kLanes, kWideTile) + kWideTile;
      relk_t_.resize(static_cast<size_t>(t_.rel_tables * dh_ * ldx_));
    }
    if (relq_) prepare_rel_q();
    if (relv_ && tk_ > 0) {
      const int64_t rows = 2 * kd_ + 1, nt = t_.rel_tables;
      // Padded lanes reach below the valid queries' rows: start where the block's rows can.
      relv_first_ = clip(-(tk_ - 1) - (kBM - 1), kd_) + kd_;
      const int64_t reach = clip(tq_ - 1, kd_) + kd_ - relv_first_ + 1;
      if (v_direct_) {
        relv_ld_ = dv_, relv_table_ = rows * dv_;
        relv_base_ = t_.rel_v + relv_first_ * dv_;
      } else {
        relv_ld_ = dvp_, relv_table_ = reach * dvp_;
        relv_pad_.assign(static_cast<size_t>(nt * reach * dvp_), T(0));
        for (int64_t t = 0; t < nt; ++t)
          for (int64_t r = 0; r < reach; ++r)
            std::memcpy(relv_pad_.data() + (t * reach + r) * dvp_, t_.rel_v + (t * rows + relv_first_ + r) * dv_,
                        static_cast<size_t>(dv_) * sizeof(T));
        relv_base_ = relv_pad_.data();
      }
    }
  }

  // rel_k transposed, column x = row clip(x + x_first - K) + K: a block's R is
  // then one product over contiguous columns with the clipping built in.
  // Tasks of (table, lanes rows of Dh); unclipped columns by register transposes.
  void pack_rel_k() {
    const int64_t rows = rel_rows(), nx = x_last_ - x_first_ + 1;
    const int64_t dblocks = (dh_ + kLanes - 1) / kLanes;
#pragma omp for schedule(static)
    for (int64_t task = 0; task < t_.rel_tables * dblocks; ++task) {
      const int64_t t = task / dblocks, d0 = task % dblocks * kLanes, dn = std::min(kLanes, dh_ - d0);
      const T* src = t_.rel_k + t * rows * dh_ + d0;
      T* dst = relk_t_.data() + (t * dh_ + d0) * ldx_;
      for (int64_t x = 0; x < nx; x += kLanes) {
        const int64_t r = x + x_first_;
        if (t_.rel_index == nullptr && dn == kLanes && x + kLanes <= nx && r >= 0 && r + kLanes - 1 <= 2 * kd_) {
          detail::transpose_block(src + r * dh_, dh_, dst + x, ldx_);
          continue;
        }
        for (int64_t d = 0; d < dn; ++d) {
          for (int64_t c = x; c < std::min(nx, x + kLanes); ++c) {
            dst[d * ldx_ + c] = src[table_row(std::clamp<int64_t>(c + x_first_, 0, 2 * kd_)) * dh_ + d];
          }
        }
      }
      for (int64_t d = 0; d < dn; ++d) std::fill(dst + d * ldx_ + nx, dst + (d + 1) * ldx_, T(0));
    }
  }

  // Rows of rel_k / rel_q: clip(d, -K, K) + K itself, or through rel_index.
  int64_t rel_rows() const noexcept { return t_.rel_index != nullptr ? t_.rel_rows : 2 * kd_ + 1; }
  int64_t table_row(int64_t c) const noexcept { return t_.rel_index != nullptr ? t_.rel_index[c] : c; }

  // scale * rel_q transposed with its columns by decreasing offset, one per
  // offset a block can reach: column x is offset d = dq_top - x, so a key's
  // lanes (d falling with m) read a contiguous run.
  void prepare_rel_q() {
    dq_top_ = tq_ + kBM - 2;  // largest j1 + BM - 1 - i0' of a key sub-tile (add_rel_q)
    ldq_ = detail::padded_stride<T>(round_up(tq_ + tk_ + 2 * kBM, kLanes));
    relq_t_.assign(static_cast<size_t>(t_.rel_tables * dh_ * ldq_), T(0));
    const T scale = static_cast<T>(p_.scale);
    const int64_t rows = rel_rows();
    for (int64_t t = 0; t < t_.rel_tables; ++t) {
      for (int64_t x = 0; x < ldq_; ++x) {
        const T* src = t_.rel_q + (t * rows + table_row(clip(dq_top_ - x, kd_) + kd_)) * dh_;
        for (int64_t d = 0; d < dh_; ++d) relq_t_[(t * dh_ + d) * ldq_ + x] = scale * src[d];
      }
    }
  }

  // Relative queries (DeBERTa's p2c): per sub-tile of BM keys from j1 one GEMM
  // E[n][y] = k_n . scale rel_q[row(d)] over its band y = j1 + BM - 1 - i0' - d
  // in [0, 2 BM); lane m of key n then adds E[n][BM - 1 - n + m]. 2 BM columns
  // per key: twice the content product, not a (Tq, Tk) buffer.
  void add_rel_q(const Work& w, const Block& bk, int64_t j0, int64_t nn) const {
    constexpr int64_t ld = 2 * kBM;
    const T* kb = k_.row(bk.b, bk.h, 0);
    const T* table = relq_t_.data() + (t_.rel_tables == 1 ? 0 : bk.h) * dh_ * ldq_;
    for (int64_t n1 = 0; n1 < nn; n1 += kBM) {
      const int64_t ns = std::min(kBM, nn - n1), j1 = j0 + n1;
      const T* bt = table + (dq_top_ - (j1 + kBM - 1 - bk.i0p));
      for (int64_t n0 = 0; n0 < ns; n0 += kKeyRows) {
        const int64_t j = j1 + n0;
        const T* src = kb + j * k_.stride_r;
        int64_t lda = k_.stride_r;
        if (j + kKeyRows > tk_) {  // rows past the end of K: zeros
          const int64_t valid = std::max<int64_t>(0, tk_ - j);
          for (int64_t r = 0; r < kKeyRows; ++r) {
            for (int64_t d = 0; d < dh_; ++d) w.kpad[r * dh_ + d] = r < valid ? src[r * lda + d] : T(0);
          }
          src = w.kpad, lda = dh_;
        }
        for (int64_t c0 = 0; c0 < ld; c0 += kBM) {
          detail::gemm_tile<T, kKeyRows, kBlockVectors, ALayout::kRows>(dh_, src, lda, bt + c0, ldq_,
                                                                        w.eq + n0 * ld + c0, ld, kKeyRows, kBM, false);
        }
      }
      for (int64_t n = 0; n < ns; ++n) {
        T* sr = w.st + (n1 + n) * kBM;
        const T* e = w.eq + n * ld + (kBM - 1 - n);
        for (int64_t c = 0; c < kBM; c += kLanes) S::store(sr + c, S::load(sr + c) + S::load(e + c));
      }
    }
  }

  // out[n][m] = A[n] . X^T[:, m] for n < rows (A rows `lda` apart, `avail` of
  // them readable): kKeyRows x 3-vector register tiles; the last group goes
  // through `pad` when fewer than kKeyRows rows are readable.
  void rows_times_qt(const T* a, int64_t lda, int64_t rows, int64_t avail, const T* xt, T* out, T* pad) const {
    for (int64_t n0 = 0; n0 < rows; n0 += kKeyRows) {
      const T* src = a + n0 * lda;
      int64_t ld = lda;
      if (n0 + kKeyRows > avail) {
        const int64_t valid = std::max<int64_t>(0, avail - n0);
        for (int64_t r = 0; r < kKeyRows; ++r) {
          for (int64_t d = 0; d < dh_; ++d) pad[r * dh_ + d] = r < valid ? src[r * lda + d] : T(0);
        }
        src = pad, ld = dh_;
      }
      detail::gemm_tile<T, kKeyRows, kBlockVectors, ALayout::kRows>(dh_, src, ld, xt, kBM, out + n0 * kBM, kBM,
                                                                    kKeyRows, kBM, false);
    }
  }

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

  // Q block transposed and scaled; padded lanes zero.
  void pack_queries(const Work& w, const Block& bk) const {
    const T scale = static_cast<T>(p_.scale);
    const T* u = t_.content_shift != nullptr ? t_.content_shift + bk.h * dh_ : nullptr;
    const T* wv = relk_ && t_.relative_shift != nullptr ? t_.relative_shift + bk.h * dh_ : nullptr;
    for (int64_t m = 0; m < kBM; ++m) {
      const T* row = m < bk.mb ? q_.row(bk.b, bk.h, bk.i0 + m) : nullptr;
      for (int64_t d = 0; d < dh_; ++d) {
        const T x = row != nullptr ? row[d] : T(0);
        w.qp[d * kBM + m] = row != nullptr ? scale * x : T(0);
        if (u != nullptr) w.qc[d * kBM + m] = row != nullptr ? scale * (x + u[d]) : T(0);
        if (wv != nullptr) w.qw[d * kBM + m] = row != nullptr ? scale * (x + wv[d]) : T(0);
      }
    }
  }

  // Relative keys: R[m][y] = (q_m + w) . rel_k[clip(y + c_lo - (BM-1) - K) + K]
  // for y < W = band + BM - 1, so that band row c, lane m reads R[m][c - c_lo + BM - 1 - m]:
  // the band is the transpose of R viewed with row stride ldr - 1.
  void prepare_rel_k(const Work& w, const Block& bk) const {
    // Past W + lanes, as in layout_scratch; whole vectors, not whole 4-vector tiles (a third fewer columns).
    const int64_t width = round_up(bk.c_hi - bk.c_lo + kBM + kLanes, kLanes);
    const int64_t t = t_.rel_tables == 1 ? 0 : bk.h;
    const T* bt = relk_t_.data() + t * dh_ * ldx_ + (bk.c_lo - (kBM - 1) - x_first_);
    for (int64_t x0 = 0; x0 < width; x0 += kWideTile) {
      const int nv = static_cast<int>(std::min<int64_t>(4, (width - x0) / kLanes));
      for (int64_t m0 = 0; m0 < kBM; m0 += kQueryRows) {
        detail::gemm_tile_nv<T, kQueryRows, ALayout::kColumns>(nv, dh_, w.qw + m0, kBM, bt + x0, ldx_,
                                                               w.rext + m0 * ldr_ + x0, ldr_, kQueryRows, nv * kLanes,
                                                               false);
      }
    }
    // Keys left of the band: every lane clipped to row 0; right of it: row 2K.
    const int64_t last = bk.c_hi - bk.c_lo + kBM - 1;
    for (int64_t m = 0; m < kBM; ++m) w.lohi[m] = w.rext[m * ldr_], w.lohi[kBM + m] = w.rext[m * ldr_ + last];
  }

  // One grid axis: R^T = table[rows reached] . Q^T, then E[y][m] = R^T[y - y_m + n - 1][m].
  void prepare_axis(const Work& w, const Block& bk, const T* table, int64_t n, const int64_t* coord, int64_t lo,
                    int64_t hi, T* rt, T* e) const {
    if (table == nullptr) return;
    const int64_t rows = 2 * n - 1, t = t_.grid_tables == 1 ? 0 : bk.h;
    const int64_t a_lo = n - 1 - hi, a_hi = 2 * n - 2 - lo;
    rows_times_qt(table + (t * rows + a_lo) * dh_, dh_, a_hi - a_lo + 1, rows - a_lo, w.qp, rt, w.kpad);
    for (int64_t y = 0; y < n; ++y) {
      for (int64_t m = 0; m < kBM; ++m) {
        e[y * kBM + m] = m < bk.mb ? rt[(y - coord[m] + n - 1 - a_lo) * kBM + m] : T(0);
      }
    }
  }

  void prepare_grid(const Work& w, const Block& bk) const {
    int64_t ys[kBM], xs[kBM];
    int64_t y_lo = hg_, y_hi = -1, x_lo = wg_, x_hi = -1;
    for (int64_t m = 0; m < kBM; ++m) {
      const int64_t i = bk.i0 + std::min(m, bk.mb - 1);
      ys[m] = i / wg_, xs[m] = i % wg_;
      y_lo = std::min(y_lo, ys[m]), y_hi = std::max(y_hi, ys[m]);
      x_lo = std::min(x_lo, xs[m]), x_hi = std::max(x_hi, xs[m]);
    }
    prepare_axis(w, bk, t_.grid_h, hg_, ys, y_lo, y_hi, w.rh, w.eh);
    prepare_axis(w, bk, t_.grid_w, wg_, xs, x_lo, x_hi, w.rw, w.ew);
    if (t_.grid_bias != nullptr) {
      for (int64_t m = 0; m < bk.mb; ++m) w.gb_off[m] = (hg_ - 1 - ys[m]) * (2 * wg_ - 1) + (wg_ - 1 - xs[m]);
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

  // S^T for keys [j0, j0 + nn): content product, terms, masks; the tile's max per lane into `tile_max`.
  void score_tile(const Work& w, const Block& bk, int64_t j0, int64_t nn, V (&tile_max)[kBlockVectors]) const {
    const T* kb = k_.row(bk.b, bk.h, 0);
    for (int64_t n0 = 0; n0 < nn; n0 += kKeyRows) {
      const int64_t j = j0 + n0;
      if (j + kKeyRows <= tk_) {
        detail::gemm_tile<T, kKeyRows, kBlockVectors, ALayout::kRows>(dh_, kb + j * k_.stride_r, k_.stride_r, w.qc,
                                                                      kBM, w.st + n0 * kBM, kBM, kKeyRows, kBM, false);
      } else {
        rows_times_qt(kb + j * k_.stride_r, k_.stride_r, kKeyRows, tk_ - j, w.qc, w.st + n0 * kBM, w.kpad);
      }
    }
    if (relq_) add_rel_q(w, bk, j0, nn);
    if (t_.grid_bias != nullptr) {
      const T* gb = t_.grid_bias + bk.h * (2 * hg_ - 1) * (2 * wg_ - 1);
      for (int64_t n = 0; n < nn; ++n) {
        const int64_t j = j0 + n;
        const T* gj = gb + (j / wg_) * (2 * wg_ - 1) + j % wg_;
        T* sr = w.st + n * kBM;
        for (int64_t m = 0; m < bk.mb; ++m) sr[m] += gj[w.gb_off[m]];
      }
    }
    if (t_.bias != nullptr) {
      const T* base = t_.bias + bk.b * t_.bias_stride_b + bk.h * t_.bias_stride_h + j0;
      for (int64_t m = 0; m < bk.mb; ++m) {
        const T* br = base + (bk.i0 + m) * t_.bias_stride_r;
        for (int64_t n = 0; n < nn; ++n) w.st[n * kBM + m] += br[n];
      }
    }
    // S^T: a query is one lane (stride 1), a key one row of kBM.
    if (t_.tile_bias != nullptr) t_.tile_bias->add(bk.b, bk.h, bk.i0p, bk.mb, j0, nn, w.st, 1, kBM, w.tb);
    finish_scores(w, bk, j0, nn, tile_max);
  }

  // The last pass over S^T, fused so that it is one: the terms that are one
  // contiguous vector run per key (relative keys: the tile's band rows
  // transposed out of R, or an all-clipped row; 2D relative Eh + Ew; the
  // offset bias), then the masks (after every term, so a masked pair is -inf
  // whatever a term holds), and the tile's max per lane.
  void finish_scores(const Work& w, const Block& bk, int64_t j0, int64_t nn, V (&tile_max)[kBlockVectors]) const {
    for (int c = 0; c < kBlockVectors; ++c) tile_max[c] = detail::broadcast<T>(-std::numeric_limits<T>::infinity());
    const bool masks = (p_.causal && j0 + nn - 1 - bk.i0p > 0) || p_.key_padding != nullptr;
    if (!vector_terms_ && !masks) {  // nothing to add or mask: the max alone
      for (int64_t n = 0; n < nn; ++n) {
#pragma GCC unroll 4
        for (int c = 0; c < kBlockVectors; ++c) {
          const V x = S::load(w.st + n * kBM + c * kLanes);
          tile_max[c] = x > tile_max[c] ? x : tile_max[c];
        }
      }
      return;
    }
    BandRun run{0, 0, 0};
    if (relk_) {
      run = band_run(bk, j0, nn);
      const T* src = w.rext + (kBM - 1) + run.cc_a;  // R viewed with row stride ldr - 1
      for (int64_t n = run.n_a; n < run.n_b; n += kLanes) {
        for (int64_t m0 = 0; m0 < kBM; m0 += kLanes) {
          detail::transpose_block(src + (n - run.n_a) + m0 * (ldr_ - 1), ldr_ - 1, w.et + (n - run.n_a) * kBM + m0,
                                  kBM);
        }
      }
    }
    // One loop per set of terms: tests of which terms are present, per key and vector, cost as much as the adds.
    const int set = (relk_ ? 8 : 0) | (grid_ ? 4 : 0) | (t_.offset_bias != nullptr ? 2 : 0) | (masks ? 1 : 0);
    (this->*kFinishKeys[set])(w, bk, j0, nn, run, tile_max);
  }

  template <bool kRel, bool kGrid, bool kOffset, bool kMasks>
  void finish_keys(const Work& w, const Block& bk, int64_t j0, int64_t nn, const BandRun& run,
                   V (&tile_max)[kBlockVectors]) const {
    const V minus_inf = detail::broadcast<T>(-std::numeric_limits<T>::infinity());
    const V lane = detail::lane_index<T>();
    // Keys from n_causal on are masked on lanes m < j - i0' (all of them from j - i0' >= BM).
    const int64_t n_causal = p_.causal ? std::clamp<int64_t>(bk.i0p + 1 - j0, 0, nn) : nn;
    const uint8_t* kp = p_.key_padding != nullptr ? p_.key_padding + bk.b * p_.key_padding_stride + j0 : nullptr;
    // A grid axis without a table reads the block's zero row.
    const T* eh = t_.grid_h != nullptr ? w.eh : w.zero;
    const T* ew = t_.grid_w != nullptr ? w.ew : w.zero;
    const int64_t step_h = t_.grid_h != nullptr ? kBM : 0, step_w = t_.grid_w != nullptr ? kBM : 0;
    int64_t gy = kGrid ? j0 / wg_ : 0, gx = kGrid ? j0 % wg_ : 0;  // the key's grid cell, stepped along
    const T* ob = kOffset ? ob_rev_.data() + bk.h * ob_ld_ + (tq_ - 1) - (j0 - bk.i0p) : nullptr;  // minus e per key
    for (int64_t n = 0; n < nn; ++n) {
      const T* rel = nullptr;
      if constexpr (kRel) rel = n < run.n_a ? w.lohi : n < run.n_b ? w.et + (n - run.n_a) * kBM : w.lohi + kBM;
      const T* gh = eh + gy * step_h;
      const T* gw = ew + gx * step_w;
      if constexpr (kGrid) {
        if (++gx == wg_) gx = 0, ++gy;
      }
      T masked_below = T(0);  // lanes m < this are masked
      bool padded = false;
      if constexpr (kMasks) {
        masked_below = n >= n_causal ? static_cast<T>(std::min(j0 + n - bk.i0p, kBM)) : T(0);
        padded = kp != nullptr && kp[n] != 0;
      }
      T* sr = w.st + n * kBM;
#pragma GCC unroll 4
      for (int c = 0; c < kBlockVectors; ++c) {
        V x = S::load(sr + c * kLanes);
        if constexpr (kRel) x += S::load(rel + c * kLanes);
        if constexpr (kGrid) x += S::load(gh + c * kLanes) + S::load(gw + c * kLanes);
        if constexpr (kOffset) x += S::load(ob - n + c * kLanes);
        if constexpr (kMasks) {
          x = lane + static_cast<T>(c * kLanes) < masked_below ? minus_inf : x;
          if (padded) x = minus_inf;
        }
        S::store(sr + c * kLanes, x);
        tile_max[c] = x > tile_max[c] ? x : tile_max[c];
      }
    }
  }

  using FinishKeys = void (Attention::*)(const Work&, const Block&, int64_t, int64_t, const BandRun&,
                                         V (&)[kBlockVectors]) const;
  template <size_t... kSets>
  static constexpr std::array<FinishKeys, sizeof...(kSets)> finish_table(std::index_sequence<kSets...>) {
    return {&Attention::finish_keys<(kSets & 8) != 0, (kSets & 4) != 0, (kSets & 2) != 0, (kSets & 1) != 0>...};
  }
  static constexpr std::array<FinishKeys, 16> kFinishKeys = finish_table(std::make_index_sequence<16>());

  // Online softmax over the tile: P^T in place, running max and sum, the
  // tile's own sum, and the factor alpha = exp(m_old - m_new) for what was
  // accumulated before.
  void softmax_tile(const Work& w, int64_t nn, const V (&mx)[kBlockVectors]) const {
    const T inf = std::numeric_limits<T>::infinity();
    V ms[kBlockVectors], sum[kBlockVectors];
    for (int c = 0; c < kBlockVectors; ++c) {
      const V old = S::load(w.m + c * kLanes);
      const V mnew = mx[c] > old ? mx[c] : old;
      // A lane with every key so far masked keeps m = -inf; exp against 0 gives p = 0 there.
      ms[c] = mnew == -inf ? V{} : mnew;
      S::store(w.m + c * kLanes, mnew);
      S::store(w.ms + c * kLanes, ms[c]);
      S::store(w.al + c * kLanes, detail::exp_nonpositive<T>(old - ms[c]));
      sum[c] = V{};
    }
    for (int64_t n = 0; n < nn; ++n) {
#pragma GCC unroll 4
      for (int c = 0; c < kBlockVectors; ++c) {
        T* s = w.st + n * kBM + c * kLanes;
        const V p = detail::exp_nonpositive<T>(S::load(s) - ms[c]);
        S::store(s, p);
        sum[c] += p;
      }
    }
    for (int c = 0; c < kBlockVectors; ++c) {
      S::store(w.l + c * kLanes, S::load(w.l + c * kLanes) * S::load(w.al + c * kLanes) + sum[c]);
      S::store(w.ts + c * kLanes, sum[c]);
    }
  }

  // Relative values: the tile's band rows of P^T transposed into W (row m,
  // column c - c_lo, one key each), keys outside the band summed into Wlo / Whi.
  void bin_tile(const Work& w, const Block& bk, int64_t j0, int64_t nn) const {
    const BandRun run = band_run(bk, j0, nn);
    if (run.n_a == run.n_b) {  // every key on one side (most tiles): the softmax's tile sum
      T* acc = j0 - bk.i0p < -kd_ ? w.wlo : w.wlo + kBM;
      for (int64_t c = 0; c < kBM; c += kLanes) S::store(acc + c, S::load(acc + c) + S::load(w.ts + c));
      return;
    }
    for (int64_t n = 0; n < nn; ++n) {
      if (n == run.n_a) n = run.n_b;
      if (n >= nn) break;
      T* acc = j0 + n - bk.i0p < -kd_ ? w.wlo : w.wlo + kBM;
      const T* pr = w.st + n * kBM;
      for (int64_t c = 0; c < kBM; c += kLanes) S::store(acc + c, S::load(acc + c) + S::load(pr + c));
    }
    T* dst = w.wst + kBM + run.cc_a;
    for (int64_t n = run.n_a; n < run.n_b; n += kLanes) {
      for (int64_t m0 = 0; m0 < kBM; m0 += kLanes) {
        detail::transpose_block(w.st + n * kBM + m0, kBM, dst + (n - run.n_a) + m0 * ldw_, ldw_);
      }
    }
  }

  // Relative values at the end of the block: W's columns to the final max,
  // the clipped lanes of the band into Wlo / Whi, then
  //   O += W . rel_v over the unclipped rows r, where W(m, r) = W[m][r + m - c_lo]
  //        is W read with row stride ldw + 1 (the skew undone for free),
  //   O += Wlo rel_v[0] + Whi rel_v[2K].
  void finish_values(const Work& w, const Block& bk) const {
    const int64_t k = kd_, nc = bk.c_hi - bk.c_lo + 1;
    T* const wb = w.wst + kBM;  // column 0 of the band
    for (int64_t tile = 0; tile * kKeyTile < bk.jend; ++tile) {
      const int64_t j0 = tile * kKeyTile;
      const BandRun run = band_run(bk, j0, std::min(kKeyTile, bk.jend - j0));
      if (run.n_a == run.n_b) continue;
      for (int64_t m = 0; m < kBM; ++m) {
        const T f = detail::exp_nonpositive<T>(detail::broadcast<T>(w.mt[tile * kBM + m] - w.ms[m]))[0];
        if (f == T(1)) continue;
        T* row = wb + m * ldw_ + run.cc_a;
        for (int64_t n = 0; n < run.n_b - run.n_a; ++n) row[n] *= f;
      }
    }
    for (int64_t m = 0; m < kBM; ++m) {
      T* row = wb + m * ldw_;
      if (!bk.band_keys) row[0] = T(0);  // nc = 1, and no tile wrote it
      std::fill(row + nc, row + nc + kBM + kLanes, T(0));  // past the band (and what transposes wrote there)
      // Band columns c < m have d < -K, c > 2K + m have d > K.
      for (int64_t c = 0; c < std::min(m - bk.c_lo, nc); ++c) w.wlo[m] += row[c];
      for (int64_t c = std::max<int64_t>(0, 2 * k + m + 1 - bk.c_lo); c < nc; ++c) w.wlo[kBM + m] += row[c];
    }
    const int64_t t = t_.rel_tables == 1 ? 0 : bk.h;
    const T* table = relv_base_ + t * relv_table_ - relv_first_ * relv_ld_;  // row r at table + r * ld
    const int64_t r_a = std::max<int64_t>(0, bk.c_lo - (kBM - 1)), r_b = std::min(2 * k, bk.c_hi);
    if (r_a <= r_b) {
      accumulate_o<ALayout::kRows>(w, wb + (r_a - bk.c_lo), ldw_ + 1, r_b - r_a + 1, table + r_a * relv_ld_,
                                   relv_ld_);
    }
    for (int64_t m = 0; m < bk.mb; ++m) {
      const T lo = w.wlo[m], hi = w.wlo[kBM + m];
      T* o = w.o + m * dvp_;
      if (lo != T(0)) {
        for (int64_t c = 0; c < dv_; ++c) o[c] += lo * table[c];
      }
      if (hi != T(0)) {
        for (int64_t c = 0; c < dv_; ++c) o[c] += hi * table[2 * k * relv_ld_ + c];
      }
    }
  }

  void block(const Work& w, int64_t b, int64_t h, int64_t blk) const {
    const Block bk = make_block(b, h, blk);
    if (bk.jend == 0) {  // no keys: every row is fully masked
      for (int64_t m = 0; m < bk.mb; ++m) std::fill(out_.row(b, h, bk.i0 + m), out_.row(b, h, bk.i0 + m) + dv_, T(0));
      if (lse_ != nullptr) std::fill_n(lse_ + (b * nh_ + h) * tq_ + bk.i0, bk.mb, std::numeric_limits<T>::infinity());
      return;
    }
    pack_queries(w, bk);
    if (relk_) prepare_rel_k(w, bk);
    if (grid_ || t_.grid_bias != nullptr) prepare_grid(w, bk);

    std::fill(w.m, w.m + kBM, -std::numeric_limits<T>::infinity());
    std::fill(w.l, w.l + kBM, T(0));
    std::fill(w.o, w.o + kBM * dvp_, T(0));
    if (relv_) std::fill(w.wlo, w.wlo + 2 * kBM, T(0));
    // A term with per-row state (CoPE) fills it for the block; write_weights' second pass reuses it.
    if (t_.tile_bias != nullptr && t_.tile_bias->needs_rows()) t_.tile_bias->begin_rows(b, h, bk.i0p, bk.mb, w.tb);
    for (int64_t tile = 0; tile * kKeyTile < bk.jend; ++tile) {
      const int64_t j0 = tile * kKeyTile, nn = std::min(kKeyTile, bk.jend - j0);
      V tile_max[kBlockVectors];
      score_tile(w, bk, j0, nn, tile_max);
      softmax_tile(w, nn, tile_max);
      for (int64_t m = 0; m < kBM; ++m) {
        const T a = w.al[m];
        if (a == T(1)) continue;
        T* row = w.o + m * dvp_;
        for (int64_t c = 0; c < dvp_; ++c) row[c] *= a;
        if (relv_) w.wlo[m] *= a, w.wlo[kBM + m] *= a;
      }
      if (relv_) {
        std::copy(w.ms, w.ms + kBM, w.mt + tile * kBM);
        bin_tile(w, bk, j0, nn);
      }
      if (dv_ > 0) {
        const T* vt = v_.row(b, h, j0);
        int64_t ldv = v_.stride_r;
        if (!v_direct_) {
          for (int64_t n = 0; n < nn; ++n) {
            std::memcpy(w.vpad + n * dvp_, vt + n * ldv, static_cast<size_t>(dv_) * sizeof(T));
            std::fill(w.vpad + n * dvp_ + dv_, w.vpad + (n + 1) * dvp_, T(0));
          }
          vt = w.vpad, ldv = dvp_;
        }
        accumulate_o<ALayout::kColumns>(w, w.st, kBM, nn, vt, ldv);
      }
    }
    if (relv_) finish_values(w, bk);

    for (int64_t m = 0; m < bk.mb; ++m) {
      // l = 0: every key masked, output 0; l NaN (a NaN or +inf logit): NaN, as the composed softmax.
      const T inv = w.l[m] > T(0) ? T(1) / w.l[m] : (w.l[m] == w.l[m] ? T(0) : w.l[m]);
      if (lse_ != nullptr) {
        const T l = w.l[m];
        lse_[(b * nh_ + h) * tq_ + bk.i0 + m] =
            l > T(0) ? w.ms[m] + std::log(l) : (l == l ? std::numeric_limits<T>::infinity() : l);
      }
      w.l[m] = inv;  // from here on: 1 / l
      T* dst = out_.row(b, h, bk.i0 + m);
      const T* src = w.o + m * dvp_;
      for (int64_t c = 0; c < dv_; ++c) dst[c] = src[c] * inv;
    }
    if (weights_) write_weights(w, bk);
  }

  // Second pass for the probabilities: S^T again, exp against the final max, times 1 / l.
  void write_weights(const Work& w, const Block& bk) const {
    for (int64_t m = 0; m < bk.mb; ++m) {
      T* row = w_.row(bk.b, bk.h, bk.i0 + m);
      // Keys past the block's last visible one: 0, or NaN on a NaN row (w.l holds 1 / l), as the composed softmax.
      std::fill(row + bk.jend, row + tk_, w.l[m] == w.l[m] ? T(0) : w.l[m]);
    }
    for (int64_t j0 = 0; j0 < bk.jend; j0 += kKeyTile) {
      const int64_t nn = std::min(kKeyTile, bk.jend - j0);
      V tile_max[kBlockVectors];
      score_tile(w, bk, j0, nn, tile_max);
      for (int64_t n = 0; n < nn; ++n) {
        for (int64_t c = 0; c < kBM; c += kLanes) {
          T* s = w.st + n * kBM + c;
          S::store(s, detail::exp_nonpositive<T>(S::load(s) - S::load(w.ms + c)) * S::load(w.l + c));
        }
      }
      for (int64_t m = 0; m < bk.mb; ++m) {
        T* row = w_.row(bk.b, bk.h, bk.i0 + m) + j0;
        for (int64_t n = 0; n < nn; ++n) row[n] = w.st[n * kBM + m];
      }
    }
  }

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

}  // namespace

template <class T>
void attention_forward(const AttentionParams& params, BatchedMatrix<const T> q, BatchedMatrix<const T> k,
                       BatchedMatrix<const T> v, const AttentionTerms<T>& terms, BatchedMatrix<T> out,
                       BatchedMatrix<T> weights, const char* op, T* logsumexp) {
  validate_qkv(op, q, k, v);
  require(out.batch == q.batch && out.heads == q.heads && out.rows == q.rows && out.cols == v.cols, op,
          "out must be (B, H, Tq, Dv) = (", q.batch, ", ", q.heads, ", ", q.rows, ", ", v.cols, "), got (", out.batch,
          ", ", out.heads, ", ", out.rows, ", ", out.cols, ")");
  if (weights.data != nullptr) {
    require(weights.batch == q.batch && weights.heads == q.heads && weights.rows == q.rows && weights.cols == k.rows,
            op, "weights must be (B, H, Tq, Tk) = (", q.batch, ", ", q.heads, ", ", q.rows, ", ", k.rows,
            "), got (", weights.batch, ", ", weights.heads, ", ", weights.rows, ", ", weights.cols, ")");
  }
  const bool rel = terms.rel_k != nullptr || terms.rel_v != nullptr || terms.rel_q != nullptr;
  const bool grid = terms.grid_h != nullptr || terms.grid_w != nullptr || terms.grid_bias != nullptr;
  validate_attention(op, params, q.batch, q.heads, q.rows, k.rows, q.cols, v.cols, rel ? terms.rel_tables : 1,
                     rel ? terms.max_distance : 0, grid, terms.grid_height, terms.grid_width, terms.grid_tables);
  validate_rel_index(op, terms);
  validate_data(op, "q", q);
  validate_data(op, "k", k);
  validate_data(op, "v", v);
  validate_data(op, "out", out);
  validate_tile_bias(op, params, terms.tile_bias);
  Attention<T>(params, q, k, v, terms, out, weights, logsumexp).run();
}

template void attention_forward<float>(const AttentionParams&, BatchedMatrix<const float>, BatchedMatrix<const float>,
                                       BatchedMatrix<const float>, const AttentionTerms<float>&, BatchedMatrix<float>,
                                       BatchedMatrix<float>, const char*, float*);
template void attention_forward<double>(const AttentionParams&, BatchedMatrix<const double>,
                                        BatchedMatrix<const double>, BatchedMatrix<const double>,
                                        const AttentionTerms<double>&, BatchedMatrix<double>, BatchedMatrix<double>,
                                        const char*, double*);

}  // namespace posenc::kernels
