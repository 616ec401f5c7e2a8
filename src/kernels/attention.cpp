// Fused attention forward (formula and layouts in attention.h; the algorithm,
// the class and its scratch in attention_kernel.h): the driver, work items
// (b, h, query block) over the threads and each block's loop over key tiles.
#include "posenc/kernels/attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "attention_kernel.h"
#include "posenc/error.h"

namespace posenc::kernels {

namespace detail::attention_fwd {

template <class T>
Attention<T>::Attention(const AttentionParams& params, BatchedMatrix<const T> q, BatchedMatrix<const T> k,
                        BatchedMatrix<const T> v, const AttentionTerms<T>& terms, BatchedMatrix<T> out,
                        BatchedMatrix<T> weights, T* logsumexp)
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

template <class T>
void Attention<T>::run() {
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

// Q block transposed and scaled; padded lanes zero.
template <class T>
void Attention<T>::pack_queries(const Work& w, const Block& bk) const {
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

template <class T>
void Attention<T>::block(const Work& w, int64_t b, int64_t h, int64_t blk) const {
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
template <class T>
void Attention<T>::write_weights(const Work& w, const Block& bk) const {
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

template class Attention<float>;
template class Attention<double>;

}  // namespace detail::attention_fwd

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
  detail::attention_fwd::Attention<T>(params, q, k, v, terms, out, weights, logsumexp).run();
}

template void attention_forward<float>(const AttentionParams&, BatchedMatrix<const float>, BatchedMatrix<const float>,
                                       BatchedMatrix<const float>, const AttentionTerms<float>&, BatchedMatrix<float>,
                                       BatchedMatrix<float>, const char*, float*);
template void attention_forward<double>(const AttentionParams&, BatchedMatrix<const double>,
                                        BatchedMatrix<const double>, BatchedMatrix<const double>,
                                        const AttentionTerms<double>&, BatchedMatrix<double>, BatchedMatrix<double>,
                                        const char*, double*);

}  // namespace posenc::kernels
