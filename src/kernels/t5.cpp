#include "posenc/kernels/t5.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "bias_rows.h"
#include "posenc/error.h"

namespace posenc::kernels {
namespace {

// Hugging Face's _relative_position_bucket, float32 arithmetic and all, with
// the per-call constants hoisted (params already validated).
class BucketFn {
 public:
  explicit BucketFn(const T5BucketParams& params) noexcept
      : bidirectional_(params.bidirectional),
        per_dir_(params.bidirectional ? params.num_buckets / 2 : params.num_buckets),
        max_exact_(per_dir_ / 2),
        max_exact_f_(static_cast<float>(max_exact_)),
        // Python's math.log(max_distance / max_exact) in double, then a float32 operand.
        log_range_f_(static_cast<float>(
            std::log(static_cast<double>(params.max_distance) / static_cast<double>(max_exact_)))),
        span_f_(static_cast<float>(per_dir_ - max_exact_)),
        // From 2*max_distance on the log term exceeds its range by ln 2 / ln(2^63) > 1.5%, far
        // beyond float rounding, so every farther offset has the capped bucket (or 0 for future
        // keys when causal); without overflow room nothing is clamped.
        limit_(params.max_distance <= (int64_t{1} << 61) ? 2 * params.max_distance
                                                          : std::numeric_limits<int64_t>::max()) {}

  int64_t operator()(int64_t rel) const noexcept {
    int64_t base = 0;
    uint64_t n = 0;  // unsigned: |INT64_MIN| must not overflow
    const uint64_t magnitude = rel < 0 ? 0 - static_cast<uint64_t>(rel) : static_cast<uint64_t>(rel);
    if (bidirectional_) {
      base = rel > 0 ? per_dir_ : 0;
      n = magnitude;
    } else {
      n = rel < 0 ? magnitude : 0;
    }
    if (n < static_cast<uint64_t>(max_exact_)) return base + static_cast<int64_t>(n);
    // Only here (n >= max_exact >= 1) is the logarithm taken: finite, >= 0.
    const float v = std::log(static_cast<float>(n) / max_exact_f_) / log_range_f_ * span_f_;
    // NaN (max_distance/max_exact rounding to 1) and values past int64 take the cap, as HF's min would.
    if (!(v < 0x1p62f)) return base + per_dir_ - 1;
    return base + std::min(max_exact_ + static_cast<int64_t>(v), per_dir_ - 1);
  }

  int64_t limit() const noexcept { return limit_; }

 private:
  bool bidirectional_;
  int64_t per_dir_, max_exact_;
  float max_exact_f_, log_range_f_, span_f_;
  int64_t limit_;
};

// Buckets of the offsets [lo, hi], beyond +-limit folded onto +-limit: at most
// min(hi - lo + 1, 4 max_distance + 1) entries.
class BucketRange {
 public:
  BucketRange(const BucketFn& fn, int64_t lo, int64_t hi) : limit_(fn.limit()), first_(clamp(lo)) {
    const int64_t count = clamp(hi) - first_ + 1;
    ids_.resize(static_cast<size_t>(count));
#pragma omp parallel for schedule(static) if (count > detail::kBiasParallelValues)
    for (int64_t t = 0; t < count; ++t) ids_[t] = fn(first_ + t);
  }
  int64_t at(int64_t offset) const noexcept { return ids_[clamp(offset) - first_]; }

