// Relative position vectors inside attention: Shaw et al. 2018 (learned,
// clipped), NEZHA's fixed sinusoidal table, Wang et al. 2021's learnable
// sinusoidal one, and Transformer-XL's W_R R (a table over every offset).
// A table holds 2k+1 vectors of head_dim; query i and key j use row
//   r(i, j) = clip(o, -k, k) + k,   o = j - (i + query_offset)
// (query_offset places query 0 on the key axis; 0 when Tq = Tk).
//
//   logits      out[b,h,i,j] = q[b,h,i,:] . table[t(h), r(i,j), :]          (Tq, Tk)
//   values      out[b,h,i,:] = sum_j probs[b,h,i,j] table[t(h), r(i,j), :]    (Tq, Dh)
//   table_grad  grad[t, r, :] = sum over b, h with t(h) = t, and (i, j) with
//               r(i,j) = r, of w[b,h,i,j] x[b,h,i,:]                           (2k+1, Dh)
// t(h) = 0 for a shared table (tables = 1) and h for one per head (tables = H).
// The three are bilinear and each one's derivatives are the others:
//   logits(q, T):      dq = values(g, T),  dT = table_grad(g, q)
//   values(p, T):      dp = logits(g, T),  dT = table_grad(p, g)
//   table_grad(w, x):  dw = logits(x, G),  dx = values(w, G)
// No (Tq, Tk, Dh) tensor is formed: a block of query rows is multiplied with
// the table rows its offsets reach (at most Tk + block - 1 of them, or 2k+1),
// and the products are then addressed by index (the "skewing" of Shaw et al.
// and Huang et al. 2018 as index arithmetic). Extra memory is a block-sized
// scratch per thread.
#pragma once

#include <cstdint>

#include "posenc/kernels/batched_matrix.h"

namespace posenc::kernels {

struct RelativeParams {
  int64_t max_distance = 0;  // k >= 0
  int64_t query_offset = 0;  // |query_offset| <= 2^62
};

// [tables, 2k+1, dim], contiguous.
template <class T>
struct RelativeTable {
  T* data = nullptr;
  int64_t tables = 1, rows = 0, dim = 0;
};

// Checks params and a table against heads and head_dim. Messages (op is the
// caller's name, e.g. "relative_logits"):
//   "[op] max_distance must be >= 0, got -1"
//   "[op] query_offset must be within +-2^62, got ..."
//   "[op] table must have 2*max_distance+1 = 9 rows, got 8"
//   "[op] table must have head_dim = 64 columns, got 32"
//   "[op] table must be shared (1 table) or one per head (8 tables), got 3"
void validate_relative(const char* op, const RelativeParams& params, int64_t tables, int64_t rows, int64_t dim,
                       int64_t heads, int64_t head_dim);

// q: (B, H, Tq, Dh); out: (B, H, Tq, Tk), overwritten. T is float or double.
// Throws as validate_relative, and "[op] out must be (B, H, Tq) = (1, 8, 16)
// like q, got (1, 8, 15)" for mismatched views.
template <class T>
void relative_logits(const RelativeParams& params, BatchedMatrix<const T> q, RelativeTable<const T> table,
                     BatchedMatrix<T> out, const char* op = "relative_logits");

// probs: (B, H, Tq, Tk); out: (B, H, Tq, Dh), overwritten.
template <class T>
void relative_values(const RelativeParams& params, BatchedMatrix<const T> probs, RelativeTable<const T> table,
                     BatchedMatrix<T> out, const char* op = "relative_values");

// weights: (B, H, Tq, Tk); x: (B, H, Tq, Dh); grad: [tables, 2k+1, Dh],
// overwritten. Deterministic: each table row is summed in a fixed order
// whatever the thread count.
template <class T>
void relative_table_grad(const RelativeParams& params, BatchedMatrix<const T> weights, BatchedMatrix<const T> x,
                         RelativeTable<T> grad, const char* op = "relative_table_grad");

}  // namespace posenc::kernels
