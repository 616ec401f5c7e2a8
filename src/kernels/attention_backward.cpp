// Fused attention backward (formulas in attention_backward.h).
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
#include "posenc/kernels/attention_backward.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "attention_simd.h"
#include "posenc/error.h"
#include "small_gemm.h"

namespace posenc::kernels {
namespace {

using detail::ALayout;
using detail::clip;
using detail::kParallelWork;
using detail::prefetch_row;
using detail::round_up;

constexpr bool kWide = detail::kVectorRegisters >= 32;
constexpr int kMR = kWide ? 6 : 3;  // rows of a register tile (4 vectors wide)
constexpr int64_t kBM = 48;         // queries per tile: a multiple of kMR
constexpr int64_t kBN = 64;         // keys per tile
constexpr int64_t kBand = kBM + kBN - 1;
static_assert(kBM % kMR == 0);

// Rows of q, k, v, dO and O are met once per head, long after the forward
// wrote them (L3 at best): fetched this many rows ahead, the copies below stop
// waiting on each row's first load (7 % of a small model's training step).
constexpr int64_t kRowsAhead = 8;

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
           BatchedMatrix<const T> grad_out, const AttentionGradients<T>& grads)
      : p_(params), q_(q), k_(k), v_(v), t_(terms), out_(out), lse_(lse), go_(grad_out), g_(grads) {
    nb_ = q.batch, nh_ = q.heads, tq_ = q.rows, tk_ = k.rows, dh_ = q.cols, dv_ = v.cols;
    dhp_ = round_up(std::max<int64_t>(dh_, 1), kLanes), dvp_ = round_up(std::max<int64_t>(dv_, 1), kLanes);
    shift_ = tk_ - tq_, kd_ = t_.max_distance;
    scale_ = static_cast<T>(p_.scale);
    relk_ = t_.rel_k != nullptr && dh_ > 0;
    relv_ = t_.rel_v != nullptr && dv_ > 0;
    relq_ = t_.rel_q != nullptr && dh_ > 0;
    rel_rows_ = t_.rel_index != nullptr ? t_.rel_rows : 2 * kd_ + 1;
    gridh_ = t_.grid_h != nullptr && dh_ > 0;
    gridw_ = t_.grid_w != nullptr && dh_ > 0;
    hg_ = t_.grid_height, wg_ = t_.grid_width;
    d_min_ = -(tk_ - 1) - kBM;
    nx_ = tq_ + tk_ + 2 * kBM + kBN;
    ldx_ = round_up(nx_, kLanes) + kLanes;
    ldk_ = round_up(std::max<int64_t>(tk_, 1), kLanes) + kBN;
    ldg_ = round_up(kBand, kLanes) + kLanes;
    nob_ = std::max<int64_t>(tq_ + tk_ - 1, 0);
    ngb_ = (2 * hg_ - 1) * (2 * wg_ - 1);
    ldh_ = round_up(std::max<int64_t>(2 * hg_ - 1, 1), kLanes) + kLanes;
    ldw_ = round_up(std::max<int64_t>(2 * wg_ - 1, 1), kLanes) + kLanes;
  }

  void run() {
    zero_outputs();
    if (nb_ == 0 || nh_ == 0 || tq_ == 0) return;
    prepare_tables();
    const int64_t work = nb_ * nh_ * tq_ * std::max<int64_t>(tk_, 1) * (dh_ + dv_ + 1);
    int threads = work < kParallelWork ? 1 : std::max(1, omp_get_max_threads());
    threads = static_cast<int>(std::min<int64_t>(threads, nh_));
    layout_scratch();
    detail::ThreadScratch<T> scratch(threads, per_thread_);
    detail::ThreadScratch<T> partial(static_cast<int>(nh_), partial_size_);
    detail::ThreadScratch<int64_t> runs(threads, 3 * (kBN + 1));
    // The tile bias's parameter gradients: one double partial per head, summed in head order below.
    const bool tile_grad = g_.tile_bias != nullptr && t_.tile_bias != nullptr;
    const int64_t tile_grad_size = tile_grad ? t_.tile_bias->gradient_size() : 0;
    detail::ThreadScratch<double> tile_partial(tile_grad ? static_cast<int>(nh_) : 1, tile_grad_size);
#pragma omp parallel num_threads(threads)
    {
      const int th = omp_get_thread_num();
      Work w = carve(scratch.slice(th));
      w.runs = runs.slice(th);
      // One task per head, its batches in order: every sum has one order whatever the threads.
#pragma omp for schedule(dynamic, 1)
      for (int64_t h = 0; h < nh_; ++h) {
        T* part = partial.slice(static_cast<int>(h));
        std::fill(part, part + partial_size_, T(0));
        set_partials(w, part);
        if (tile_grad) {
          w.dtb = tile_partial.slice(static_cast<int>(h));
          std::fill(w.dtb, w.dtb + tile_grad_size, 0.0);
        }
        for (int64_t b = 0; b < nb_; ++b) head(w, b, h);
      }
    }
    for (int64_t h = 0; h < nh_; ++h) fold_partials(partial.slice(static_cast<int>(h)), h);
    if (tile_grad) {
      for (int64_t h = 0; h < nh_; ++h) {
        const double* part = tile_partial.slice(static_cast<int>(h));
        for (int64_t e = 0; e < tile_grad_size; ++e) g_.tile_bias[e] += part[e];
      }
    }
  }

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

