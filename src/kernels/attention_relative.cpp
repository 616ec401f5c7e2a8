// The forward's relative vectors (Shaw / DeBERTa): rel_k transposed and each
// block's R, the band rows W of P^T for rel_v and their product, rel_q's
// per-key products. Apart from the content path, which never needs them.
#include "attention_kernel.h"

#include <algorithm>
#include <cstdint>

namespace posenc::kernels::detail::attention_fwd {

// rel_k transposed, column x = row clip(x + x_first - K) + K: a block's R is
// then one product over contiguous columns with the clipping built in.
// Tasks of (table, lanes rows of Dh); unclipped columns by register transposes.
template <class T>
void Attention<T>::pack_rel_k() {
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

// scale * rel_q transposed with its columns by decreasing offset, one per
// offset a block can reach: column x is offset d = dq_top - x, so a key's
// lanes (d falling with m) read a contiguous run.
template <class T>
void Attention<T>::prepare_rel_q() {
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
template <class T>
void Attention<T>::add_rel_q(const Work& w, const Block& bk, int64_t j0, int64_t nn) const {
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

// Relative keys: R[m][y] = (q_m + w) . rel_k[clip(y + c_lo - (BM-1) - K) + K]
// for y < W = band + BM - 1, so that band row c, lane m reads R[m][c - c_lo + BM - 1 - m]:
// the band is the transpose of R viewed with row stride ldr - 1.
template <class T>
void Attention<T>::prepare_rel_k(const Work& w, const Block& bk) const {
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

// Relative values: the tile's band rows of P^T transposed into W (row m,
// column c - c_lo, one key each), keys outside the band summed into Wlo / Whi.
template <class T>
void Attention<T>::bin_tile(const Work& w, const Block& bk, int64_t j0, int64_t nn) const {
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
template <class T>
void Attention<T>::finish_values(const Work& w, const Block& bk) const {
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

template void Attention<float>::pack_rel_k();
template void Attention<float>::prepare_rel_q();
template void Attention<float>::add_rel_q(const Work&, const Block&, int64_t, int64_t) const;
template void Attention<float>::prepare_rel_k(const Work&, const Block&) const;
template void Attention<float>::bin_tile(const Work&, const Block&, int64_t, int64_t) const;
template void Attention<float>::finish_values(const Work&, const Block&) const;
template void Attention<double>::pack_rel_k();
template void Attention<double>::prepare_rel_q();
template void Attention<double>::add_rel_q(const Work&, const Block&, int64_t, int64_t) const;
template void Attention<double>::prepare_rel_k(const Work&, const Block&) const;
template void Attention<double>::bin_tile(const Work&, const Block&, int64_t, int64_t) const;
template void Attention<double>::finish_values(const Work&, const Block&) const;

}  // namespace posenc::kernels::detail::attention_fwd
