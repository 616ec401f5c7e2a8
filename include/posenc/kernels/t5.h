// T5 relative attention bias (Raffel et al. 2020; Hugging Face modeling_t5,
// _relative_position_bucket and compute_bias): a learned scalar per
// (bucket, head), the bucket a function of the relative position
//   rel = key position - query position.
// Bidirectional: nb' = num_buckets/2 buckets per direction, keys after the
// query (rel > 0) offset by nb', n = |rel|. Causal: nb' = num_buckets and
// n = max(-rel, 0) (keys after the query share bucket 0). With
// max_exact = nb'/2, n < max_exact is its own bucket; beyond,
//   max_exact + floor(log(n / max_exact) / log(max_distance / max_exact) * (nb' - max_exact)),
// capped at nb' - 1. The logarithm is evaluated in float32 exactly as the
// Hugging Face code does (float32 n / max_exact, float32 log, divided by
// log(max_distance / max_exact) rounded to float32, times nb' - max_exact,
// truncated), so buckets agree with it at the boundaries where the real
// value is an integer (n = 16, 32, 64 for the defaults).
//
// Bias: out[h, i, j] = table[bucket(j - i' ), h], i' = i + query_offset
// (query_offset = k_len - q_len aligns the queries with the last keys; HF
// slices the last rows of the bias the same way when decoding with a cache).
// 2D (vision): out[h, (y,x), (y',x')] = table_h[bucket(y'-y), h] + table_w[bucket(x'-x), h].
#pragma once

#include <cstdint>
#include <span>

namespace posenc::kernels {

struct T5BucketParams {
  bool bidirectional = true;
  int64_t num_buckets = 32;
  int64_t max_distance = 128;
};

// Messages:
//   "[op] num_buckets must be >= 2, got 1"
//   "[op] num_buckets must be even when bidirectional (half per direction), got 31"
//   "[op] num_buckets must be >= 4 when bidirectional, got 2"
//   "[op] max_distance must be > num_buckets/2 = 16, got 16"
void validate(const T5BucketParams& params, const char* op = "t5_bucket");

// One bucket (params already validated).
int64_t t5_bucket(const T5BucketParams& params, int64_t relative_position) noexcept;
// out[n] = t5_bucket(relative_positions[n]); validates params and sizes.
void t5_buckets(const T5BucketParams& params, std::span<const int64_t> relative_positions, std::span<int64_t> out,
                const char* op = "t5_bucket");

struct T5BiasShape {
  int64_t heads = 0;  // >= 1
  int64_t q_len = 0, k_len = 0;
  int64_t query_offset = 0;  // |query_offset| <= 2^62
};

// Messages as validate(T5BucketParams), plus "[op] heads must be >= 1, got 0",
// "[op] q_len must be >= 0, got -1", "[op] k_len must be >= 0, got -1",
// "[op] the bias must have at most 2^31 values (heads*q_len*k_len), got ...".
void validate(const T5BucketParams& params, const T5BiasShape& shape, const char* op = "t5_bias");

// table: [num_buckets, heads] row-major (HF's nn.Embedding(num_buckets,
// n_heads).weight); out: [heads, q_len, k_len], overwritten. T float or double.
template <class T>
void t5_bias(const T5BucketParams& params, const T5BiasShape& shape, const T* table, T* out,
             const char* op = "t5_bias");

// grad: [heads, q_len, k_len]; grad_table: [num_buckets, heads], overwritten
// with the sum of grad over each bucket's (i, j), accumulated in double,
// in an order that does not depend on the thread count.
template <class T>
void t5_bias_backward(const T5BucketParams& params, const T5BiasShape& shape, const T* grad, T* grad_table,
                      const char* op = "t5_bias");

struct T5Bias2dShape {
  int64_t heads = 0;
  int64_t height = 0, width = 0;  // >= 1 each
};

// As validate(T5BucketParams), plus "[op] heads must be >= 1, got 0",
// "[op] height must be >= 1, got 0", "[op] width must be >= 1, got 0", and the size limit.
void validate(const T5BucketParams& params, const T5Bias2dShape& shape, const char* op = "t5_bias_2d");

// table_h, table_w: [num_buckets, heads]; out: [heads, HW, HW], overwritten.
template <class T>
void t5_bias_2d(const T5BucketParams& params, const T5Bias2dShape& shape, const T* table_h, const T* table_w, T* out,
                const char* op = "t5_bias_2d");

// grad: [heads, HW, HW] -> grad_table_h, grad_table_w: [num_buckets, heads], overwritten.
template <class T>
void t5_bias_2d_backward(const T5BucketParams& params, const T5Bias2dShape& shape, const T* grad, T* grad_table_h,
                         T* grad_table_w, const char* op = "t5_bias_2d");

}  // namespace posenc::kernels