  // Zero the requested outputs that are accumulated (dq is written per tile).
  void zero_outputs() const {
    const auto zero = [](T* p, int64_t n) {
      if (p != nullptr && n > 0) std::fill(p, p + n, T(0));
    };
    zero(g_.content_shift, nh_ * dh_);
    zero(g_.relative_shift, nh_ * dh_);
    zero(g_.rel_k, t_.rel_tables * rel_rows_ * dh_);
    zero(g_.rel_q, t_.rel_tables * rel_rows_ * dh_);
    zero(g_.rel_v, t_.rel_tables * (2 * kd_ + 1) * dv_);
    zero(g_.grid_h, t_.grid_tables * (2 * hg_ - 1) * dh_);
    zero(g_.grid_w, t_.grid_tables * (2 * wg_ - 1) * dh_);
    zero(g_.offset_bias, nh_ * nob_);
    zero(g_.grid_bias, nh_ * ngb_);
    if (g_.tile_bias != nullptr && t_.tile_bias != nullptr) {
      std::fill_n(g_.tile_bias, t_.tile_bias->gradient_size(), 0.0);
    }
    if (tq_ == 0) {  // no rows: dk, dv are zero (no task writes them)
      for (const BatchedMatrix<T>* m : {&g_.k, &g_.v}) {
        if (m->data == nullptr) continue;
        for (int64_t b = 0; b < nb_; ++b)
          for (int64_t h = 0; h < nh_; ++h)
            for (int64_t j = 0; j < m->rows; ++j) std::fill_n(m->row(b, h, j), m->cols, T(0));
      }
    }
  }

  // The relative tables once per offset x (d = x + d_min): rows (x, Dhp) and
  // transposed (D, ldx); the grid tables padded and transposed.
  void prepare_tables() {
    const int64_t rows = 2 * kd_ + 1;
    if (relk_) {
      rkx_.assign(static_cast<size_t>(t_.rel_tables * nx_ * dhp_ + kMR * dhp_), T(0));
      rkt_.assign(static_cast<size_t>(t_.rel_tables * dh_ * ldx_ + kMR * ldx_), T(0));
      for (int64_t t = 0; t < t_.rel_tables; ++t) {
        for (int64_t x = 0; x < nx_; ++x) {
          const T* src = t_.rel_k + (t * rel_rows_ + row_of(x + d_min_)) * dh_;
          std::copy(src, src + dh_, rkx_.data() + (t * nx_ + x) * dhp_);
          for (int64_t d = 0; d < dh_; ++d) rkt_[(t * dh_ + d) * ldx_ + x] = src[d];
        }
      }
    }
    if (relq_) {  // scale * rel_q per offset, rows and transposed
      pqx_.assign(static_cast<size_t>(t_.rel_tables * nx_ * dhp_ + kMR * dhp_), T(0));
      pqt_.assign(static_cast<size_t>(t_.rel_tables * dh_ * ldx_ + kMR * ldx_), T(0));
      for (int64_t t = 0; t < t_.rel_tables; ++t) {
        for (int64_t x = 0; x < nx_; ++x) {
          const T* src = t_.rel_q + (t * rel_rows_ + row_of(x + d_min_)) * dh_;
          for (int64_t d = 0; d < dh_; ++d) {
            pqx_[(t * nx_ + x) * dhp_ + d] = scale_ * src[d];
            pqt_[(t * dh_ + d) * ldx_ + x] = scale_ * src[d];
          }
        }
      }
    }
    if (relv_) {
      rvt_.assign(static_cast<size_t>(t_.rel_tables * dv_ * ldx_ + kMR * ldx_), T(0));
      for (int64_t t = 0; t < t_.rel_tables; ++t) {
        for (int64_t x = 0; x < nx_; ++x) {
          const T* src = t_.rel_v + (t * rows + clip(x + d_min_, kd_) + kd_) * dv_;
          for (int64_t d = 0; d < dv_; ++d) rvt_[(t * dv_ + d) * ldx_ + x] = src[d];
        }
      }
    }
    const auto grid_table = [&](const T* table, int64_t n, int64_t ld, std::vector<T>& rows_out,
                                std::vector<T>& cols_out) {
      const int64_t r = 2 * n - 1;
      rows_out.assign(static_cast<size_t>(t_.grid_tables * r * dhp_ + kMR * dhp_), T(0));
      cols_out.assign(static_cast<size_t>(t_.grid_tables * dh_ * ld + kMR * ld), T(0));
      for (int64_t t = 0; t < t_.grid_tables; ++t) {
        for (int64_t y = 0; y < r; ++y) {
          const T* src = table + (t * r + y) * dh_;
          std::copy(src, src + dh_, rows_out.data() + (t * r + y) * dhp_);
          for (int64_t d = 0; d < dh_; ++d) cols_out[(t * dh_ + d) * ld + y] = src[d];
        }
      }
    };
    if (gridh_) grid_table(t_.grid_h, hg_, ldh_, ghp_, ght_);
    if (gridw_) grid_table(t_.grid_w, wg_, ldw_, gwp_, gwt_);
  }

