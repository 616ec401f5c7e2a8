// A forward tile's scores: the content product, the terms, the masks and the
// fused per-key pass (finish_keys), then the tile's softmax statistics. The
// hot loops of every call, kept apart from the set-up and the relative vectors.
#include "attention_kernel.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>

namespace posenc::kernels::detail::attention_fwd {

// out[n][m] = A[n] . X^T[:, m] for n < rows (A rows `lda` apart, `avail` of
// them readable): kKeyRows x 3-vector register tiles; the last group goes
// through `pad` when fewer than kKeyRows rows are readable.
template <class T>
void Attention<T>::rows_times_qt(const T* a, int64_t lda, int64_t rows, int64_t avail, const T* xt, T* out,
                                 T* pad) const {
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

// One grid axis: R^T = table[rows reached] . Q^T, then E[y][m] = R^T[y - y_m + n - 1][m].
template <class T>
void Attention<T>::prepare_axis(const Work& w, const Block& bk, const T* table, int64_t n, const int64_t* coord,
                                int64_t lo, int64_t hi, T* rt, T* e) const {
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

template <class T>
void Attention<T>::prepare_grid(const Work& w, const Block& bk) const {
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

// S^T for keys [j0, j0 + nn): content product, terms, masks; the tile's max per lane into `tile_max`.
template <class T>
void Attention<T>::score_tile(const Work& w, const Block& bk, int64_t j0, int64_t nn,
                              V (&tile_max)[kBlockVectors]) const {
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
template <class T>
void Attention<T>::finish_scores(const Work& w, const Block& bk, int64_t j0, int64_t nn,
                                 V (&tile_max)[kBlockVectors]) const {
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

template <class T>
template <bool kRel, bool kGrid, bool kOffset, bool kMasks>
void Attention<T>::finish_keys(const Work& w, const Block& bk, int64_t j0, int64_t nn, const BandRun& run,
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

template <class T>
template <size_t... kSets>
constexpr std::array<typename Attention<T>::FinishKeys, sizeof...(kSets)> Attention<T>::finish_table(
    std::index_sequence<kSets...>) {
  return {&Attention::finish_keys<(kSets & 8) != 0, (kSets & 4) != 0, (kSets & 2) != 0, (kSets & 1) != 0>...};
}
template <class T>
const std::array<typename Attention<T>::FinishKeys, 16> Attention<T>::kFinishKeys =
    finish_table(std::make_index_sequence<16>());

// Online softmax over the tile: P^T in place, running max and sum, the
// tile's own sum, and the factor alpha = exp(m_old - m_new) for what was
// accumulated before.
template <class T>
void Attention<T>::softmax_tile(const Work& w, int64_t nn, const V (&mx)[kBlockVectors]) const {
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

template void Attention<float>::rows_times_qt(const float*, int64_t, int64_t, int64_t, const float*, float*,
                                              float*) const;
template void Attention<float>::prepare_axis(const Work&, const Block&, const float*, int64_t, const int64_t*,
                                             int64_t, int64_t, float*, float*) const;
template void Attention<float>::prepare_grid(const Work&, const Block&) const;
template void Attention<float>::score_tile(const Work&, const Block&, int64_t, int64_t, V (&)[kBlockVectors]) const;
template void Attention<float>::finish_scores(const Work&, const Block&, int64_t, int64_t, V (&)[kBlockVectors]) const;
template void Attention<float>::softmax_tile(const Work&, int64_t, const V (&)[kBlockVectors]) const;
template void Attention<double>::rows_times_qt(const double*, int64_t, int64_t, int64_t, const double*, double*,
                                               double*) const;
template void Attention<double>::prepare_axis(const Work&, const Block&, const double*, int64_t, const int64_t*,
                                              int64_t, int64_t, double*, double*) const;
template void Attention<double>::prepare_grid(const Work&, const Block&) const;
template void Attention<double>::score_tile(const Work&, const Block&, int64_t, int64_t, V (&)[kBlockVectors]) const;
template void Attention<double>::finish_scores(const Work&, const Block&, int64_t, int64_t, V (&)[kBlockVectors]) const;
template void Attention<double>::softmax_tile(const Work&, int64_t, const V (&)[kBlockVectors]) const;

}  // namespace posenc::kernels::detail::attention_fwd
