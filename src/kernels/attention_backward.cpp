// Fused attention backward (formulas in attention_backward.h; the algorithm,
// the class and its scratch in attention_backward_kernel.h): the driver, one
// task per head over the threads, each (b, h) packed and its query tiles.
#include "posenc/kernels/attention_backward.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "attention_backward_kernel.h"
#include "posenc/error.h"

namespace posenc::kernels {

namespace detail::attention_bwd {

template <class T>
Backward<T>::Backward(const AttentionParams& params, BatchedMatrix<const T> q, BatchedMatrix<const T> k,
                      BatchedMatrix<const T> v, const AttentionTerms<T>& terms, BatchedMatrix<const T> out,
                      const T* lse, BatchedMatrix<const T> grad_out, const AttentionGradients<T>& grads)
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

template <class T>
void Backward<T>::run() {
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

// Zero the requested outputs that are accumulated (dq is written per tile).
template <class T>
void Backward<T>::zero_outputs() const {
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

// K (padded rows and transposed) and V^T of head (b, h).
template <class T>
void Backward<T>::pack_head(const Work& w, int64_t b, int64_t h) const {
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
template <class T>
void Backward<T>::head(const Work& w, int64_t b, int64_t h) const {
  pack_head(w, b, h);
  for (const BatchedMatrix<T>* m : {&g_.k, &g_.v}) {
    if (m->data == nullptr) continue;
    for (int64_t j = 0; j < tk_; ++j) std::fill_n(m->row(b, h, j), m->cols, T(0));
  }
  for (int64_t i0 = 0; i0 < tq_; i0 += kBM) query_tile(w, b, h, i0);
}

template <class T>
void Backward<T>::pack_queries(const Work& w, int64_t b, int64_t h, int64_t i0, int64_t mb) const {
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

template <class T>
void Backward<T>::query_tile(const Work& w, int64_t b, int64_t h, int64_t i0) const {
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
template <class T>
void Backward<T>::finish_axis(const T* dr, int64_t ld, int64_t rows, const T* table_rows, T* dtable, const Work& w,
                              int64_t mb) const {
  matmul<T, ALayout::kRows>(mb, dh_, rows, dr, ld, table_rows, dhp_, w.dqg, dhp_, true);
  if (dtable != nullptr) matmul<T, ALayout::kColumns>(rows, dh_, mb, dr, ld, w.qs, dhp_, dtable, dhp_, true);
}

template class Backward<float>;
template class Backward<double>;

}  // namespace detail::attention_bwd

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
  detail::attention_bwd::Backward<T>(params, q, k, v, terms, out, logsumexp, grad_out, grads).run();
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