  void layout_scratch() {
    int64_t n = 0;
    const auto take = [&](int64_t count) {
      const int64_t at = n;
      n += round_up(count, 64 / static_cast<int64_t>(sizeof(T)));
      return at;
    };
    off_.kp = take(tk_ * dhp_ + kBN * dhp_);
    off_.kt = take(dh_ * ldk_ + kMR * ldk_);
    off_.vt = take(dv_ * ldk_ + kMR * ldk_);
    off_.qc = take(kBM * dhp_);
    off_.qw = take(kBM * dhp_);
    off_.qs = take(kBM * dhp_);
    off_.go = take(kBM * dvp_);
    off_.dd = take(2 * kBM);
    off_.s = take(kBM * kTileLd);
    off_.p = take(kBM * kTileLd);
    off_.dp = take(kBM * kTileLd);
    off_.dqc = take(3 * kBM * dhp_);
    off_.r = relk_ || relv_ ? take(kBM * ldg_ + std::max(kBM * ldg_, dvp_)) : 0;
    off_.rh = gridh_ ? take(2 * kBM * ldh_) : 0;
    off_.rw = gridw_ ? take(2 * kBM * ldw_) : 0;
    off_.tb = t_.tile_bias != nullptr ? take(t_.tile_bias->scratch_size(kBM, kBN)) : 0;
    off_.rq = relq_ ? take(2 * (kBN + kMR) * ldg_) : 0;
    per_thread_ = n + 8 * kBN;  // slack for the whole-vector and kMR-row reads past the last buffer

    n = 0;
    part_.du = g_.content_shift != nullptr ? take(dh_) : -1;
    part_.dw = g_.relative_shift != nullptr ? take(dh_) : -1;
    part_.drk = g_.rel_k != nullptr && relk_ ? take(nx_ * dhp_) : -1;
    part_.drv = g_.rel_v != nullptr && relv_ ? take(nx_ * dvp_) : -1;
    part_.drq = g_.rel_q != nullptr && relq_ ? take(nx_ * dhp_) : -1;
    part_.dgh = g_.grid_h != nullptr && gridh_ ? take((2 * hg_ - 1) * dhp_) : -1;
    part_.dgw = g_.grid_w != nullptr && gridw_ ? take((2 * wg_ - 1) * dhp_) : -1;
    part_.dob = g_.offset_bias != nullptr ? take(nob_) : -1;
    part_.dgb = g_.grid_bias != nullptr ? take(ngb_) : -1;
    partial_size_ = n + 8 * kBN;
  }

  Work carve(T* base) const {
    Work w{};
    w.kp = base + off_.kp, w.kt = base + off_.kt, w.vt = base + off_.vt;
    w.qc = base + off_.qc, w.qw = base + off_.qw, w.qs = base + off_.qs, w.go = base + off_.go;
    w.dd = base + off_.dd, w.ls = w.dd + kBM;
    w.s = base + off_.s, w.p = base + off_.p, w.dp = base + off_.dp;
    w.dqc = base + off_.dqc, w.dqr = w.dqc + kBM * dhp_, w.dqg = w.dqr + kBM * dhp_;
    w.r = base + off_.r, w.gd = w.r + kBM * ldg_;
    w.rh = base + off_.rh, w.drh = w.rh + kBM * ldh_;
    w.rw = base + off_.rw, w.drw = w.rw + kBM * ldw_;
    w.tb = base + off_.tb, w.dtb = nullptr;
    w.rq = base + off_.rq, w.gq = w.rq + (kBN + kMR) * ldg_;
    std::fill(base, base + per_thread_, T(0));  // padding rows and columns stay 0
    return w;
  }

  void set_partials(Work& w, T* part) const {
    const auto at = [&](int64_t off) { return off < 0 ? nullptr : part + off; };
    w.du = at(part_.du), w.dw = at(part_.dw), w.drk = at(part_.drk), w.drv = at(part_.drv);
    w.dgh = at(part_.dgh), w.dgw = at(part_.dgw), w.dob = at(part_.dob), w.dgb = at(part_.dgb);
    w.drq = at(part_.drq);
  }

  // K (padded rows and transposed) and V^T of head (b, h).
  void pack_head(const Work& w, int64_t b, int64_t h) const {
    for (int64_t j = 0; j < tk_; ++j) {
      if (j + kRowsAhead < tk_) {
        prefetch_row(k_.row(b, h, j + kRowsAhead), dh_), prefetch_row(v_.row(b, h, j + kRowsAhead), dv_);
      }
      const T* kr = k_.row(b, h, j);
      std::copy(kr, kr + dh_, w.kp + j * dhp_);
      for (int64_t d = 0; d < dh_; ++d) w.kt[d * ldk_ + j] = kr[d];
      const T* vr = v_.row(b, h, j);
      for (int64_t d = 0; d < dv_; ++d) w.vt[d * ldk_ + j] = vr[d];
    }
  }

  // One (b, h): zero dk, dv; then every query tile.
  void head(const Work& w, int64_t b, int64_t h) const {
    pack_head(w, b, h);
    for (const BatchedMatrix<T>* m : {&g_.k, &g_.v}) {
      if (m->data == nullptr) continue;
      for (int64_t j = 0; j < tk_; ++j) std::fill_n(m->row(b, h, j), m->cols, T(0));
    }
    for (int64_t i0 = 0; i0 < tq_; i0 += kBM) query_tile(w, b, h, i0);
  }

