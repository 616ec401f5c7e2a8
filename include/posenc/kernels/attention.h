// Fused scaled-dot-product attention with the positional terms applied on the
// fly (flash-attention style forward, Dao et al. 2022): key tiles are streamed
// with a running max and sum per query row, so no (Tq, Tk) buffer exists beyond
// one tile per thread, unless the caller asks for the weights.
//
// Query i sits at key position i' = i + Tk - Tq (the queries are the last Tq of
// the Tk keys, as when decoding with a cache); the offset of key j is d = j - i'.
//
//   s[i,j] = scale * ( (q_i + u_h) . k_j                                  content
//                    + (q_i + w_h) . rel_k[t(h), clip(d, -K, K) + K]       relative keys
//                    + k_j . rel_q[t(h), clip(d, -K, K) + K]               relative queries (DeBERTa's p2c)
//                    + q_i . (grid_h[t(h), y_j - y_i + Hg - 1]
//                           + grid_w[t(h), x_j - x_i + Wg - 1]) )          2D relative
//          + offset_bias[h, d + Tk - 1]                                     1D bias by offset
//          + grid_bias[h, y_j - y_i + Hg - 1, x_j - x_i + Wg - 1]           2D bias by offset
//          + bias[b?, h, i, j]                                              any dense bias
//          + tile_bias(b, h, i', j)                                          computed per tile (FIRE)
//   masked (-inf): j > i' when causal; key_padding[b, j] != 0
//   p[i,:] = softmax(s[i,:]);  a row with every key masked gets p = 0 (output 0)
//   out[i] = sum_j p[i,j] (v_j + rel_v[t(h), clip(d, -K, K) + K])
// With rel_index the rows of rel_k and rel_q are rel_index[clip(d, -K, K) + K]
// instead (DeBERTa's log buckets).
// Every term is optional (a null pointer); t(h) = 0 for a table shared by the
// heads, h for one table per head. Offset and grid biases are O(H*T): ALiBi
// (-m_h |d|), T5 (table[bucket(d), h]) and their 2D forms are written in them.
// 2D terms index rows as y*Wg + x and need Tq = Tk = Hg*Wg. A tile bias
// (tile_bias.h) fills each tile of scores itself: biases that depend on more
// than the offset, never held as a (Tq, Tk) tensor.
//
// Layouts: q (B, H, Tq, Dh), k (B, H, Tk, Dh), v (B, H, Tk, Dv), out (B, H, Tq, Dv),
// weights (B, H, Tq, Tk), each with free batch/head/row strides and unit column
// stride (BatchedMatrix). T is float or double; the math runs in T, softmax
// statistics and accumulators in T as well.
#pragma once

#include <cstdint>

#include "posenc/kernels/batched_matrix.h"
#include "posenc/kernels/tile_bias.h"

