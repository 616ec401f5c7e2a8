// The backward's key tile: S and P recomputed with every term and mask, dV,
// dP, dS, the bias and table gradients, dK and dQ. The one hot function,
// with the diagonal gathers and scatters of its relative terms.
#include "attention_backward_kernel.h"

#include <algorithm>
#include <cstdint>
#include <limits>

namespace posenc::kernels::detail::attention_bwd {

// Keys [j0, j0 + nn) cut at grid rows: run r is keys [runs[3r], runs[3r + 3])
// on row runs[3r + 1] from column runs[3r + 2]; returns the count (a sentinel start follows).
template <class T>
int64_t Backward<T>::grid_runs(int64_t* runs, int64_t j0, int64_t nn) const noexcept {
  int64_t count = 0;
  for (int64_t n = 0; n < nn;) {
    const int64_t j = j0 + n, x = j % wg_, len = std::min(nn - n, wg_ - x);
    runs[3 * count] = n, runs[3 * count + 1] = j / wg_, runs[3 * count + 2] = x;
    ++count, n += len;
  }
  runs[3 * count] = nn;
  return count;
}

// dst[m][n] += band[m][n - m + kBM - 1].
template <class T>
void Backward<T>::gather_diagonals(const T* band, T* dst, int64_t mb, int64_t nn) const {
  for (int64_t m = 0; m < mb; ++m) {
    const T* src = band + m * ldg_ + (kBM - 1 - m);
    T* row = dst + m * kTileLd;
    for (int64_t n = 0; n < nn; ++n) row[n] += src[n];
  }
}

// band[m][n - m + kBM - 1] = src[m][n], other columns 0.
template <class T>
void Backward<T>::scatter_diagonals(const T* src, T* band, int64_t mb, int64_t nn) const {
  for (int64_t m = 0; m < mb; ++m) {
    T* row = band + m * ldg_;
    const int64_t first = kBM - 1 - m;
    std::fill(row, row + first, T(0));
    std::copy(src + m * kTileLd, src + m * kTileLd + nn, row + first);
    std::fill(row + first + nn, row + kBand, T(0));
  }
}

template <class T>
void Backward<T>::key_tile(const Work& w, int64_t b, int64_t h, int64_t i0, int64_t mb, int64_t j0, int64_t nn,
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

template int64_t Backward<float>::grid_runs(int64_t*, int64_t, int64_t) const noexcept;
template void Backward<float>::gather_diagonals(const float*, float*, int64_t, int64_t) const;
template void Backward<float>::scatter_diagonals(const float*, float*, int64_t, int64_t) const;
template void Backward<float>::key_tile(const Work&, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                                        const int64_t*, const int64_t*) const;
template int64_t Backward<double>::grid_runs(int64_t*, int64_t, int64_t) const noexcept;
template void Backward<double>::gather_diagonals(const double*, double*, int64_t, int64_t) const;
template void Backward<double>::scatter_diagonals(const double*, double*, int64_t, int64_t) const;
template void Backward<double>::key_tile(const Work&, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                                         const int64_t*, const int64_t*) const;

}  // namespace posenc::kernels::detail::attention_bwd