  void pack_queries(const Work& w, int64_t b, int64_t h, int64_t i0, int64_t mb) const {
    const T* u = t_.content_shift != nullptr ? t_.content_shift + h * dh_ : nullptr;
    const T* wv = t_.relative_shift != nullptr ? t_.relative_shift + h * dh_ : nullptr;
    const T* ls = lse_ + (b * nh_ + h) * tq_ + i0;
    for (int64_t m = 0; m < kBM; ++m) {
      T *qc = w.qc + m * dhp_, *qw = w.qw + m * dhp_, *qs = w.qs + m * dhp_, *go = w.go + m * dvp_;
      if (m >= mb) {
        std::fill(qc, qc + dhp_, T(0)), std::fill(qw, qw + dhp_, T(0)), std::fill(qs, qs + dhp_, T(0));
        std::fill(go, go + dvp_, T(0));
        w.dd[m] = T(0), w.ls[m] = std::numeric_limits<T>::infinity();
        continue;
      }
      if (m + kRowsAhead < mb) {
        const int64_t ahead = i0 + m + kRowsAhead;
        prefetch_row(q_.row(b, h, ahead), dh_), prefetch_row(go_.row(b, h, ahead), dv_);
        prefetch_row(out_.row(b, h, ahead), dv_);
      }
      const T* qr = q_.row(b, h, i0 + m);
      for (int64_t d = 0; d < dh_; ++d) {
        qs[d] = scale_ * qr[d];
        qc[d] = u != nullptr ? scale_ * (qr[d] + u[d]) : qs[d];
        qw[d] = wv != nullptr ? scale_ * (qr[d] + wv[d]) : qs[d];
      }
      const T* gr = go_.row(b, h, i0 + m);
      const T* orow = out_.row(b, h, i0 + m);
      T dot = 0;
      for (int64_t d = 0; d < dv_; ++d) go[d] = gr[d], dot += gr[d] * orow[d];
      w.dd[m] = dot;
      w.ls[m] = ls[m];
    }
  }

  void query_tile(const Work& w, int64_t b, int64_t h, int64_t i0) const {
    const int64_t mb = std::min(kBM, tq_ - i0), i0p = i0 + shift_;
    const int64_t jend = p_.causal ? std::clamp<int64_t>(i0p + mb, 0, tk_) : tk_;
    if (g_.bias.data != nullptr) {  // pairs no key tile visits: no gradient
      for (int64_t m = 0; m < mb; ++m) {
        T* row = g_.bias.row(b, h, i0 + m);
        std::fill(row + jend, row + tk_, T(0));
      }
    }
    if (jend == 0) {
      if (g_.q.data != nullptr) {
        for (int64_t m = 0; m < mb; ++m) std::fill_n(g_.q.row(b, h, i0 + m), dh_, T(0));
      }
      return;
    }
    pack_queries(w, b, h, i0, mb);
    std::fill(w.dqc, w.dqc + 3 * kBM * dhp_, T(0));
    int64_t ys[kBM] = {}, xs[kBM] = {};
    const int64_t gt = t_.grid_tables == 1 ? 0 : h;
    if (gridh_ || gridw_ || t_.grid_bias != nullptr) {
      for (int64_t m = 0; m < mb; ++m) ys[m] = (i0 + m) / wg_, xs[m] = (i0 + m) % wg_;
    }
    if (gridh_) {
      matmul<T, ALayout::kRows>(mb, 2 * hg_ - 1, dh_, w.qs, dhp_, ght_.data() + gt * dh_ * ldh_, ldh_, w.rh, ldh_,
                                false);
      std::fill(w.drh, w.drh + kBM * ldh_, T(0));
    }
    if (gridw_) {
      matmul<T, ALayout::kRows>(mb, 2 * wg_ - 1, dh_, w.qs, dhp_, gwt_.data() + gt * dh_ * ldw_, ldw_, w.rw, ldw_,
                                false);
      std::fill(w.drw, w.drw + kBM * ldw_, T(0));
    }
    const bool tile_rows = t_.tile_bias != nullptr && t_.tile_bias->needs_rows();
    if (tile_rows) t_.tile_bias->begin_rows(b, h, i0 + shift_, mb, w.tb);
    for (int64_t j0 = 0; j0 < jend; j0 += kBN) key_tile(w, b, h, i0, mb, j0, std::min(kBN, jend - j0), ys, xs);

    if (gridh_) finish_axis(w.drh, ldh_, 2 * hg_ - 1, ghp_.data() + gt * (2 * hg_ - 1) * dhp_, w.dgh, w, mb);
    if (gridw_) finish_axis(w.drw, ldw_, 2 * wg_ - 1, gwp_.data() + gt * (2 * wg_ - 1) * dhp_, w.dgw, w, mb);
    for (int64_t m = 0; m < mb; ++m) {
      const T *c = w.dqc + m * dhp_, *r = w.dqr + m * dhp_, *g = w.dqg + m * dhp_;
      if (g_.q.data != nullptr) {
        T* dst = g_.q.row(b, h, i0 + m);
        for (int64_t d = 0; d < dh_; ++d) dst[d] = scale_ * (c[d] + r[d] + g[d]);
      }
      if (w.du != nullptr) {
        for (int64_t d = 0; d < dh_; ++d) w.du[d] += scale_ * c[d];
      }
      if (w.dw != nullptr) {
        for (int64_t d = 0; d < dh_; ++d) w.dw[d] += scale_ * r[d];
      }
    }
    if (tile_rows) {  // the term's own gradients of q, k (gates) and its parameters
      t_.tile_bias->finish_rows(b, h, i0 + shift_, mb, g_.q.data != nullptr ? g_.q.row(b, h, i0) : nullptr,
                                g_.q.stride_r, g_.k.data != nullptr ? g_.k.row(b, h, 0) : nullptr, g_.k.stride_r,
                                w.dtb, w.tb);
    }
  }

