// The forward's per-call set-up: the extent of the relative band, the
// per-thread scratch layout and its carving, and the read-only inputs the
// threads share. Run once per call, apart from the per-tile loops.
#include "attention_kernel.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

namespace posenc::kernels::detail::attention_fwd {

// Largest band and the range of (unclipped) table rows r - m any block's R reaches.
template <class T>
void Attention<T>::band_extents() {
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

template <class T>
void Attention<T>::layout_scratch() {
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

template <class T>
typename Attention<T>::Work Attention<T>::carve(T* base, int64_t* offsets) const {
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
template <class T>
void Attention<T>::prepare_shared() {
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

template void Attention<float>::band_extents();
template void Attention<float>::layout_scratch();
template typename Attention<float>::Work Attention<float>::carve(float*, int64_t*) const;
template void Attention<float>::prepare_shared();
template void Attention<double>::band_extents();
template void Attention<double>::layout_scratch();
template typename Attention<double>::Work Attention<double>::carve(double*, int64_t*) const;
template void Attention<double>::prepare_shared();

}  // namespace posenc::kernels::detail::attention_fwd
