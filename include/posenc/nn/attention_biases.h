// The logit-bias point of DESIGN.md section 2: a family adds b_h(i, j) to the
// attention logits q_i . k_j, before the softmax. AttentionBiasImpl
// (attention_bias.h) holds the shared part (checking the logits and adding);
// each family here is a contract (src/nn/families/alibi.cpp, t5.cpp) and
// its class a typed front end of the one holder (family_module.h), whose
// reset_parameters, bias, add_terms and repr it uses.
//
//   bias(q_len, k_len)  [H, q_len, k_len], the queries being the last q_len of
//                       the k_len keys (query i at key position i + k_len - q_len,
//                       as when decoding with a cache)
//   forward(logits)     logits (B, H, Tq, Tk) + bias(Tq, Tk), in logits' dtype
//
//   AlibiBias    ALiBi (Press et al., ICLR 2022): -m_h |i' - j| (causal: -inf after the query)
//   T5Bias       T5 (Raffel et al. 2020): a learned scalar per (bucket of j - i', head)
//   AlibiBias2d  ALiBi on an image grid: -m_h dist((y,x), (y',x'))
//   T5Bias2d     T5 buckets of the row and of the column offset, one table each
// Formulas: posenc/kernels/alibi.h and t5.h.
#pragma once

#include <ATen/ATen.h>
#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <type_traits>
#include <utility>

#include "posenc/kernels/alibi.h"
#include "posenc/nn/attention_bias.h"
#include "posenc/nn/attention_ops.h"
#include "posenc/nn/family_module.h"

namespace posenc::nn {

// ---------------------------------------------------------------------------

struct AlibiBiasOptions {
  /* implicit */ AlibiBiasOptions(int64_t num_heads) : num_heads_(num_heads) {}
  TORCH_ARG(int64_t, num_heads);
  TORCH_ARG(bool, causal) = false;  // -inf on keys after the query (needs q_len <= k_len)
};

class AlibiBiasImpl : public FamilyBiasImpl {
 public:
  explicit AlibiBiasImpl(const AlibiBiasOptions& options);

  const AlibiBiasOptions& options() const noexcept { return options_; }
  // [num_heads] float32, the paper's slopes m_h: a buffer named "slopes" (saved
  // with the module; the bias is made in its dtype, from the exact slopes).
  const at::Tensor& slopes() const { return tensor("slopes"); }

 private:
  AlibiBiasOptions options_;
};

TORCH_MODULE(AlibiBias);

struct T5BiasOptions {
  /* implicit */ T5BiasOptions(int64_t num_heads) : num_heads_(num_heads) {}
  TORCH_ARG(int64_t, num_heads);
  TORCH_ARG(int64_t, num_buckets) = 32;
  TORCH_ARG(int64_t, max_distance) = 128;
  TORCH_ARG(bool, bidirectional) = true;  // false: the decoder's causal buckets
  TORCH_ARG(double, init_std) = 0.02;
};

class T5BiasImpl : public FamilyBiasImpl {
 public:
  explicit T5BiasImpl(const T5BiasOptions& options);

  const T5BiasOptions& options() const noexcept { return options_; }
  // [num_buckets, num_heads] float32, a parameter named "table" (Hugging Face's
  // relative_attention_bias.weight layout, so checkpoints load as they are).
  const at::Tensor& table() const { return tensor("table"); }

 private:
  T5BiasOptions options_;
};

TORCH_MODULE(T5Bias);

struct AlibiBias2dOptions {
  AlibiBias2dOptions(int64_t num_heads, int64_t height, int64_t width)
      : num_heads_(num_heads), height_(height), width_(width) {}
  TORCH_ARG(int64_t, num_heads);
  TORCH_ARG(int64_t, height);
  TORCH_ARG(int64_t, width);
  TORCH_ARG(kernels::GridDistance, distance) = kernels::GridDistance::kEuclidean;
};

// On the height x width grid flattened as y*width + x: bias(q_len, k_len)
// needs q_len == k_len == height*width.
class AlibiBias2dImpl : public FamilyBiasImpl {
 public:
  explicit AlibiBias2dImpl(const AlibiBias2dOptions& options);

  const AlibiBias2dOptions& options() const noexcept { return options_; }
  // [num_heads] float32, buffer "slopes", as AlibiBias.
  const at::Tensor& slopes() const { return tensor("slopes"); }

 private:
  AlibiBias2dOptions options_;
};

TORCH_MODULE(AlibiBias2d);

struct T5Bias2dOptions {
  T5Bias2dOptions(int64_t num_heads, int64_t height, int64_t width)
      : num_heads_(num_heads), height_(height), width_(width) {}
  TORCH_ARG(int64_t, num_heads);
  TORCH_ARG(int64_t, height);
  TORCH_ARG(int64_t, width);
  TORCH_ARG(int64_t, num_buckets) = 32;
  TORCH_ARG(int64_t, max_distance) = 128;
  TORCH_ARG(bool, bidirectional) = true;
  TORCH_ARG(double, init_std) = 0.02;
};

// table_h[bucket(y' - y), h] + table_w[bucket(x' - x), h]; bias(q_len, k_len)
// needs q_len == k_len == height*width.
class T5Bias2dImpl : public FamilyBiasImpl {
 public:
  explicit T5Bias2dImpl(const T5Bias2dOptions& options);

  const T5Bias2dOptions& options() const noexcept { return options_; }
  // [num_buckets, num_heads] float32 each, parameters "table_h" (row offsets) and "table_w" (column offsets).
  const at::Tensor& table_h() const { return tensor("table_h"); }
  const at::Tensor& table_w() const { return tensor("table_w"); }

 private:
  T5Bias2dOptions options_;
};

TORCH_MODULE(T5Bias2d);

}  // namespace posenc::nn