  // One grid axis at the end of a query tile: dQ += dR table, dtable += dR^T scale q.
  void finish_axis(const T* dr, int64_t ld, int64_t rows, const T* table_rows, T* dtable, const Work& w,
                   int64_t mb) const {
    matmul<T, ALayout::kRows>(mb, dh_, rows, dr, ld, table_rows, dhp_, w.dqg, dhp_, true);
    if (dtable != nullptr) matmul<T, ALayout::kColumns>(rows, dh_, mb, dr, ld, w.qs, dhp_, dtable, dhp_, true);
  }

  // Keys [j0, j0 + nn) cut at grid rows: run r is keys [runs[3r], runs[3r + 3])
  // on row runs[3r + 1] from column runs[3r + 2]; returns the count (a sentinel start follows).
  int64_t grid_runs(int64_t* runs, int64_t j0, int64_t nn) const noexcept {
    int64_t count = 0;
    for (int64_t n = 0; n < nn;) {
      const int64_t j = j0 + n, x = j % wg_, len = std::min(nn - n, wg_ - x);
      runs[3 * count] = n, runs[3 * count + 1] = j / wg_, runs[3 * count + 2] = x;
      ++count, n += len;
    }
    runs[3 * count] = nn;
    return count;
  }

  // Table row of offset d: clip(d, -K, K) + K itself, or through rel_index.
  int64_t row_of(int64_t d) const noexcept {
    const int64_t c = clip(d, kd_) + kd_;
    return t_.rel_index != nullptr ? t_.rel_index[c] : c;
  }

  // d = j0 + n - i0' - m lies at band column y = n - m + kBM - 1; the band starts at offset row x0.
  int64_t band_start(int64_t i0p, int64_t j0) const { return j0 - i0p - (kBM - 1) - d_min_; }

  // dst[m][n] += band[m][n - m + kBM - 1].
  void gather_diagonals(const T* band, T* dst, int64_t mb, int64_t nn) const {
    for (int64_t m = 0; m < mb; ++m) {
      const T* src = band + m * ldg_ + (kBM - 1 - m);
      T* row = dst + m * kTileLd;
      for (int64_t n = 0; n < nn; ++n) row[n] += src[n];
    }
  }

  // band[m][n - m + kBM - 1] = src[m][n], other columns 0.
  void scatter_diagonals(const T* src, T* band, int64_t mb, int64_t nn) const {
    for (int64_t m = 0; m < mb; ++m) {
      T* row = band + m * ldg_;
      const int64_t first = kBM - 1 - m;
      std::fill(row, row + first, T(0));
      std::copy(src + m * kTileLd, src + m * kTileLd + nn, row + first);
      std::fill(row + first + nn, row + kBand, T(0));
    }
  }

