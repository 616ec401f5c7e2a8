#include "posenc/kernels/alibi.h"

#include <bit>
#include <cmath>
#include <limits>

#include "bias_rows.h"
#include "posenc/error.h"

namespace posenc::kernels {

std::vector<double> alibi_slopes(int64_t num_heads, const char* op) {
  require(num_heads >= 1, op, "num_heads must be >= 1, got ", num_heads);
  const int64_t c = static_cast<int64_t>(std::bit_floor(static_cast<uint64_t>(num_heads)));
  std::vector<double> slopes(static_cast<size_t>(num_heads));
  // c is a power of two, so every exponent below is exact and exp2 rounds once.
  for (int64_t h = 1; h <= c; ++h) slopes[h - 1] = std::exp2(-8.0 * static_cast<double>(h) / static_cast<double>(c));
  // The slopes of 2c heads at odd h: 2^(-8h/(2c)).
  for (int64_t k = 0; k < num_heads - c; ++k) {
    slopes[c + k] = std::exp2(-4.0 * static_cast<double>(2 * k + 1) / static_cast<double>(c));
  }
  return slopes;
}

void validate(const AlibiParams& params, const char* op) {
  require(params.num_heads >= 1, op, "num_heads must be >= 1, got ", params.num_heads);
  require(params.q_len >= 0, op, "q_len must be >= 0, got ", params.q_len);
  require(params.k_len >= 0, op, "k_len must be >= 0, got ", params.k_len);
  detail::require_query_offset(op, params.query_offset);
  require(!params.causal || params.query_offset >= 0, op,
          "causal attention needs every query to see a key: query_offset must be >= 0, got ", params.query_offset);
  detail::require_bias_size(op, "num_heads*q_len*k_len", {params.num_heads, params.q_len, params.k_len});
}

template <class T>
void alibi_bias(const AlibiParams& params, const double* slopes, T* out, const char* op) {
  validate(params, op);
  if (params.q_len == 0 || params.k_len == 0) return;
  require(slopes != nullptr, op, "slopes must not be null");
  require(out != nullptr, op, "out must not be null");
  const bool causal = params.causal;
  // v_h(o) = -m_h |o| over offsets o = j - i'; -inf past the query when causal.
  auto fill = [slopes, causal](int64_t h, int64_t o_first, int64_t n, T* dst) noexcept {
    const double m = slopes[h];
    for (int64_t t = 0; t < n; ++t) dst[t] = static_cast<T>(-(m * std::abs(static_cast<double>(o_first + t))));
    if (causal) {
      // o > 0 from t = 1 - o_first on.
      const int64_t first_future = std::clamp<int64_t>(1 - o_first, 0, n);
      std::fill(dst + first_future, dst + n, -std::numeric_limits<T>::infinity());
    }
  };
  detail::fill_shifted_rows(params.num_heads, params.q_len, params.k_len, params.query_offset, out, fill);
}

GridDistance parse_grid_distance(std::string_view name, const char* op) {
  if (name == "euclidean") return GridDistance::kEuclidean;
  if (name == "manhattan") return GridDistance::kManhattan;
  fail_argument(op, "distance must be \"euclidean\" or \"manhattan\", got \"", name, "\"");
}

std::string_view grid_distance_name(GridDistance distance) noexcept {
  return distance == GridDistance::kManhattan ? "manhattan" : "euclidean";
}

void validate(const Alibi2dParams& params, const char* op) {
  require(params.num_heads >= 1, op, "num_heads must be >= 1, got ", params.num_heads);
  require(params.height >= 1, op, "height must be >= 1, got ", params.height);
  require(params.width >= 1, op, "width must be >= 1, got ", params.width);
  detail::require_bias_size(op, "num_heads*HW*HW",
                            {params.num_heads, params.height, params.width, params.height, params.width});
}

template <class T>
void alibi_bias_2d(const Alibi2dParams& params, const double* slopes, T* out, const char* op) {
  validate(params, op);
  require(slopes != nullptr, op, "slopes must not be null");
  require(out != nullptr, op, "out must not be null");
  const int64_t height = params.height, width = params.width;
  const bool euclidean = params.distance == GridDistance::kEuclidean;
  auto fill = [=](int64_t h, int64_t y, T* strip) noexcept {
    const double m = slopes[h];
    const int64_t span = 2 * width - 1;
    for (int64_t yk = 0; yk < height; ++yk) {
      // HW^2 <= 2^31 (the size limit): dy^2 + dx^2 is an exact integer in double.
      const double dy = static_cast<double>(yk - y);
      T* row = strip + yk * span;
      for (int64_t k = 0; k < span; ++k) {
        const double dx = static_cast<double>(k - (width - 1));
        const double dist = euclidean ? std::sqrt(dy * dy + dx * dx) : std::abs(dy) + std::abs(dx);
        row[k] = static_cast<T>(-(m * dist));
      }
    }
  };
  detail::fill_grid_rows(params.num_heads, height, width, out, fill);
}

#define POSENC_INSTANTIATE(T)                                                                 \
  template void alibi_bias<T>(const AlibiParams&, const double*, T*, const char*);           \
  template void alibi_bias_2d<T>(const Alibi2dParams&, const double*, T*, const char*);
POSENC_INSTANTIATE(float)
POSENC_INSTANTIATE(double)
#undef POSENC_INSTANTIATE

}  // namespace posenc::kernels
