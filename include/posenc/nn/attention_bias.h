// The logit-bias point's base (DESIGN.md section 2): a module that adds
// b_h(i, j) to the attention logits q_i . k_j before the softmax, and the
// handle any such module converts to. The families: attention_biases.h (ALiBi,
// T5 and their 2D forms), kerple_bias.h, fire_bias.h, cope_bias.h, dpb_bias.h,
// all through the one holder of family_module.h.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "posenc/nn/attention_terms.h"

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

}  // namespace posenc::nn
