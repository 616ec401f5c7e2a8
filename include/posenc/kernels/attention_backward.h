// Backward of the fused attention (attention.h), FlashAttention-2 style
// (Dao 2023): the probabilities are recomputed tile by tile from the row
// log-sum-exp the forward saved, p = exp(s - lse), so no (Tq, Tk) buffer
// exists beyond one tile per thread. With g = dL/dout and
//   dp[i,j] = g_i . (v_j + rel_v[c(i,j)]),  D_i = g_i . out_i,  ds = p (dp - D_i)
// (c(i,j) = clip(j - i', -K, K) + K) every input's gradient is a sum of ds or p:
//   dq_i  = scale sum_j ds (k_j + rel_k[c] + grid_h[..] + grid_w[..])
//   dk_j  = scale sum_i ds (q_i + u)          dv_j = sum_i p g_i
//   du    = scale sum ds k_j                  dw   = scale sum ds rel_k[c]
//   drel_k[r] = scale sum_{c(i,j)=r} ds (q_i + w)    drel_v[r] = sum_{c(i,j)=r} p g_i
//   rel_q (k_j . rel_q[c]): dk_j += scale sum_i ds rel_q[c],  drel_q[r] = scale sum_{c(i,j)=r} ds k_j
//   dgrid_h[t] = scale sum ds q_i over pairs at that row offset (grid_w likewise)
//   doffset_bias[h, d + Tk - 1] = sum over b and pairs at offset d of ds
//   dgrid_bias likewise by (dy, dx);  dbias = ds (dense, (B, H, Tq, Tk))
//   dtile_bias = the term's own sum over tiles of ds * db/dparams
// Masked pairs have p = 0 and get no gradient; rows with every key masked
// (lse = +inf) give zeros, as the composed path.
//
// Work: one head per task (its batches in order), parallel with OpenMP
// (dynamic schedule: a thread that loses its core to another process takes
// fewer heads). dq, dk, dv and the head's table gradients are each summed in
// one fixed order; tables shared by the heads get the heads' sums in head
// order; a tile bias's parameter gradients are accumulated per head (in
// double) and summed in head order too. Results are deterministic and do not
// depend on the thread count.
// Extra memory per thread: O((Tq + Tk) * (Dh + Dv)) for the packed keys,
// values and relative bands; per head, the table gradients (O((Tq + Tk) * Dh)
// with relative tables).
#pragma once

#include <cstdint>

#include "posenc/kernels/attention.h"
#include "posenc/kernels/batched_matrix.h"

namespace posenc::kernels {

// Gradients to compute; a null pointer (or null data) skips one. Shapes are
// those of the terms (AttentionTerms<T>), contiguous, overwritten:
//   content_shift, relative_shift [H, Dh]; rel_k [tables, 2K+1, Dh];
//   rel_v [tables, 2K+1, Dv]; rel_q like rel_k (rel_k and rel_q have rel_rows rows
//   with rel_index); grid_h [grid_tables, 2Hg-1, Dh]; grid_w
//   [grid_tables, 2Wg-1, Dh]; offset_bias [H, Tq + Tk - 1]; grid_bias
//   [H, 2Hg-1, 2Wg-1]; bias (B, H, Tq, Tk) (dense, summed by the caller to
//   the bias's own shape); tile_bias [terms.tile_bias->gradient_size()] in
//   double, laid out as the term documents.
template <class T>
struct AttentionGradients {
  BatchedMatrix<T> q, k, v;
  T* content_shift = nullptr;
  T* relative_shift = nullptr;
  T* rel_k = nullptr;
  T* rel_v = nullptr;
  T* rel_q = nullptr;
  T* grid_h = nullptr;
  T* grid_w = nullptr;
  T* offset_bias = nullptr;
  T* grid_bias = nullptr;
  BatchedMatrix<T> bias;
  double* tile_bias = nullptr;
};

// out and logsumexp are the forward's (attention_forward with logsumexp);
// grad_out (B, H, Tq, Dv) with free strides. The shapes are checked as in
// attention_forward, and each requested gradient against its term:
//   "[attention] the gradient of rel_k needs the rel_k term, got none"
template <class T>
void attention_backward(const AttentionParams& params, BatchedMatrix<const T> q, BatchedMatrix<const T> k,
                        BatchedMatrix<const T> v, const AttentionTerms<T>& terms, BatchedMatrix<const T> out,
                        const T* logsumexp, BatchedMatrix<const T> grad_out, const AttentionGradients<T>& grads,
                        const char* op = "attention");

}  // namespace posenc::kernels