  void key_tile(const Work& w, int64_t b, int64_t h, int64_t i0, int64_t mb, int64_t j0, int64_t nn,
                const int64_t* ys, const int64_t* xs) const {
    const int64_t i0p = i0 + shift_, rt = t_.rel_tables == 1 ? 0 : h;
    const int64_t x0 = band_start(i0p, j0);
    // A tile whose pairs all clip to one table row: the relative terms are one
    // vector per query, and their gradients go to that row (band row x_clip).
    const int64_t d_lo = j0 - i0p - (mb - 1), d_hi = j0 + nn - 1 - i0p;
    const bool clipped = d_hi < -kd_ || d_lo > kd_;
    const int64_t x_clip = (d_hi < -kd_ ? -kd_ : kd_) - d_min_;
    // ---- scores
    matmul<T, ALayout::kRows>(mb, nn, dh_, w.qc, dhp_, w.kt + j0, ldk_, w.s, kTileLd, false);
    if (relk_ && clipped) {
      const T* row = rkx_.data() + (rt * nx_ + x_clip) * dhp_;
      for (int64_t m = 0; m < mb; ++m) {
        const T c = detail::lane_dot(w.qw + m * dhp_, row, dh_);
        T* sr = w.s + m * kTileLd;
        for (int64_t n = 0; n < nn; ++n) sr[n] += c;
      }
    } else if (relk_) {
      matmul<T, ALayout::kRows>(mb, kBand, dh_, w.qw, dhp_, rkt_.data() + rt * dh_ * ldx_ + x0, ldx_, w.r, ldg_,
                                false);
      gather_diagonals(w.r, w.s, mb, nn);
    }
    if (relq_) {  // Rq = K band^T (keys x band), S[m][n] += Rq[n][n - m + kBM - 1]
      matmul<T, ALayout::kRows>(nn, kBand, dh_, w.kp + j0 * dhp_, dhp_, pqt_.data() + rt * dh_ * ldx_ + x0, ldx_,
                                w.rq, ldg_, false);
      for (int64_t m = 0; m < mb; ++m) {
        T* sr = w.s + m * kTileLd;
        const T* rq = w.rq + (kBM - 1 - m);
        for (int64_t n = 0; n < nn; ++n) sr[n] += rq[n * (ldg_ + 1)];
      }
    }
    if (t_.tile_bias != nullptr) t_.tile_bias->add(b, h, i0p, mb, j0, nn, w.s, kTileLd, 1, w.tb);
    // Grid terms by runs of keys on one grid row: a constant (grid_h) and contiguous rows (grid_w, grid bias).
    const bool grid_keys = gridh_ || gridw_ || t_.grid_bias != nullptr;
    const int64_t nruns = grid_keys ? grid_runs(w.runs, j0, nn) : 0;
    for (int64_t m = 0; m < mb; ++m) {
      T* row = w.s + m * kTileLd;
      for (int64_t r = 0; r < nruns; ++r) {
        const int64_t n0 = w.runs[3 * r], len = w.runs[3 * r + 3] - n0, y = w.runs[3 * r + 1], x = w.runs[3 * r + 2];
        T* sr = row + n0;
        if (gridh_) {
          const T c = w.rh[m * ldh_ + y - ys[m] + hg_ - 1];
          for (int64_t n = 0; n < len; ++n) sr[n] += c;
        }
        if (gridw_) {
          const T* rw = w.rw + m * ldw_ + (x - xs[m] + wg_ - 1);
          for (int64_t n = 0; n < len; ++n) sr[n] += rw[n];
        }
        if (t_.grid_bias != nullptr) {
          const T* gb = t_.grid_bias + h * ngb_ + (y - ys[m] + hg_ - 1) * (2 * wg_ - 1) + (x - xs[m] + wg_ - 1);
          for (int64_t n = 0; n < len; ++n) sr[n] += gb[n];
        }
      }
      if (t_.offset_bias != nullptr) {
        const T* ob = t_.offset_bias + h * nob_ + (j0 - i0 - m + tq_ - 1);
        for (int64_t n = 0; n < nn; ++n) row[n] += ob[n];
      }
      if (t_.bias != nullptr) {
        const T* br = t_.bias + b * t_.bias_stride_b + h * t_.bias_stride_h + (i0 + m) * t_.bias_stride_r + j0;
        for (int64_t n = 0; n < nn; ++n) row[n] += br[n];
      }
      const T minus_inf = -std::numeric_limits<T>::infinity();
      if (p_.causal) {
        for (int64_t n = std::max<int64_t>(0, i0p + m + 1 - j0); n < nn; ++n) row[n] = minus_inf;
      }
      if (p_.key_padding != nullptr) {
        const uint8_t* kp = p_.key_padding + b * p_.key_padding_stride + j0;
        for (int64_t n = 0; n < nn; ++n) row[n] = kp[n] != 0 ? minus_inf : row[n];
      }
      // P = exp(S - lse), whole vectors (the tail past nn is -inf: 0).
      std::fill(row + nn, row + round_up(nn, kLanes), minus_inf);
      const V l = detail::broadcast<T>(w.ls[m]);
      T* pr = w.p + m * kTileLd;
      for (int64_t n = 0; n < nn; n += kLanes) S::store(pr + n, detail::exp_nonpositive<T>(S::load(row + n) - l));
    }
    // ---- dV += P^T dO;  dP = dO V^T (+ rel_v)
    if (g_.v.data != nullptr && dv_ > 0) {
      matmul<T, ALayout::kColumns>(nn, dv_, mb, w.p, kTileLd, w.go, dvp_, g_.v.row(b, h, j0), g_.v.stride_r, true);
    }
    matmul<T, ALayout::kRows>(mb, nn, dv_, w.go, dvp_, w.vt + j0, ldk_, w.dp, kTileLd, false);
    if (dv_ == 0) {
      for (int64_t m = 0; m < mb; ++m) std::fill_n(w.dp + m * kTileLd, nn, T(0));
    }
    if (relv_ && clipped) {
      T* drv = w.drv != nullptr ? w.drv + x_clip * dvp_ : nullptr;
      T* rv = w.r;  // the clipped row of rel_v, out of its transposed copy
      for (int64_t d = 0; d < dv_; ++d) rv[d] = rvt_[(rt * dv_ + d) * ldx_ + x_clip];
      for (int64_t m = 0; m < mb; ++m) {
        const T* go = w.go + m * dvp_;
        const T e = detail::lane_dot(go, rv, dv_);
        T* dp = w.dp + m * kTileLd;
        for (int64_t n = 0; n < nn; ++n) dp[n] += e;
        const T mass = detail::lane_sum(w.p + m * kTileLd, nn);
        if (drv != nullptr) {
          for (int64_t d = 0; d < dv_; ++d) drv[d] += mass * go[d];
        }
      }
    } else if (relv_) {
      matmul<T, ALayout::kRows>(mb, kBand, dv_, w.go, dvp_, rvt_.data() + rt * dv_ * ldx_ + x0, ldx_, w.r, ldg_,
                                false);
      gather_diagonals(w.r, w.dp, mb, nn);
      if (w.drv != nullptr) {
        scatter_diagonals(w.p, w.gd, mb, nn);
        matmul<T, ALayout::kColumns>(kBand, dv_, mb, w.gd, ldg_, w.go, dvp_,
                                     w.drv + x0 * dvp_, dvp_, true);
      }
    }
    // ---- dS = P (dP - D), in dp
    for (int64_t m = 0; m < mb; ++m) {
      T* ds = w.dp + m * kTileLd;
      const T* pr = w.p + m * kTileLd;
      const T dm = w.dd[m];
      for (int64_t n = 0; n < nn; ++n) ds[n] = pr[n] * (ds[n] - dm);
    }
    const T* ds = w.dp;
    // ---- bias gradients
    if (w.dtb != nullptr || (t_.tile_bias != nullptr && t_.tile_bias->needs_rows())) {
      t_.tile_bias->accumulate_gradient(b, h, i0p, mb, j0, nn, ds, kTileLd, 1, w.dtb, w.tb);
    }
    for (int64_t m = 0; m < mb; ++m) {
      const T* row = ds + m * kTileLd;
      if (g_.bias.data != nullptr) std::copy(row, row + nn, g_.bias.row(b, h, i0 + m) + j0);
      if (w.dob != nullptr) {
        T* ob = w.dob + (j0 - i0 - m + tq_ - 1);
        for (int64_t n = 0; n < nn; ++n) ob[n] += row[n];
      }
      for (int64_t r = 0; r < nruns; ++r) {
        const int64_t n0 = w.runs[3 * r], len = w.runs[3 * r + 3] - n0, y = w.runs[3 * r + 1], x = w.runs[3 * r + 2];
        const T* dsr = row + n0;
        if (w.dgb != nullptr) {
          T* gb = w.dgb + (y - ys[m] + hg_ - 1) * (2 * wg_ - 1) + (x - xs[m] + wg_ - 1);
          for (int64_t n = 0; n < len; ++n) gb[n] += dsr[n];
        }
        if (gridh_) w.drh[m * ldh_ + y - ys[m] + hg_ - 1] += detail::lane_sum(dsr, len);
        if (gridw_) {
          T* dr = w.drw + m * ldw_ + (x - xs[m] + wg_ - 1);
          for (int64_t n = 0; n < len; ++n) dr[n] += dsr[n];
        }
      }
    }
    // ---- relative keys: dQ += Gd band, dband += Gd^T scale (q + w)
    if (relk_ && clipped) {
      const T* row = rkx_.data() + (rt * nx_ + x_clip) * dhp_;
      T* drk = w.drk != nullptr ? w.drk + x_clip * dhp_ : nullptr;
      for (int64_t m = 0; m < mb; ++m) {
        const T mass = detail::lane_sum(ds + m * kTileLd, nn);
        T* dq = w.dqr + m * dhp_;
        for (int64_t d = 0; d < dh_; ++d) dq[d] += mass * row[d];
        if (drk != nullptr) {
          const T* qw = w.qw + m * dhp_;
          for (int64_t d = 0; d < dh_; ++d) drk[d] += mass * qw[d];
        }
      }
    } else if (relk_) {
      scatter_diagonals(ds, w.gd, mb, nn);
      matmul<T, ALayout::kRows>(mb, dh_, kBand, w.gd, ldg_, rkx_.data() + (rt * nx_ + x0) * dhp_, dhp_, w.dqr, dhp_,
                                true);
      if (w.drk != nullptr) {
        matmul<T, ALayout::kColumns>(kBand, dh_, mb, w.gd, ldg_, w.qw, dhp_, w.drk + x0 * dhp_, dhp_,
                                     true);
      }
    }
    // ---- relative queries: Gq[n][n - m + kBM - 1] = dS[m][n];  dK += Gq band, dband += Gq^T K
    if (relq_ && (g_.k.data != nullptr || w.drq != nullptr)) {
      for (int64_t n = 0; n < nn; ++n) std::fill_n(w.gq + n * ldg_, kBand, T(0));
      for (int64_t m = 0; m < mb; ++m) {
        const T* dsr = ds + m * kTileLd;
        T* gq = w.gq + (kBM - 1 - m);
        for (int64_t n = 0; n < nn; ++n) gq[n * (ldg_ + 1)] = dsr[n];
      }
      if (g_.k.data != nullptr) {
        matmul<T, ALayout::kRows>(nn, dh_, kBand, w.gq, ldg_, pqx_.data() + (rt * nx_ + x0) * dhp_, dhp_,
                                  g_.k.row(b, h, j0), g_.k.stride_r, true);
      }
      if (w.drq != nullptr) {
        matmul<T, ALayout::kColumns>(kBand, dh_, nn, w.gq, ldg_, w.kp + j0 * dhp_, dhp_, w.drq + x0 * dhp_, dhp_,
                                     true);
      }
    }
    // ---- dK += dS^T scale (q + u);  dQ += dS K
    if (g_.k.data != nullptr && dh_ > 0) {
      matmul<T, ALayout::kColumns>(nn, dh_, mb, ds, kTileLd, w.qc, dhp_, g_.k.row(b, h, j0), g_.k.stride_r, true);
    }
    matmul<T, ALayout::kRows>(mb, dh_, nn, ds, kTileLd, w.kp + j0 * dhp_, dhp_, w.dqc, dhp_, true);
  }

