// The relative-vectors point of DESIGN.md section 2: a family adds
// q_i . a(j - i) to the attention logits and, optionally, sum_j p_ij a^V(j - i)
// to the attention output. The vectors are addressed by index (ops in
// posenc/nn/relative_ops.h); no (Tq, Tk, Dh) tensor is formed.
//
//   logits(q, k)   q (B, H, Tq, Dh), k (B, H, Tk, Dh) -> the extra logit terms
//                  (B, H, Tq, Tk): NOT q . k itself and NOT scaled by 1/sqrt(Dh)
//                  (the attention layer adds q . k and scales the sum)
//   values(probs)  probs (B, H, Tq, Tk) -> (B, H, Tq, Dh), to add to the output
// The queries are the last Tq of the Tk keys (query_offset = Tk - Tq, as when
// decoding with a cache). Inputs float32 / float64 / bfloat16 / float16; the
// math runs in float32 (float64 when the input or the module is float64) and
// the result is rounded once to the input's dtype.
//
//   ShawRelative           Shaw et al. 2018: learned vectors per clipped offset (keys and values)
//   SinusoidalRelative     NEZHA (Wei et al. 2019): fixed sinusoids of the offset; with
//                          learnable frequencies: Wang et al., ICLR 2021
//   TransformerXLRelative  Dai et al. 2019: (q_i + u) . k_j + (q_i + v) . W_R R_{i-j}
//   Relative2d             BoTNet (Srinivas et al. 2021): row and column tables on an image grid
#pragma once

#include <ATen/ATen.h>
#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <type_traits>
#include <utility>

#include "posenc/nn/attention_ops.h"

namespace posenc::nn {

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

// ---------------------------------------------------------------------------

struct ShawRelativeOptions {
  ShawRelativeOptions(int64_t max_distance, int64_t head_dim) : max_distance_(max_distance), head_dim_(head_dim) {}
  TORCH_ARG(int64_t, max_distance);  // k: offsets are clipped to [-k, k]
  TORCH_ARG(int64_t, head_dim);
  TORCH_ARG(int64_t, num_heads) = 0;  // 0: one table shared by the heads; else one per head
  TORCH_ARG(bool, values) = true;     // a value table too (a^V of the paper)
  TORCH_ARG(double, init_std) = 0.02;
};

// logits[b,h,i,j] = q[b,h,i] . key_table[clip(j - i', -k, k) + k], i' = i + Tk - Tq;
// values[b,h,i]   = sum_j probs[b,h,i,j] value_table[clip(j - i', -k, k) + k].
class ShawRelativeImpl : public RelativeEncodingImpl {
 public:
  explicit ShawRelativeImpl(const ShawRelativeOptions& options);

  // Draws the tables again from N(0, init_std^2) (torch's default generator).
  void reset_parameters();
  at::Tensor logits(const at::Tensor& q, const at::Tensor& k) override;
  void add_terms(AttentionTerms& terms, int64_t q_len, int64_t k_len, at::ScalarType compute) override;
  bool has_values() const override { return options_.values(); }
  at::Tensor values(const at::Tensor& probs) override;
  void pretty_print(std::ostream& stream) const override;

  const ShawRelativeOptions& options() const noexcept { return options_; }
  // [2k+1, Dh] or [num_heads, 2k+1, Dh] float32 parameters "key_table" and
  // "value_table" (the latter undefined unless options().values()).
  const at::Tensor& key_table() const noexcept { return key_table_; }
  const at::Tensor& value_table() const noexcept { return value_table_; }

 private:
  ShawRelativeOptions options_;
  at::Tensor key_table_;
  at::Tensor value_table_;
};

TORCH_MODULE(ShawRelative);

struct SinusoidalRelativeOptions {
  SinusoidalRelativeOptions(int64_t max_distance, int64_t head_dim)
      : max_distance_(max_distance), head_dim_(head_dim) {}
  TORCH_ARG(int64_t, max_distance);  // k
  TORCH_ARG(int64_t, head_dim);      // even
  TORCH_ARG(double, base) = 10000.0;
  TORCH_ARG(bool, learnable) = false;  // omega a parameter (Wang et al. 2021), else a buffer (NEZHA)
  TORCH_ARG(bool, values) = false;     // the same table for the values (NEZHA)
};

// One table shared by the heads: row r = sinusoid of offset r - k with
// frequencies omega (interleaved sin, cos pairs; posenc/nn/relative_ops.h,
// sinusoidal_relative_table), used as ShawRelative uses its tables.
class SinusoidalRelativeImpl : public RelativeEncodingImpl {
 public:
  explicit SinusoidalRelativeImpl(const SinusoidalRelativeOptions& options);

