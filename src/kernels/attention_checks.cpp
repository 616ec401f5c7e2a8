// The argument checks shared by the fused attention forward (attention.cpp)
// and backward (attention_backward.cpp), declared in attention.h.
#include <cmath>
#include <cstdint>

#include "posenc/error.h"
#include "posenc/kernels/attention.h"

namespace posenc::kernels {

void validate_attention(const char* op, const AttentionParams& params, int64_t batch, int64_t heads, int64_t q_len,
                        int64_t k_len, int64_t head_dim, int64_t value_dim, int64_t rel_tables, int64_t max_distance,
                        bool grid_terms, int64_t grid_height, int64_t grid_width, int64_t grid_tables) {
  require(batch >= 0 && heads >= 0 && q_len >= 0 && k_len >= 0 && head_dim >= 0 && value_dim >= 0, op,
          "sizes (B, H, Tq, Tk, Dh, Dv) must be >= 0, got (", batch, ", ", heads, ", ", q_len, ", ", k_len, ", ",
          head_dim, ", ", value_dim, ")");
  require(std::isfinite(params.scale) && params.scale > 0, op, "scale must be finite and > 0, got ", params.scale);
  require(!params.causal || q_len <= k_len, op, "causal needs q_len <= k_len, got q_len ", q_len, " and k_len ",
          k_len);
  require(max_distance >= 0, op, "max_distance must be >= 0, got ", max_distance);
  // Beyond this the table (2K+1 rows) cannot exist; keeps 2K + block in range.
  require(max_distance <= (int64_t{1} << 60), op, "max_distance must be <= 2^60, got ", max_distance);
  require(rel_tables == 1 || rel_tables == heads, op, "relative tables must be shared (1) or one per head (", heads,
          "), got ", rel_tables);
  if (grid_terms) {
    require(grid_tables == 1 || grid_tables == heads, op, "2D tables must be shared (1) or one per head (", heads,
            "), got ", grid_tables);
    require(grid_height >= 1 && grid_width >= 1, op, "2D terms need height >= 1 and width >= 1, got height ",
            grid_height, " and width ", grid_width);
    const __int128 cells = static_cast<__int128>(grid_height) * grid_width;
    require(cells == q_len && cells == k_len, op, "2D terms need q_len = k_len = height*width = ",
            static_cast<long double>(cells), ", got q_len ", q_len, " and k_len ", k_len);
  }
}

template <class T>
void validate_tile_bias(const char* op, const AttentionParams& params, const TileBias<T>* tile_bias) {
  if (tile_bias == nullptr) return;  // (the message below reads its name)
  require(!tile_bias->needs_causal() || params.causal, op, "the ", tile_bias->name(),
          " term needs causal attention, got causal false");
}

template <class T>
void validate_rel_index(const char* op, const AttentionTerms<T>& terms) {
  if (terms.rel_index == nullptr) return;
  require(terms.rel_v == nullptr, op, "rel_index addresses rel_k and rel_q, not rel_v");
  require(terms.rel_rows >= 1, op, "rel_index rows must be >= 1, got ", terms.rel_rows);
  for (int64_t c = 0; c <= 2 * terms.max_distance; ++c) {
    require(terms.rel_index[c] >= 0 && terms.rel_index[c] < terms.rel_rows, op, "rel_index[", c,
            "] must be a row in [0, ", terms.rel_rows, "), got ", terms.rel_index[c]);
  }
}

template void validate_rel_index<float>(const char*, const AttentionTerms<float>&);
template void validate_rel_index<double>(const char*, const AttentionTerms<double>&);

template void validate_tile_bias<float>(const char*, const AttentionParams&, const TileBias<float>*);
template void validate_tile_bias<double>(const char*, const AttentionParams&, const TileBias<double>*);

void validate_data(const char* op, const char* name, const void* data, int64_t batch, int64_t heads, int64_t rows,
                   int64_t cols) {
  require(data != nullptr || batch == 0 || heads == 0 || rows == 0 || cols == 0, op, name, " must have data for its (",
          batch, ", ", heads, ", ", rows, ", ", cols, ") elements, got null");
}

template <class T>
void validate_qkv(const char* op, const BatchedMatrix<const T>& q, const BatchedMatrix<const T>& k,
                  const BatchedMatrix<const T>& v) {
  require(q.batch >= 0 && q.heads >= 0 && q.rows >= 0 && q.cols >= 0, op,
          "q must be (B, H, Tq, Dh) with extents >= 0, got (", q.batch, ", ", q.heads, ", ", q.rows, ", ", q.cols,
          ")");
  require(k.batch == q.batch && k.heads == q.heads && k.cols == q.cols && k.rows >= 0, op,
          "k must be (B, H, Tk, Dh) = (", q.batch, ", ", q.heads, ", *, ", q.cols, ") like q, got (", k.batch, ", ",
          k.heads, ", ", k.rows, ", ", k.cols, ")");
  require(v.batch == k.batch && v.heads == k.heads && v.rows == k.rows && v.cols >= 0, op,
          "v must have the keys' (B, H, Tk) = (", k.batch, ", ", k.heads, ", ", k.rows, "), got (", v.batch, ", ",
          v.heads, ", ", v.rows, ")");
}

template void validate_qkv<float>(const char*, const BatchedMatrix<const float>&, const BatchedMatrix<const float>&,
                                  const BatchedMatrix<const float>&);
template void validate_qkv<double>(const char*, const BatchedMatrix<const double>&,
                                   const BatchedMatrix<const double>&, const BatchedMatrix<const double>&);

}  // namespace posenc::kernels
