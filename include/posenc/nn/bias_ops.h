// ALiBi and T5 attention biases from C++ (torch.ops.posenc.alibi_*, t5_*,
// docs/relative.md), through the dispatcher like posenc/nn/absolute_ops.h, so
// the gradients flow. Biases are [H, Tq, Tk] (2D: [H, HW, HW]) and put the
// queries on the last q_len of the k_len keys (query i at key position
// i + k_len - q_len). Bad arguments throw c10::ValueError with the kernels'
// messages.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

#include "posenc/kernels/alibi.h"
#include "posenc/kernels/t5.h"

namespace posenc::nn::ops {

// [num_heads], the paper's slopes.
at::Tensor alibi_slopes(int64_t num_heads, at::ScalarType dtype = at::kFloat);
// [num_heads, q_len, k_len]: -m_h |i' - j|; causal: -inf for j > i'.
at::Tensor alibi_bias(int64_t num_heads, int64_t q_len, int64_t k_len, bool causal = false,
                      at::ScalarType dtype = at::kFloat);
// The same into out (contiguous [num_heads, q_len, k_len], float32 or float64), reused across calls.
at::Tensor& alibi_bias_out(at::Tensor& out, int64_t num_heads, int64_t q_len, int64_t k_len, bool causal = false);
// [num_heads, HW, HW]: -m_h dist((y,x), (y',x')).
at::Tensor alibi_bias_2d(const kernels::Alibi2dParams& params, at::ScalarType dtype = at::kFloat);

// Buckets of relative positions (key - query): same shape, int64.
at::Tensor t5_bucket(const at::Tensor& relative_position, const kernels::T5BucketParams& params = {});
// table [num_buckets, H] (num_buckets taken from it) -> [H, q_len, k_len]; differentiable wrt table.
at::Tensor t5_bias(const at::Tensor& table, int64_t q_len, int64_t k_len, bool bidirectional = true,
                   int64_t max_distance = 128);
// table_h, table_w [num_buckets, H] -> [H, HW, HW]; differentiable wrt both.
at::Tensor t5_bias_2d(const at::Tensor& table_h, const at::Tensor& table_w, int64_t height, int64_t width,
                      bool bidirectional = true, int64_t max_distance = 128);

// Offset-bias rows for the attention terms (posenc/nn/attention_terms.h), [H, q_len + k_len - 1] (element d + k_len - 1 for d = j - i' in [-(k_len-1), q_len-1]):
// ALiBi -m_h |d| from slopes [H] (differentiable wrt slopes); T5 table[bucket(d), h] from
// table [num_buckets, H] (differentiable wrt table).
at::Tensor alibi_offset_bias(const at::Tensor& slopes, int64_t q_len, int64_t k_len);
at::Tensor t5_offset_bias(const at::Tensor& table, int64_t q_len, int64_t k_len, bool bidirectional = true,
                          int64_t max_distance = 128);

}  // namespace posenc::nn::ops