  // omega back to base^(-2i/Dh).
  void reset_parameters();
  at::Tensor logits(const at::Tensor& q, const at::Tensor& k) override;
  void add_terms(AttentionTerms& terms, int64_t q_len, int64_t k_len, at::ScalarType compute) override;
  bool has_values() const override { return options_.values(); }
  at::Tensor values(const at::Tensor& probs) override;
  void pretty_print(std::ostream& stream) const override;

  const SinusoidalRelativeOptions& options() const noexcept { return options_; }
  // [Dh/2] float32: parameter "omega" when learnable, else buffer "omega".
  const at::Tensor& omega() const noexcept { return omega_; }
  // The [2k+1, Dh] table in `compute` (float32 or float64); differentiable wrt omega.
  at::Tensor table(at::ScalarType compute) const;

 private:
  SinusoidalRelativeOptions options_;
  at::Tensor omega_;
};

TORCH_MODULE(SinusoidalRelative);

struct TransformerXLOptions {
  TransformerXLOptions(int64_t num_heads, int64_t head_dim) : num_heads_(num_heads), head_dim_(head_dim) {}
  TORCH_ARG(int64_t, num_heads);
  TORCH_ARG(int64_t, head_dim);
  TORCH_ARG(int64_t, model_dim) = 0;  // channels of R, even; 0: num_heads * head_dim
  TORCH_ARG(double, base) = 10000.0;
  TORCH_ARG(double, init_std) = 0.02;  // u, v and W_R ~ N(0, init_std^2), as the XL code
};

// Dai et al. 2019, with a = W_R R: the logit terms besides q_i . k_j are
//   u . k_j  +  (q_i + v) . (W_R R_{i'-j})_h,   i' = i + Tk - Tq,
// R_d the sinusoid of d with model_dim channels, all sines then all cosines
// (the XL code's pos_emb = cat([sin, cos])). Every offset has its own vector
// (no clipping): the table covers |d| <= max(Tq, Tk) - 1. Unlike the XL code
// the keys after the query are not dropped: a causal mask is the caller's.
class TransformerXLRelativeImpl : public RelativeEncodingImpl {
 public:
  explicit TransformerXLRelativeImpl(const TransformerXLOptions& options);

  void reset_parameters();
  at::Tensor logits(const at::Tensor& q, const at::Tensor& k) override;
  void add_terms(AttentionTerms& terms, int64_t q_len, int64_t k_len, at::ScalarType compute) override;
  void pretty_print(std::ostream& stream) const override;

  const TransformerXLOptions& options() const noexcept { return options_; }
  int64_t model_dim() const noexcept { return model_dim_; }
  // float32 parameters "u" [H, Dh], "v" [H, Dh], "w_r" [H*Dh, model_dim].
  const at::Tensor& u() const noexcept { return u_; }
  const at::Tensor& v() const noexcept { return v_; }
  const at::Tensor& w_r() const noexcept { return w_r_; }
  // [H, 2k+1, Dh] in `compute`: row r is W_R R_{k-r} split per head (the
  // offset j - i' = r - k, so i' - j = k - r); differentiable wrt w_r.
  at::Tensor table(int64_t max_distance, at::ScalarType compute) const;

 private:
  TransformerXLOptions options_;
  int64_t model_dim_;
  at::Tensor u_;
  at::Tensor v_;
  at::Tensor w_r_;
};

TORCH_MODULE(TransformerXLRelative);

struct Relative2dOptions {
  Relative2dOptions(int64_t height, int64_t width, int64_t head_dim)
      : height_(height), width_(width), head_dim_(head_dim) {}
  TORCH_ARG(int64_t, height);
  TORCH_ARG(int64_t, width);
  TORCH_ARG(int64_t, head_dim);
  TORCH_ARG(int64_t, num_heads) = 0;  // 0: tables shared by the heads; else one per head
  TORCH_ARG(double, init_std) = 0.02;
};

// On the height x width grid flattened as y*width + x (Tq = Tk = height*width):
//   logits[b,h,(y,x),(y',x')] = q[b,h,(y,x)] . (table_h[y'-y+height-1] + table_w[x'-x+width-1]).
class Relative2dImpl : public RelativeEncodingImpl {
 public:
  explicit Relative2dImpl(const Relative2dOptions& options);

  void reset_parameters();
  at::Tensor logits(const at::Tensor& q, const at::Tensor& k) override;
  void add_terms(AttentionTerms& terms, int64_t q_len, int64_t k_len, at::ScalarType compute) override;
  void pretty_print(std::ostream& stream) const override;

  const Relative2dOptions& options() const noexcept { return options_; }
  // float32 parameters "table_h" [2*height-1, Dh] and "table_w" [2*width-1, Dh]
  // (or [num_heads, ., Dh]).
  const at::Tensor& table_h() const noexcept { return table_h_; }
  const at::Tensor& table_w() const noexcept { return table_w_; }

 private:
  Relative2dOptions options_;
  at::Tensor table_h_;
  at::Tensor table_w_;
};

TORCH_MODULE(Relative2d);

}  // namespace posenc::nn
