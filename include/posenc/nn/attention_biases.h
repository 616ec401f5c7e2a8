// The logit-bias point of DESIGN.md section 2: a family adds b_h(i, j) to the
// attention logits q_i . k_j, before the softmax. AttentionBiasImpl holds the
// shared part (checking the logits and adding); a family only says what the
// bias is.
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
#include "posenc/nn/attention_ops.h"

namespace posenc::nn {

class AttentionBiasImpl : public torch::nn::Module {
 public:
  // logits (B, H, Tq, Tk), any of the four floating dtypes -> the same shape
  // and dtype; the sum is formed in float32 (float64 when the logits or the
  // bias are float64) and rounded once.
  at::Tensor forward(const at::Tensor& logits);
  // [num_heads, q_len, k_len] in the dtype of the module's parameters or
  // buffers (float32 unless moved with to()); differentiable wrt the parameters.
  virtual at::Tensor bias(int64_t q_len, int64_t k_len) = 0;
  // Writes this bias into the attention terms (posenc/nn/attention_ops.h) in
  // `compute`: the default adds bias(q_len, k_len) as a dense term; families
  // that depend on the offset only write the O(H*T) offset_bias or grid_bias
  // instead, so the fused kernel never sees a (Tq, Tk) tensor.
  virtual void add_terms(AttentionTerms& terms, int64_t q_len, int64_t k_len, at::ScalarType compute);

  int64_t num_heads() const noexcept { return num_heads_; }

 protected:
  // `name` (e.g. "AlibiBias") becomes the module's name() and the prefix of
  // its error messages. Checks num_heads >= 1.
  AttentionBiasImpl(std::string name, int64_t num_heads);

 private:
  int64_t num_heads_;
};

// A handle to any attention bias: AttentionBias bias = AlibiBias(8);
class AttentionBias : public torch::nn::ModuleHolder<AttentionBiasImpl> {
 public:
  /* implicit */ AttentionBias(std::nullptr_t) : ModuleHolder(nullptr) {}
  /* implicit */ AttentionBias(std::shared_ptr<AttentionBiasImpl> impl) : ModuleHolder(std::move(impl)) {}
  template <class Impl, class = std::enable_if_t<std::is_base_of_v<AttentionBiasImpl, Impl>>>
  /* implicit */ AttentionBias(const torch::nn::ModuleHolder<Impl>& holder)
      : ModuleHolder(std::shared_ptr<AttentionBiasImpl>(holder.ptr())) {}
};

// ---------------------------------------------------------------------------

struct AlibiBiasOptions {
  /* implicit */ AlibiBiasOptions(int64_t num_heads) : num_heads_(num_heads) {}
  TORCH_ARG(int64_t, num_heads);
  TORCH_ARG(bool, causal) = false;  // -inf on keys after the query (needs q_len <= k_len)
};

class AlibiBiasImpl : public AttentionBiasImpl {
 public:
  explicit AlibiBiasImpl(const AlibiBiasOptions& options);

  at::Tensor bias(int64_t q_len, int64_t k_len) override;
  void add_terms(AttentionTerms& terms, int64_t q_len, int64_t k_len, at::ScalarType compute) override;
  void pretty_print(std::ostream& stream) const override;

  const AlibiBiasOptions& options() const noexcept { return options_; }
  // [num_heads] float32, the paper's slopes m_h: a buffer named "slopes" (saved
  // with the module; the bias is made in its dtype, from the exact slopes).
  const at::Tensor& slopes() const noexcept { return slopes_; }

 private:
  AlibiBiasOptions options_;
  at::Tensor slopes_;
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

class T5BiasImpl : public AttentionBiasImpl {
 public:
  explicit T5BiasImpl(const T5BiasOptions& options);

  // Draws the table again from N(0, init_std^2) (torch's default generator).
  void reset_parameters();
  at::Tensor bias(int64_t q_len, int64_t k_len) override;
  void add_terms(AttentionTerms& terms, int64_t q_len, int64_t k_len, at::ScalarType compute) override;
  void pretty_print(std::ostream& stream) const override;

  const T5BiasOptions& options() const noexcept { return options_; }
  // [num_buckets, num_heads] float32, a parameter named "table" (Hugging Face's
  // relative_attention_bias.weight layout, so checkpoints load as they are).
  const at::Tensor& table() const noexcept { return table_; }

 private:
  T5BiasOptions options_;
  at::Tensor table_;
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
class AlibiBias2dImpl : public AttentionBiasImpl {
 public:
  explicit AlibiBias2dImpl(const AlibiBias2dOptions& options);

  at::Tensor bias(int64_t q_len, int64_t k_len) override;
  void add_terms(AttentionTerms& terms, int64_t q_len, int64_t k_len, at::ScalarType compute) override;
  void pretty_print(std::ostream& stream) const override;

  const AlibiBias2dOptions& options() const noexcept { return options_; }
  // [num_heads] float32, buffer "slopes", as AlibiBias.
  const at::Tensor& slopes() const noexcept { return slopes_; }

 private:
  AlibiBias2dOptions options_;
  at::Tensor slopes_;
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
class T5Bias2dImpl : public AttentionBiasImpl {
 public:
  explicit T5Bias2dImpl(const T5Bias2dOptions& options);

  void reset_parameters();
  at::Tensor bias(int64_t q_len, int64_t k_len) override;
  void add_terms(AttentionTerms& terms, int64_t q_len, int64_t k_len, at::ScalarType compute) override;
  void pretty_print(std::ostream& stream) const override;

  const T5Bias2dOptions& options() const noexcept { return options_; }
  // [num_buckets, num_heads] float32 each, parameters "table_h" (row offsets) and "table_w" (column offsets).
  const at::Tensor& table_h() const noexcept { return table_h_; }
  const at::Tensor& table_w() const noexcept { return table_w_; }

 private:
  T5Bias2dOptions options_;
  at::Tensor table_h_;
  at::Tensor table_w_;
};

TORCH_MODULE(T5Bias2d);

}  // namespace posenc::nn
