// DeBERTa's disentangled attention (He et al., ICLR 2021; the v2/v3 form of
// Hugging Face's modeling_deberta_v2.py): besides content-to-content q_i . k_j
// the logits get content-to-position and position-to-content terms read from
// 2*span projected relative embeddings,
//   c2p[i,j] = q_i . pos_key[row(i' - j)]      p2c[i,j] = k_j . pos_query[row(i' - j)]
//   s[i,j]   = (q_i . k_j + c2p + p2c) / sqrt(Dh * scale_factor),  scale_factor = 1 + #terms
// (i' = i + Tk - Tq; HF's p2c gathers at -r_pos on the transposed pairs, which
// is the same row since the buckets are odd: bucket(-x) = -bucket(x)).
//   bucket(x) = x                                  for |x| <= mid = position_buckets / 2
//             = sign(x) (ceil(log(|x| / mid) / log((max_relative_positions - 1) / mid) * (mid - 1)) + mid)
//   row(x)    = clamp(bucket(x) + span, 0, 2 span - 1),  span = position_buckets (max_relative_positions
//               when position_buckets = 0: no buckets, HF's -1)
// The log is taken in float32 as HF's make_log_bucket_position does under
// torch's default dtype (a double log moves a few far offsets by one bucket).
// The fused attention (attention.h) takes c2p as its rel_k term and p2c as
// its rel_q term, both addressed through deberta_row_index.
#pragma once

#include <cstdint>

namespace posenc::kernels {

struct DebertaParams {
  int64_t position_buckets = 256;        // 0: no log buckets; else in [2, max_relative_positions]
  int64_t max_relative_positions = 512;  // >= 1
};

// Messages:
//   "[deberta] max_relative_positions must be >= 1, got 0"
//   "[deberta] position_buckets must be 0 (no buckets) or >= 2, got 1"
//   "[deberta] position_buckets must be <= max_relative_positions, got 300 > 256"
//   "[deberta] max_relative_positions must be > position_buckets / 2 + 1 = 2, got 2" (log((max - 1) / mid) = 0)
void validate_deberta(const DebertaParams& params, const char* op = "deberta");

// att_span: position_buckets, or max_relative_positions without buckets. The tables have 2 * span rows.
int64_t deberta_span(const DebertaParams& params) noexcept;
// make_log_bucket_position(x, position_buckets, max_relative_positions); x itself without buckets.
int64_t deberta_bucket(const DebertaParams& params, int64_t relative) noexcept;
// clamp(bucket(delta) + span, 0, 2 span - 1) for delta = i' - j.
int64_t deberta_row(const DebertaParams& params, int64_t delta) noexcept;
// The fused attention's rel_index for max_distance K: index[c] = row(-(c - K)), c in [0, 2K]
// (the kernel's offset is d = j - i' = c - K, clipped to [-K, K]; K >= max(Tq, Tk) - 1 clips nothing).
void deberta_row_index(const DebertaParams& params, int64_t max_distance, int64_t* index) noexcept;

// Dense references for tests, float64, contiguous: q (B, H, Tq, Dh), k (B, H, Tk, Dh),
// pos_key / pos_query [H, 2 span, Dh] (either may be null: term absent).
//   out (B, H, Tq, Tk) = c2p + p2c (unscaled), overwritten.
void deberta_bias_reference(const DebertaParams& params, int64_t batch, int64_t heads, int64_t q_len, int64_t k_len,
                            int64_t head_dim, const double* q, const double* k, const double* pos_key,
                            const double* pos_query, double* out);
// grad (B, H, Tq, Tk) -> dq, dk, dpos_key, dpos_query (each overwritten; null: skipped).
void deberta_bias_backward_reference(const DebertaParams& params, int64_t batch, int64_t heads, int64_t q_len,
                                     int64_t k_len, int64_t head_dim, const double* q, const double* k,
                                     const double* pos_key, const double* pos_query, const double* grad, double* dq,
                                     double* dk, double* dpos_key, double* dpos_query);

}  // namespace posenc::kernels
