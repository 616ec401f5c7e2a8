// The relative-vectors point of DESIGN.md section 2: a module adds
// q_i . a(j - i) to the attention logits and, optionally, sum_j p_ij a^V(j - i)
// to the attention output. The vectors are addressed by index (ops in
// posenc/nn/relative_ops.h); no (Tq, Tk, Dh) tensor is formed.
//
//   logits(q, k)   q (B, H, Tq, Dh), k (B, H, Tk, Dh) -> the extra logit terms
//                  (B, H, Tq, Tk): NOT q . k itself and NOT scaled by 1/sqrt(Dh)
//                  (the attention layer adds q . k and scales the sum)
//   values(probs)  probs (B, H, Tq, Tk) -> (B, H, Tq, Dh), to add to the output
// The queries are the last Tq of the Tk keys (query_offset = Tk - Tq, as when
// decoding with a cache). The families: relative_encodings.h (on the family
// contract) and deberta_relative.h.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "posenc/nn/attention_terms.h"

namespace posenc::nn {

// The checks every relative module makes of its inputs, under its name `module`:
// q and k floating, of one dtype, 4-D, the same B and H (= num_heads unless 0) and Dh = head_dim.
void check_relative_qk(std::string_view module, int64_t num_heads, int64_t head_dim, const at::Tensor& q,
                       const at::Tensor& k);
// probs floating, 4-D (B, H, Tq, Tk), H = num_heads unless 0.
void check_relative_probs(std::string_view module, int64_t num_heads, const at::Tensor& probs);
// float64 if the input or `param` is float64, else float32.
at::ScalarType relative_compute_dtype(const at::Tensor& input, const at::Tensor& param) noexcept;

class RelativeEncodingImpl : public torch::nn::Module {
 public:
  // q (B, H, Tq, Dh), k (B, H, Tk, Dh) -> (B, H, Tq, Tk) in q's dtype;
  // differentiable wrt q and the module's parameters (and k where the family reads it).
  virtual at::Tensor logits(const at::Tensor& q, const at::Tensor& k) = 0;
  // Whether values() adds vectors to the attention output.
  virtual bool has_values() const { return false; }
  // probs (B, H, Tq, Tk) -> (B, H, Tq, Dh) in probs' dtype. Default: throws
  // c10::Error "[Name] has no value vectors".
  virtual at::Tensor values(const at::Tensor& probs);
  // Writes this family's relative terms (tables, shifts, 2D tables; see
  // posenc/nn/attention_ops.h) in `compute` for q_len queries on k_len keys,
  // differentiable wrt the parameters, so one attention call (fused or
  // composed) applies logits() and values() together.
  virtual void add_terms(AttentionTerms& terms, int64_t q_len, int64_t k_len, at::ScalarType compute) = 0;
  // The attention layer's query and key projections, handed over once when the
  // layer is built, for families that project their vectors with them
  // (DeBERTa's share_att_key). Default: ignored.
  virtual void share_projections(const torch::nn::Linear& /*query*/, const torch::nn::Linear& /*key*/) {}

  // H the module was built for; 0: any (one table shared by the heads).
  int64_t num_heads() const noexcept { return num_heads_; }
  int64_t head_dim() const noexcept { return head_dim_; }

 protected:
  // `name` (e.g. "ShawRelative") becomes name() and the prefix of the error
  // messages. Checks head_dim >= 1 and num_heads >= 0 (>= 1 unless shared_ok).
  RelativeEncodingImpl(std::string name, int64_t num_heads, int64_t head_dim, bool shared_ok = true);

  // Checks q and k: floating, q's dtype, 4-D, the same B and H (= num_heads
  // unless 0) and Dh = head_dim.
  void check_qk(const at::Tensor& q, const at::Tensor& k) const;
  // Checks probs: floating, 4-D (B, H, Tq, Tk), H = num_heads unless 0.
  void check_probs(const at::Tensor& probs) const;
  // float64 if the input or `param` is float64, else float32.
  static at::ScalarType compute_dtype(const at::Tensor& input, const at::Tensor& param) noexcept;

 private:
  int64_t num_heads_;
  int64_t head_dim_;
};

// A handle to any relative encoding: RelativeEncoding encoding = ShawRelative(...);
class RelativeEncoding : public torch::nn::ModuleHolder<RelativeEncodingImpl> {
 public:
  /* implicit */ RelativeEncoding(std::nullptr_t) : ModuleHolder(nullptr) {}
  /* implicit */ RelativeEncoding(std::shared_ptr<RelativeEncodingImpl> impl) : ModuleHolder(std::move(impl)) {}
  template <class Impl, class = std::enable_if_t<std::is_base_of_v<RelativeEncodingImpl, Impl>>>
  /* implicit */ RelativeEncoding(const torch::nn::ModuleHolder<Impl>& holder)
      : ModuleHolder(std::shared_ptr<RelativeEncodingImpl>(holder.ptr())) {}
};


}  // namespace posenc::nn