 private:
  int64_t clamp(int64_t offset) const noexcept { return std::clamp(offset, -limit_, limit_); }
  int64_t limit_, first_;
  std::vector<int64_t> ids_;
};

// Buckets of -(n-1) .. n-1 (a grid axis of n cells), index d + n - 1.
std::vector<int64_t> axis_buckets(const BucketFn& fn, int64_t n) {
  std::vector<int64_t> ids(static_cast<size_t>(2 * n - 1));
  for (int64_t d = -(n - 1); d <= n - 1; ++d) ids[d + n - 1] = fn(d);
  return ids;
}

}  // namespace

void validate(const T5BucketParams& params, const char* op) {
  const int64_t nb = params.num_buckets;
  require(nb >= 2, op, "num_buckets must be >= 2, got ", nb);
  if (params.bidirectional) {
    require(nb % 2 == 0, op, "num_buckets must be even when bidirectional (half per direction), got ", nb);
    require(nb >= 4, op, "num_buckets must be >= 4 when bidirectional, got ", nb);
  }
  require(params.max_distance > nb / 2, op, "max_distance must be > num_buckets/2 = ", nb / 2, ", got ",
          params.max_distance);
}

int64_t t5_bucket(const T5BucketParams& params, int64_t relative_position) noexcept {
  return BucketFn(params)(relative_position);
}

void t5_buckets(const T5BucketParams& params, std::span<const int64_t> relative_positions, std::span<int64_t> out,
                const char* op) {
  validate(params, op);
  require(out.size() == relative_positions.size(), op, "out must hold one bucket per relative position (",
          relative_positions.size(), "), got ", out.size());
  const BucketFn fn(params);
  std::transform(relative_positions.begin(), relative_positions.end(), out.begin(), fn);
}

void validate(const T5BucketParams& params, const T5BiasShape& shape, const char* op) {
  validate(params, op);
  require(shape.heads >= 1, op, "heads must be >= 1, got ", shape.heads);
  require(shape.q_len >= 0, op, "q_len must be >= 0, got ", shape.q_len);
  require(shape.k_len >= 0, op, "k_len must be >= 0, got ", shape.k_len);
  detail::require_query_offset(op, shape.query_offset);
  detail::require_bias_size(op, "heads*q_len*k_len", {shape.heads, shape.q_len, shape.k_len});
}

template <class T>
void t5_bias(const T5BucketParams& params, const T5BiasShape& shape, const T* table, T* out, const char* op) {
  validate(params, shape, op);
  if (shape.q_len == 0 || shape.k_len == 0) return;
  require(table != nullptr, op, "table must not be null");
  require(out != nullptr, op, "out must not be null");
  // Offsets o = j - i' run from -(q_len-1) - query_offset to k_len-1 - query_offset.
  const BucketRange buckets(BucketFn(params), -(shape.q_len - 1) - shape.query_offset,
                            shape.k_len - 1 - shape.query_offset);
  const int64_t heads = shape.heads;
  auto fill = [&buckets, table, heads](int64_t h, int64_t o_first, int64_t n, T* dst) noexcept {
    for (int64_t t = 0; t < n; ++t) dst[t] = table[buckets.at(o_first + t) * heads + h];
  };
  detail::fill_shifted_rows(heads, shape.q_len, shape.k_len, shape.query_offset, out, fill);
}

// grad: [heads, q_len, k_len]. Per head, over the same tiles as the forward:
// diagonal sums D[o] of a tile (double), then D folded into its buckets. One
// thread owns a head, and tiles are visited in a fixed order, so the result
// does not depend on the thread count.
template <class T>
void t5_bias_backward(const T5BucketParams& params, const T5BiasShape& shape, const T* grad, T* grad_table,
                      const char* op) {
  validate(params, shape, op);
  require(grad_table != nullptr, op, "grad_table must not be null");
  const int64_t heads = shape.heads, q_len = shape.q_len, k_len = shape.k_len, nb = params.num_buckets;
  if (q_len == 0 || k_len == 0) {
    std::fill(grad_table, grad_table + nb * heads, T(0));
    return;
  }
  require(grad != nullptr, op, "grad must not be null");
  const int64_t offset = shape.query_offset;
  const BucketRange buckets(BucketFn(params), -(q_len - 1) - offset, k_len - 1 - offset);
  const detail::ShiftedTiling tiling(q_len, k_len);
  const int64_t capacity = tiling.window_capacity() + nb;
  std::vector<double> scratch(static_cast<size_t>(omp_get_max_threads() * capacity));
#pragma omp parallel if (heads * q_len * k_len > detail::kBiasParallelValues)
  {
    double* diag = scratch.data() + omp_get_thread_num() * capacity;
    double* acc = diag + tiling.window_capacity();
#pragma omp for schedule(static)
    for (int64_t h = 0; h < heads; ++h) {
      std::fill(acc, acc + nb, 0.0);
      const T* g = grad + h * q_len * k_len;
      for (int64_t i0 = 0; i0 < q_len; i0 += detail::kBiasRowBlock) {
        const int64_t i1 = std::min(q_len, i0 + detail::kBiasRowBlock);
        for (int64_t j0 = 0; j0 < k_len; j0 += tiling.col_tile) {
          const int64_t j1 = std::min(k_len, j0 + tiling.col_tile);
          const int64_t n = (j1 - j0) + (i1 - i0) - 1;
          std::fill(diag, diag + n, 0.0);
          for (int64_t i = i0; i < i1; ++i) {
            const T* row = g + i * k_len + j0;
            double* d = diag + (i1 - 1 - i);
            for (int64_t t = 0; t < j1 - j0; ++t) d[t] += static_cast<double>(row[t]);
          }
          const int64_t o_first = j0 - (i1 - 1) - offset;
          for (int64_t t = 0; t < n; ++t) acc[buckets.at(o_first + t)] += diag[t];
        }
      }
      for (int64_t b = 0; b < nb; ++b) grad_table[b * heads + h] = static_cast<T>(acc[b]);
    }
  }
}

void validate(const T5BucketParams& params, const T5Bias2dShape& shape, const char* op) {
  validate(params, op);
  require(shape.heads >= 1, op, "heads must be >= 1, got ", shape.heads);
  require(shape.height >= 1, op, "height must be >= 1, got ", shape.height);
  require(shape.width >= 1, op, "width must be >= 1, got ", shape.width);
  detail::require_bias_size(op, "heads*HW*HW", {shape.heads, shape.height, shape.width, shape.height, shape.width});
}

template <class T>
void t5_bias_2d(const T5BucketParams& params, const T5Bias2dShape& shape, const T* table_h, const T* table_w, T* out,
                const char* op) {
  validate(params, shape, op);
  require(table_h != nullptr && table_w != nullptr, op, "table_h and table_w must not be null");
  require(out != nullptr, op, "out must not be null");
  const BucketFn fn(params);
  const int64_t heads = shape.heads, height = shape.height, width = shape.width;
  const std::vector<int64_t> ids_h = axis_buckets(fn, height), ids_w = axis_buckets(fn, width);
  auto fill = [&](int64_t h, int64_t y, T* strip) noexcept {
    const int64_t span = 2 * width - 1;
    for (int64_t yk = 0; yk < height; ++yk) {
      const T a = table_h[ids_h[yk - y + height - 1] * heads + h];
      T* row = strip + yk * span;
      for (int64_t k = 0; k < span; ++k) row[k] = a + table_w[ids_w[k] * heads + h];
    }
  };
  detail::fill_grid_rows(heads, height, width, out, fill);
}

// Per head: G[dy, dx] = sum of grad over the pairs at that 2D offset (double),
// then its row sums go to the dy buckets and its column sums to the dx buckets.
template <class T>
void t5_bias_2d_backward(const T5BucketParams& params, const T5Bias2dShape& shape, const T* grad, T* grad_table_h,
                         T* grad_table_w, const char* op) {
  validate(params, shape, op);
  require(grad != nullptr, op, "grad must not be null");
  require(grad_table_h != nullptr && grad_table_w != nullptr, op, "grad_table_h and grad_table_w must not be null");
  const BucketFn fn(params);
  const int64_t heads = shape.heads, height = shape.height, width = shape.width, nb = params.num_buckets;
  const int64_t hw = height * width, span_h = 2 * height - 1, span_w = 2 * width - 1;
  const std::vector<int64_t> ids_h = axis_buckets(fn, height), ids_w = axis_buckets(fn, width);
  const int64_t capacity = span_h * span_w + 2 * nb;
  std::vector<double> scratch(static_cast<size_t>(omp_get_max_threads() * capacity));
#pragma omp parallel if (heads * hw * hw > detail::kBiasParallelValues)
  {
    double* diag = scratch.data() + omp_get_thread_num() * capacity;
    double* acc_h = diag + span_h * span_w;
    double* acc_w = acc_h + nb;
#pragma omp for schedule(static)
    for (int64_t h = 0; h < heads; ++h) {
      std::fill(diag, diag + capacity, 0.0);
      for (int64_t y = 0; y < height; ++y) {
        for (int64_t x = 0; x < width; ++x) {
          const T* g = grad + (h * hw + y * width + x) * hw;
          for (int64_t yk = 0; yk < height; ++yk) {
            double* d = diag + (yk - y + height - 1) * span_w + (width - 1 - x);
            const T* seg = g + yk * width;
            for (int64_t xk = 0; xk < width; ++xk) d[xk] += static_cast<double>(seg[xk]);
          }
        }
      }
      for (int64_t dy = 0; dy < span_h; ++dy) {
        for (int64_t dx = 0; dx < span_w; ++dx) {
          const double v = diag[dy * span_w + dx];
          acc_h[ids_h[dy]] += v;
          acc_w[ids_w[dx]] += v;
        }
      }
      for (int64_t b = 0; b < nb; ++b) {
        grad_table_h[b * heads + h] = static_cast<T>(acc_h[b]);
        grad_table_w[b * heads + h] = static_cast<T>(acc_w[b]);
      }
    }
  }
}

#define POSENC_INSTANTIATE(T)                                                                                  \
  template void t5_bias<T>(const T5BucketParams&, const T5BiasShape&, const T*, T*, const char*);              \
  template void t5_bias_backward<T>(const T5BucketParams&, const T5BiasShape&, const T*, T*, const char*);     \
  template void t5_bias_2d<T>(const T5BucketParams&, const T5Bias2dShape&, const T*, const T*, T*, const char*); \
  template void t5_bias_2d_backward<T>(const T5BucketParams&, const T5Bias2dShape&, const T*, T*, T*, const char*);
POSENC_INSTANTIATE(float)
POSENC_INSTANTIATE(double)
#undef POSENC_INSTANTIATE

}  // namespace posenc::kernels