  // Head h's table gradients into the outputs (called in head order).
  void fold_partials(const T* part, int64_t h) const {
    const auto add = [](T* dst, const T* src, int64_t n) {
      for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
    };
    if (part_.du >= 0) add(g_.content_shift + h * dh_, part + part_.du, dh_);
    if (part_.dw >= 0) add(g_.relative_shift + h * dh_, part + part_.dw, dh_);
    if (part_.dob >= 0) add(g_.offset_bias + h * nob_, part + part_.dob, nob_);
    if (part_.dgb >= 0) add(g_.grid_bias + h * ngb_, part + part_.dgb, ngb_);
    const int64_t rt = t_.rel_tables == 1 ? 0 : h, gt = t_.grid_tables == 1 ? 0 : h;
    const auto fold_band = [&](T* dst, const T* src, int64_t dim, int64_t ld, T factor) {
      for (int64_t x = 0; x < nx_; ++x) {
        T* row = dst + (rt * rel_rows_ + row_of(x + d_min_)) * dim;
        for (int64_t d = 0; d < dim; ++d) row[d] += factor * src[x * ld + d];
      }
    };
    if (part_.drk >= 0) fold_band(g_.rel_k, part + part_.drk, dh_, dhp_, T(1));
    if (part_.drv >= 0) fold_band(g_.rel_v, part + part_.drv, dv_, dvp_, T(1));
    if (part_.drq >= 0) fold_band(g_.rel_q, part + part_.drq, dh_, dhp_, scale_);  // the partial is Gq^T K
    const auto fold_grid = [&](T* dst, const T* src, int64_t table_rows) {
      for (int64_t r = 0; r < table_rows; ++r) add(dst + (gt * table_rows + r) * dh_, src + r * dhp_, dh_);
    };
    if (part_.dgh >= 0) fold_grid(g_.grid_h, part + part_.dgh, 2 * hg_ - 1);
    if (part_.dgw >= 0) fold_grid(g_.grid_w, part + part_.dgw, 2 * wg_ - 1);
  }

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

}  // namespace

