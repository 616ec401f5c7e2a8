// FIRE (Li et al. 2023, "Functional Interpolation for Relative Positions
// Improves Long Context Transformers", arXiv 2310.04418): a causal logit bias
// that is a learned function of the offset, progressively interpolated by the
// query position i' (= i + Tk - Tq) so that every query sees inputs in [0, 1]:
//   b_h(i', j) = f(x)_h,  x = psi(i' - j) / psi(max(L, i')),  psi(t) = log(1 + c t),  j <= i'
//   f(x)_h     = b2[h] + sum_k w2[h, k] relu(w1[k] x + b1[k])    (1 -> hidden -> H)
// c > 0 and the threshold L > 0 are learned scalars; keys j > i' are masked
// (the paper defines FIRE for decoders). Layouts: w1, b1 [hidden] (the
// 1 -> hidden layer), w2 [H, hidden] (torch.nn.Linear(hidden, H).weight), b2 [H].
// Gradients, with g = dL/db, a_k = w1[k] x + b1[k], m = max(L, i'), D = psi(m):
//   dw2[h,k] = g relu(a_k)   db2[h] = g   gx = sum_k g w2[h,k] [a_k > 0] w1[k]
//   dw1[k] = g w2[h,k] [a_k > 0] x        db1[k] = g w2[h,k] [a_k > 0]
//   dc = gx ((i'-j) / (1 + c (i'-j)) - x m / (1 + c m)) / D
//   dL = -gx x c / ((1 + c L) D) when L > i', else 0 (the max's other branch)
// Everything is computed in T (float or double); tiles share psi over their
// offsets, so a tile of R x N pairs costs R + N logarithms.
#pragma once

#include <cstdint>

#include "posenc/kernels/tile_bias.h"

namespace posenc::kernels {

template <class T>
struct FireParams {
  int64_t num_heads = 0;  // H >= 1
  int64_t hidden = 0;     // >= 1 (the paper: 32)
  const T* w1 = nullptr;  // [hidden]
  const T* b1 = nullptr;  // [hidden]
  const T* w2 = nullptr;  // [H, hidden]
  const T* b2 = nullptr;  // [H]
  T c = 0;                // > 0 (the paper's code starts at 0.1)
  T threshold = 0;        // L > 0 (the paper's code starts at 512)
};

// Typed views of a gradient buffer of fire_gradient_size() elements, in this
// order: w1 [hidden], b1 [hidden], w2 [H, hidden], b2 [H], c, threshold.
template <class U>
struct FireGradients {
  U *w1, *b1, *w2, *b2, *c, *threshold;
};
int64_t fire_gradient_size(int64_t num_heads, int64_t hidden) noexcept;
template <class U>
FireGradients<U> fire_gradients(U* buffer, int64_t num_heads, int64_t hidden) noexcept;

// "[op] num_heads must be >= 1, got 0", "[op] hidden must be >= 1, got 0",
// "[op] c must be > 0, got -1", "[op] threshold L must be > 0, got 0"
// (NaN and infinity fail too), "[op] w1, b1, w2 and b2 must not be null".
template <class T>
void validate(const FireParams<T>& params, const char* op = "fire");

// Elements of T scratch for one tile of up to rows x cols pairs.
int64_t fire_tile_scratch(int64_t rows, int64_t cols) noexcept;

// One head's tile (addressing as kernels/tile_bias.h): s += b_h(i', j) for
// j <= i'; other pairs untouched. Unchecked (validate first).
template <class T>
void fire_tile(const FireParams<T>& params, int64_t head, int64_t row0, int64_t rows, int64_t col0, int64_t cols,
               T* s, int64_t stride_r, int64_t stride_n, T* scratch) noexcept;

// grad: dL/db on the tile (same addressing); partial += the parameter
// gradients (fire_gradients layout) of the pairs j <= i'. Unchecked.
template <class T>
void fire_tile_backward(const FireParams<T>& params, int64_t head, int64_t row0, int64_t rows, int64_t col0,
                        int64_t cols, const T* grad, int64_t stride_r, int64_t stride_n, double* partial,
                        T* scratch) noexcept;

// Dense bias out [H, q_len, k_len] (query i at i' = i + k_len - q_len),
// overwritten: 0 where j > i'. Validates; parallel over heads and row tiles.
template <class T>
void fire_bias(const FireParams<T>& params, int64_t q_len, int64_t k_len, T* out, const char* op = "fire");

// grad [H, q_len, k_len] -> the parameter gradients, overwritten (each a
// sum accumulated in double, per head in one fixed order, so the result does
// not depend on the thread count). Pairs j > i' contribute nothing.
template <class T>
void fire_bias_backward(const FireParams<T>& params, int64_t q_len, int64_t k_len, const T* grad,
                        const FireGradients<T>& out, const char* op = "fire");

// The term for the fused attention (AttentionTerms::tile_bias). Holds a copy
// of params (the weights by pointer: they must outlive the call).
template <class T>
class FireTileBias final : public TileBias<T> {
 public:
  explicit FireTileBias(const FireParams<T>& params, const char* op = "fire");
  const char* name() const noexcept override { return "fire"; }
  bool needs_causal() const noexcept override { return true; }
  int64_t scratch_size(int64_t rows, int64_t cols) const noexcept override { return fire_tile_scratch(rows, cols); }
  void add(int64_t, int64_t head, int64_t row0, int64_t rows, int64_t col0, int64_t cols, T* s, int64_t stride_r,
           int64_t stride_n, T* scratch) const noexcept override {
    fire_tile(p_, head, row0, rows, col0, cols, s, stride_r, stride_n, scratch);
  }
  // The fire_gradients layout.
  int64_t gradient_size() const noexcept override { return fire_gradient_size(p_.num_heads, p_.hidden); }
  void accumulate_gradient(int64_t, int64_t head, int64_t row0, int64_t rows, int64_t col0, int64_t cols,
                           const T* ds, int64_t stride_r, int64_t stride_n, double* partial,
                           T* scratch) const noexcept override {
    fire_tile_backward(p_, head, row0, rows, col0, cols, ds, stride_r, stride_n, partial, scratch);
  }
  const FireParams<T>& params() const noexcept { return p_; }

 private:
  FireParams<T> p_;
};

namespace reference {
// The formula above pair by pair in long double, [H, q_len, k_len], 0 where j > i'.
template <class T>
void fire_bias(const FireParams<T>& params, int64_t q_len, int64_t k_len, double* out);
}  // namespace reference

}  // namespace posenc::kernels
