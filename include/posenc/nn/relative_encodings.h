// The relative-vector families on the family contract (family_contract.h,
// src/nn/families/<name>.cpp), as typed front ends of FamilyRelative: a family adds
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
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <ostream>

#include "posenc/nn/family_module.h"
#include "posenc/nn/relative_encoding.h"

namespace posenc::nn {

struct ShawRelativeOptions {
  ShawRelativeOptions(int64_t max_distance, int64_t head_dim) : max_distance_(max_distance), head_dim_(head_dim) {}
  TORCH_ARG(int64_t, max_distance);  // k: offsets are clipped to [-k, k]
  TORCH_ARG(int64_t, head_dim);
  TORCH_ARG(int64_t, num_heads) = 0;  // 0: one table shared by the heads; else one per head
  TORCH_ARG(bool, values) = true;     // a value table too (a^V of the paper)
  TORCH_ARG(double, init_std) = 0.02;
  TORCH_ARG(bool, key_logits) = false;  // k_j . key_table[r] too (Hugging Face BERT's relative_key_query)
};

// logits[b,h,i,j] = q[b,h,i] . key_table[clip(j - i', -k, k) + k] (+ k[b,h,j] . key_table[...] with key_logits),
// i' = i + Tk - Tq; values[b,h,i] = sum_j probs[b,h,i,j] value_table[clip(j - i', -k, k) + k].
// reset_parameters() draws the tables from N(0, init_std^2) (torch's default generator).
class ShawRelativeImpl : public FamilyRelativeImpl {
 public:
  explicit ShawRelativeImpl(const ShawRelativeOptions& options);
  void pretty_print(std::ostream& stream) const override;

  const ShawRelativeOptions& options() const noexcept { return options_; }
  // [2k+1, Dh] or [num_heads, 2k+1, Dh] float32 parameters "key_table" and
  // "value_table" (the latter undefined unless options().values()).
  const at::Tensor& key_table() const { return tensor("key_table"); }
  const at::Tensor& value_table() const { return tensor("value_table"); }

 private:
  ShawRelativeOptions options_;
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
// reset_parameters() sets omega back to base^(-2i/Dh).
class SinusoidalRelativeImpl : public FamilyRelativeImpl {
 public:
  explicit SinusoidalRelativeImpl(const SinusoidalRelativeOptions& options);
  void pretty_print(std::ostream& stream) const override;

  const SinusoidalRelativeOptions& options() const noexcept { return options_; }
  // [Dh/2] float32: parameter "omega" when learnable, else buffer "omega".
  const at::Tensor& omega() const { return tensor("omega"); }
  // The [2k+1, Dh] table in `compute` (float32 or float64); differentiable wrt omega.
  at::Tensor table(at::ScalarType compute) const;

 private:
  SinusoidalRelativeOptions options_;
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
class TransformerXLRelativeImpl : public FamilyRelativeImpl {
 public:
  explicit TransformerXLRelativeImpl(const TransformerXLOptions& options);
  void pretty_print(std::ostream& stream) const override;

  const TransformerXLOptions& options() const noexcept { return options_; }
  int64_t model_dim() const { return settings().integer("model_dim"); }
  // float32 parameters "u" [H, Dh], "v" [H, Dh], "w_r" [H*Dh, model_dim].
  const at::Tensor& u() const { return tensor("u"); }
  const at::Tensor& v() const { return tensor("v"); }
  const at::Tensor& w_r() const { return tensor("w_r"); }
  // [H, 2k+1, Dh] in `compute`: row r is W_R R_{k-r} split per head (the
  // offset j - i' = r - k, so i' - j = k - r); differentiable wrt w_r.
  at::Tensor table(int64_t max_distance, at::ScalarType compute) const;

 private:
  TransformerXLOptions options_;
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
class Relative2dImpl : public FamilyRelativeImpl {
 public:
  explicit Relative2dImpl(const Relative2dOptions& options);
  void pretty_print(std::ostream& stream) const override;

  const Relative2dOptions& options() const noexcept { return options_; }
  // float32 parameters "table_h" [2*height-1, Dh] and "table_w" [2*width-1, Dh]
  // (or [num_heads, ., Dh]).
  const at::Tensor& table_h() const { return tensor("table_h"); }
  const at::Tensor& table_w() const { return tensor("table_w"); }

 private:
  Relative2dOptions options_;
};

TORCH_MODULE(Relative2d);

}  // namespace posenc::nn