template <class T>
void attention_backward(const AttentionParams& params, BatchedMatrix<const T> q, BatchedMatrix<const T> k,
                        BatchedMatrix<const T> v, const AttentionTerms<T>& terms, BatchedMatrix<const T> out,
                        const T* logsumexp, BatchedMatrix<const T> grad_out, const AttentionGradients<T>& grads,
                        const char* op) {
  validate_qkv(op, q, k, v);
  const auto same_as_out = [&](const char* name, const BatchedMatrix<const T>& m) {
    require(m.batch == q.batch && m.heads == q.heads && m.rows == q.rows && m.cols == v.cols, op, name,
            " must be (B, H, Tq, Dv) = (", q.batch, ", ", q.heads, ", ", q.rows, ", ", v.cols, "), got (", m.batch,
            ", ", m.heads, ", ", m.rows, ", ", m.cols, ")");
  };
  same_as_out("out", out);
  same_as_out("grad_out", grad_out);
  const bool rel = terms.rel_k != nullptr || terms.rel_v != nullptr || terms.rel_q != nullptr;
  const bool grid = terms.grid_h != nullptr || terms.grid_w != nullptr || terms.grid_bias != nullptr;
  validate_attention(op, params, q.batch, q.heads, q.rows, k.rows, q.cols, v.cols, rel ? terms.rel_tables : 1,
                     rel ? terms.max_distance : 0, grid, terms.grid_height, terms.grid_width, terms.grid_tables);
  validate_rel_index(op, terms);
  const auto like = [&](const char* name, const BatchedMatrix<T>& g, const BatchedMatrix<const T>& x) {
    require(g.data == nullptr || (g.batch == x.batch && g.heads == x.heads && g.rows == x.rows && g.cols == x.cols),
            op, "the gradient of ", name, " must be (", x.batch, ", ", x.heads, ", ", x.rows, ", ", x.cols,
            "), got (", g.batch, ", ", g.heads, ", ", g.rows, ", ", g.cols, ")");
  };
  like("q", grads.q, q);
  like("k", grads.k, k);
  like("v", grads.v, v);
  require(grads.bias.data == nullptr || (grads.bias.batch == q.batch && grads.bias.heads == q.heads &&
                                         grads.bias.rows == q.rows && grads.bias.cols == k.rows),
          op, "the gradient of bias must be (B, H, Tq, Tk) = (", q.batch, ", ", q.heads, ", ", q.rows, ", ", k.rows,
          "), got (", grads.bias.batch, ", ", grads.bias.heads, ", ", grads.bias.rows, ", ", grads.bias.cols, ")");
  const auto term = [&](const char* name, const void* grad, const void* value) {
    require(grad == nullptr || value != nullptr, op, "the gradient of ", name, " needs the ", name,
            " term, got none");
  };
  term("content_shift", grads.content_shift, terms.content_shift);
  term("relative_shift", grads.relative_shift, terms.relative_shift);
  term("rel_k", grads.rel_k, terms.rel_k);
  term("rel_v", grads.rel_v, terms.rel_v);
  term("rel_q", grads.rel_q, terms.rel_q);
  term("grid_h", grads.grid_h, terms.grid_h);
  term("grid_w", grads.grid_w, terms.grid_w);
  term("offset_bias", grads.offset_bias, terms.offset_bias);
  term("grid_bias", grads.grid_bias, terms.grid_bias);
  term("tile_bias", grads.tile_bias, terms.tile_bias);
  validate_tile_bias(op, params, terms.tile_bias);
  require(terms.relative_shift == nullptr || terms.rel_k != nullptr, op,
          "relative_shift shifts the queries of the rel_k term and needs rel_k, got none");
  validate_data(op, "q", q);
  validate_data(op, "k", k);
  validate_data(op, "v", v);
  validate_data(op, "out", out);
  validate_data(op, "grad_out", grad_out);
  const bool empty = q.batch == 0 || q.heads == 0 || q.rows == 0;
  require(empty || logsumexp != nullptr, op, "logsumexp must be the forward's (B, H, Tq) rows, got null");
  Backward<T>(params, q, k, v, terms, out, logsumexp, grad_out, grads).run();
}

template void attention_backward<float>(const AttentionParams&, BatchedMatrix<const float>,
                                        BatchedMatrix<const float>, BatchedMatrix<const float>,
                                        const AttentionTerms<float>&, BatchedMatrix<const float>, const float*,
                                        BatchedMatrix<const float>, const AttentionGradients<float>&, const char*);
template void attention_backward<double>(const AttentionParams&, BatchedMatrix<const double>,
                                         BatchedMatrix<const double>, BatchedMatrix<const double>,
                                         const AttentionTerms<double>&, BatchedMatrix<const double>, const double*,
                                         BatchedMatrix<const double>, const AttentionGradients<double>&,
                                         const char*);

}  // namespace posenc::kernels
