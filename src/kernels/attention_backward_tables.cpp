// The backward's per-call set-up and wrap-up: the relative and grid tables
// expanded per offset, the layout of the thread scratch and of the per-head
// partials, and the fold of those partials into the table gradients.
#include "attention_backward_kernel.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace posenc::kernels::detail::attention_bwd {

// The relative tables once per offset x (d = x + d_min): rows (x, Dhp) and
// transposed (D, ldx); the grid tables padded and transposed.
template <class T>
void Backward<T>::prepare_tables() {
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

template <class T>
void Backward<T>::layout_scratch() {
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

template <class T>
typename Backward<T>::Work Backward<T>::carve(T* base) const {
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

template <class T>
void Backward<T>::set_partials(Work& w, T* part) const {
  const auto at = [&](int64_t off) { return off < 0 ? nullptr : part + off; };
  w.du = at(part_.du), w.dw = at(part_.dw), w.drk = at(part_.drk), w.drv = at(part_.drv);
  w.dgh = at(part_.dgh), w.dgw = at(part_.dgw), w.dob = at(part_.dob), w.dgb = at(part_.dgb);
  w.drq = at(part_.drq);
}

// Head h's table gradients into the outputs (called in head order).
template <class T>
void Backward<T>::fold_partials(const T* part, int64_t h) const {
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

template void Backward<float>::prepare_tables();
template void Backward<float>::layout_scratch();
template typename Backward<float>::Work Backward<float>::carve(float*) const;
template void Backward<float>::set_partials(Work&, float*) const;
template void Backward<float>::fold_partials(const float*, int64_t) const;
template void Backward<double>::prepare_tables();
template void Backward<double>::layout_scratch();
template typename Backward<double>::Work Backward<double>::carve(double*) const;
template void Backward<double>::set_partials(Work&, double*) const;
template void Backward<double>::fold_partials(const double*, int64_t) const;

}  // namespace posenc::kernels::detail::attention_bwd
