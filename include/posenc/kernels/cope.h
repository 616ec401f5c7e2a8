// CoPE (Golovneva et al. 2024, "Contextual Position Encoding: Learning to
// Count What's Important", arXiv 2405.18719): a causal logit term whose
// positions are counted by the content. Per (batch, head), query i at key
// position i' = i + Tk - Tq, keys j <= i':
//   g_ij = sigmoid(scale q_i . k_j)              gates; 0 for a padded key
//   p_ij = sum_{t=j}^{i'} g_it                   non-increasing in j, p_i'i' = g_i'i'
//   P    = min(p_ij, npos - 1),  f = floor P,  c = ceil P,  w = P - f
//   z_i[t] = q_i . e[t]                           t < npos (e shared by the heads)
//   b_ij = (1 - w) z_i[f] + w z_i[c]             added to the logits, unscaled
// This is the paper's code (its SelfAttn/CoPE listing): gates from the scaled
// logits q.k / sqrt(Dh) (scale = 1/sqrt(Dh) there), masked keys count 0
// (sigmoid(-inf)), pos_emb [1, Dh, npos_max] shared by the heads and zero at
// the start, the term added after the scaling. b_ij = 0 for j > i'.
// Gradients, with G = dL/db_ij (p clamped: no gradient through p):
//   A_i[f] += G (1 - w),  A_i[c] += G w           de[t] = sum_i A_i[t] q_i
//   dq_i  = sum_t A_i[t] e[t] + scale sum_t r_it k_t      dk_t = scale sum_i r_it q_i
//   dp_ij = G (z_i[c] - z_i[f]) [p_ij < npos - 1],  r_it = g_it (1 - g_it) sum_{j<=t} dp_ij
// Layouts: q (B, H, Tq, Dh), k (B, H, Tk, Dh) (BatchedMatrix), e [npos, Dh],
// dense b / grad (B, H, Tq, Tk) contiguous, key_padding (B, Tk) bytes.
#pragma once

#include <cstdint>

#include "posenc/kernels/batched_matrix.h"
#include "posenc/kernels/tile_bias.h"

namespace posenc::kernels {

template <class T>
struct CopeParams {
  int64_t npos = 0;       // >= 1 positions (the paper's npos_max)
  int64_t head_dim = 0;   // Dh >= 1
  const T* e = nullptr;   // [npos, Dh]
  double scale = 1.0;     // of q.k inside the gates: finite, > 0
  // (B, Tk) bytes, non-zero = padding (its gate is 0); row stride in bytes. Null: none.
  const uint8_t* key_padding = nullptr;
  int64_t key_padding_stride = 0;
};

// "[op] npos must be >= 1, got 0", "[op] head_dim must be >= 1, got 0",
// "[op] scale must be finite and > 0, got -1", "[op] e must not be null".
template <class T>
void validate(const CopeParams<T>& params, const char* op = "cope");

// One query row (key position i' = last): gates g[j] and positions p[j]
// (unclamped) for j <= last, z[t] for t < npos. q row, k rows ldk apart
// (pad: the batch's padding row or null). Unchecked.
template <class T>
void cope_row(const CopeParams<T>& params, const T* q, const T* k, int64_t ldk, const uint8_t* pad, int64_t last,
              T* g, T* p, T* z) noexcept;

// Dense term out (B, H, Tq, Tk) contiguous, overwritten (0 where j > i').
// Checks shapes (q, k as attention's; Tq <= Tk; Dh = head_dim). Parallel over (b, h).
template <class T>
void cope_bias(const CopeParams<T>& params, BatchedMatrix<const T> q, BatchedMatrix<const T> k, T* out,
               const char* op = "cope");

// grad (B, H, Tq, Tk) contiguous -> dq, dk (like q, k; either may have null
// data) and de [npos, Dh] (null: skipped), each overwritten. Pairs j > i'
// contribute nothing. de is summed per (b, h) in double, then in (b, h)
// order: the result does not depend on the thread count.
template <class T>
void cope_bias_backward(const CopeParams<T>& params, BatchedMatrix<const T> q, BatchedMatrix<const T> k,
                        const T* grad, BatchedMatrix<T> dq, BatchedMatrix<T> dk, T* de, const char* op = "cope");

// The term for the fused attention (AttentionTerms::tile_bias): per block of
// query rows it keeps each row's gates, positions and z in the thread's
// scratch (O(Tk + npos) per row, never (Tq, Tk)); the backward gathers
// dp and A there and adds dq, dk and de at the end of the block. Holds views
// of q, k and e (they must outlive the call); params.scale must be the
// attention's, params.key_padding its padding. gradient_size: npos * Dh (de).
template <class T>
class CopeTileBias final : public TileBias<T> {
 public:
  CopeTileBias(const CopeParams<T>& params, BatchedMatrix<const T> q, BatchedMatrix<const T> k,
               const char* op = "cope");
  const char* name() const noexcept override { return "cope"; }
  bool needs_causal() const noexcept override { return true; }
  bool needs_rows() const noexcept override { return true; }
  int64_t scratch_size(int64_t rows, int64_t cols) const noexcept override;
  void begin_rows(int64_t batch, int64_t head, int64_t row0, int64_t rows, T* scratch) const noexcept override;
  void add(int64_t batch, int64_t head, int64_t row0, int64_t rows, int64_t col0, int64_t cols, T* s,
           int64_t stride_r, int64_t stride_n, T* scratch) const noexcept override;
  int64_t gradient_size() const noexcept override { return p_.npos * p_.head_dim; }
  void accumulate_gradient(int64_t batch, int64_t head, int64_t row0, int64_t rows, int64_t col0, int64_t cols,
                           const T* ds, int64_t stride_r, int64_t stride_n, double* partial,
                           T* scratch) const noexcept override;
  void finish_rows(int64_t batch, int64_t head, int64_t row0, int64_t rows, T* dq, int64_t dq_stride, T* dk,
                   int64_t dk_stride, double* partial, T* scratch) const noexcept override;

 private:
  int64_t row_size() const noexcept;  // scratch elements per row
  CopeParams<T> p_;
  BatchedMatrix<const T> q_, k_;
};

namespace reference {
// The formula above pair by pair in long double, (B, H, Tq, Tk), 0 where j > i'.
template <class T>
void cope_bias(const CopeParams<T>& params, BatchedMatrix<const T> q, BatchedMatrix<const T> k, double* out);
}  // namespace reference

}  // namespace posenc::kernels
