// DeBERTa's log buckets and dense disentangled-attention references (deberta.h).
#include "posenc/kernels/deberta.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>

#include "posenc/error.h"

namespace posenc::kernels {

void validate_deberta(const DebertaParams& params, const char* op) {
  const int64_t buckets = params.position_buckets, max_rel = params.max_relative_positions;
  require(max_rel >= 1, op, "max_relative_positions must be >= 1, got ", max_rel);
  require(buckets == 0 || buckets >= 2, op, "position_buckets must be 0 (no buckets) or >= 2, got ", buckets);
  require(buckets <= max_rel, op, "position_buckets must be <= max_relative_positions, got ", buckets, " > ",
          max_rel);
  // Keeps 2 * span rows and every bucket far inside int64.
  require(max_rel <= (int64_t{1} << 40), op, "max_relative_positions must be <= 2^40, got ", max_rel);
  require(buckets == 0 || max_rel > buckets / 2 + 1, op, "max_relative_positions must be > position_buckets / 2 + 1 = ",
          buckets / 2 + 1, ", got ", max_rel);
}

int64_t deberta_span(const DebertaParams& params) noexcept {
  return params.position_buckets > 0 ? params.position_buckets : params.max_relative_positions;
}

int64_t deberta_bucket(const DebertaParams& params, int64_t relative) noexcept {
  if (params.position_buckets <= 0) return relative;
  const int64_t mid = params.position_buckets / 2;
  const int64_t a = relative < 0 ? -relative : relative;
  if (a <= mid) return relative;
  // float32 throughout, as torch computes abs_pos / mid and the logs under its default dtype.
  const float ratio = static_cast<float>(a) / static_cast<float>(mid);
  const float base = std::log(static_cast<float>(static_cast<double>(params.max_relative_positions - 1) / mid));
  const float log_pos = std::ceil(std::log(ratio) / base * static_cast<float>(mid - 1)) + static_cast<float>(mid);
  const auto pos = static_cast<int64_t>(log_pos);
  return relative < 0 ? -pos : pos;
}

int64_t deberta_row(const DebertaParams& params, int64_t delta) noexcept {
  const int64_t span = deberta_span(params);
  // Buckets beyond +-2^40 clamp the same way; keeps the sum in range for any delta.
  const int64_t b = std::clamp<int64_t>(deberta_bucket(params, delta), -(int64_t{1} << 50), int64_t{1} << 50);
  return std::clamp<int64_t>(b + span, 0, 2 * span - 1);
}

void deberta_row_index(const DebertaParams& params, int64_t max_distance, int64_t* index) noexcept {
  for (int64_t c = 0; c <= 2 * max_distance; ++c) index[c] = deberta_row(params, max_distance - c);
}

void deberta_bias_reference(const DebertaParams& params, int64_t batch, int64_t heads, int64_t q_len, int64_t k_len,
                            int64_t head_dim, const double* q, const double* k, const double* pos_key,
                            const double* pos_query, double* out) {
  const int64_t rows = 2 * deberta_span(params), dh = head_dim;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < q_len; ++i)
        for (int64_t j = 0; j < k_len; ++j) {
          const int64_t r = deberta_row(params, i + k_len - q_len - j);
          const double* qi = q + ((b * heads + h) * q_len + i) * dh;
          const double* kj = k + ((b * heads + h) * k_len + j) * dh;
          long double sum = 0;
          for (int64_t d = 0; d < dh; ++d) {
            if (pos_key != nullptr) sum += static_cast<long double>(qi[d]) * pos_key[(h * rows + r) * dh + d];
            if (pos_query != nullptr) sum += static_cast<long double>(kj[d]) * pos_query[(h * rows + r) * dh + d];
          }
          out[((b * heads + h) * q_len + i) * k_len + j] = static_cast<double>(sum);
        }
}

void deberta_bias_backward_reference(const DebertaParams& params, int64_t batch, int64_t heads, int64_t q_len,
                                     int64_t k_len, int64_t head_dim, const double* q, const double* k,
                                     const double* pos_key, const double* pos_query, const double* grad, double* dq,
                                     double* dk, double* dpos_key, double* dpos_query) {
  const int64_t rows = 2 * deberta_span(params), dh = head_dim;
  if (dq != nullptr) std::fill_n(dq, batch * heads * q_len * dh, 0.0);
  if (dk != nullptr) std::fill_n(dk, batch * heads * k_len * dh, 0.0);
  if (dpos_key != nullptr) std::fill_n(dpos_key, heads * rows * dh, 0.0);
  if (dpos_query != nullptr) std::fill_n(dpos_query, heads * rows * dh, 0.0);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < q_len; ++i)
        for (int64_t j = 0; j < k_len; ++j) {
          const int64_t r = deberta_row(params, i + k_len - q_len - j);
          const double g = grad[((b * heads + h) * q_len + i) * k_len + j];
          const int64_t qi = ((b * heads + h) * q_len + i) * dh, kj = ((b * heads + h) * k_len + j) * dh;
          const int64_t tr = (h * rows + r) * dh;
          for (int64_t d = 0; d < dh; ++d) {
            if (pos_key != nullptr) {
              if (dq != nullptr) dq[qi + d] += g * pos_key[tr + d];
              if (dpos_key != nullptr) dpos_key[tr + d] += g * q[qi + d];
            }
            if (pos_query != nullptr) {
              if (dk != nullptr) dk[kj + d] += g * pos_query[tr + d];
              if (dpos_query != nullptr) dpos_query[tr + d] += g * k[kj + d];
            }
          }
        }
}

}  // namespace posenc::kernels