namespace posenc::kernels {

template <class T>
struct AttentionTerms {
  // Content query shift u: [H, Dh] (Transformer-XL's u). Null: none.
  const T* content_shift = nullptr;
  // Relative vectors: [tables, 2K+1, Dh] for the keys, [tables, 2K+1, Dv] for
  // the values; tables 1 or H. Either may be null; max_distance K >= 0.
  const T* rel_k = nullptr;
  const T* rel_v = nullptr;
  int64_t rel_tables = 1;
  int64_t max_distance = 0;
  // Relative query shift w: [H, Dh] added to q for the rel_k term only
  // (Transformer-XL's v). Null: none.
  const T* relative_shift = nullptr;
  // Relative query table [tables, rows, Dh]: k_j . rel_q[t(h), row(d)] (DeBERTa's
  // position-to-content term), rows addressed as rel_k's. Null: none.
  const T* rel_q = nullptr;
  // [2K+1]: the table row of clip(d, -K, K) + K for rel_k and rel_q, each in
  // [0, rel_rows) (rel_v must be null). Null: the row is clip(d, -K, K) + K.
  const int64_t* rel_index = nullptr;
  int64_t rel_rows = 0;
  // 2D relative (BoTNet): grid_h [tables, 2Hg-1, Dh], grid_w [tables, 2Wg-1, Dh].
  const T* grid_h = nullptr;
  const T* grid_w = nullptr;
  int64_t grid_tables = 1;
  // Grid size for grid_h/grid_w and grid_bias (0 when neither is used).
  int64_t grid_height = 0, grid_width = 0;
  // [H, Tq + Tk - 1]: element d + Tk - 1 is the bias of offset d in [-(Tk-1), Tq-1].
  const T* offset_bias = nullptr;
  // [H, 2Hg-1, 2Wg-1].
  const T* grid_bias = nullptr;
  // Dense bias (B, H, Tq, Tk) with free strides; stride_b 0 broadcasts over the batch.
  const T* bias = nullptr;
  int64_t bias_stride_b = 0, bias_stride_h = 0, bias_stride_r = 0;
  // A bias computed per tile (FIRE). Null: none.
  const TileBias<T>* tile_bias = nullptr;
};

struct AttentionParams {
  double scale = 1.0;  // finite, > 0
  bool causal = false;  // needs Tq <= Tk
  // (B, Tk) bytes, non-zero = the key is padding (ignored); row stride in bytes. Null: none.
  const uint8_t* key_padding = nullptr;
  int64_t key_padding_stride = 0;
};

// Checks shapes and params; messages (op is the caller's name):
//   "[attention] k must be (B, H, Tk, Dh) = (1, 8, *, 64) like q, got (1, 8, 16, 32)"
//   "[attention] v must have the keys' (B, H, Tk) = (1, 8, 16), got (1, 8, 15)"
//   "[attention] out must be (B, H, Tq, Dv) = (1, 8, 16, 64), got ..."
//   "[attention] scale must be finite and > 0, got -1"
//   "[attention] causal needs q_len <= k_len, got q_len 9 and k_len 8"
//   "[attention] max_distance must be >= 0, got -1"
//   "[attention] relative tables must be shared (1) or one per head (8), got 3"
//   "[attention] 2D terms need q_len = k_len = height*width = 2025, got q_len 2048 and k_len 2048"
//   "[attention] weights must be (B, H, Tq, Tk) = ..., got ..."
//   "[attention] the fire term needs causal attention, got causal false"
void validate_attention(const char* op, const AttentionParams& params, int64_t batch, int64_t heads, int64_t q_len,
                        int64_t k_len, int64_t head_dim, int64_t value_dim, int64_t rel_tables, int64_t max_distance,
                        bool grid_terms, int64_t grid_height, int64_t grid_width, int64_t grid_tables);

// rel_index: "[attention] rel_index addresses rel_k and rel_q, not rel_v",
// "[attention] rel_index rows must be >= 1, got 0",
// "[attention] rel_index[3] must be a row in [0, 512), got 600".
template <class T>
void validate_rel_index(const char* op, const AttentionTerms<T>& terms);

// A tile bias that needs_causal() with params.causal false:
// "[attention] the fire term needs causal attention, got causal false".
template <class T>
void validate_tile_bias(const char* op, const AttentionParams& params, const TileBias<T>* tile_bias);

// An operand with elements needs data: "[attention] q must have data for its (1, 2, 3, 4) elements, got null".
void validate_data(const char* op, const char* name, const void* data, int64_t batch, int64_t heads, int64_t rows,
                   int64_t cols);
template <class T>
void validate_data(const char* op, const char* name, const BatchedMatrix<T>& m) {
  validate_data(op, name, m.data, m.batch, m.heads, m.rows, m.cols);
}

// Checks q, k, v against each other (the first two messages above; q's extents >= 0).
template <class T>
void validate_qkv(const char* op, const BatchedMatrix<const T>& q, const BatchedMatrix<const T>& k,
                  const BatchedMatrix<const T>& v);

// out (B, H, Tq, Dv) overwritten. weights, when its data is non-null, receives
// the probabilities p (B, H, Tq, Tk). logsumexp, when non-null, receives each
// row's log sum_j exp(s[i,j]) (B, H, Tq) contiguous, what the backward needs
// to recompute p; +inf on a row with every key masked. Parallel over (b, h,
// query block) with OpenMP; deterministic and independent of the thread count.
template <class T>
void attention_forward(const AttentionParams& params, BatchedMatrix<const T> q, BatchedMatrix<const T> k,
                       BatchedMatrix<const T> v, const AttentionTerms<T>& terms, BatchedMatrix<T> out,
                       BatchedMatrix<T> weights = {}, const char* op = "attention", T* logsumexp = nullptr);

}  // namespace posenc::kernels
