// DeBERTa's disentangled attention (He et al., ICLR 2021; the v2/v3 form of
// Hugging Face's modeling_deberta_v2.py) as a relative-vectors encoding:
//   rel      = LayerNorm(rel_embeddings)                       [2 span, model_dim]  (HF's norm_rel_ebd)
//   pos_key  = rel W_pk^T + b_pk, pos_query = rel W_pq^T + b_pq  split per head    [H, 2 span, Dh]
//   c2p[i,j] = q_i . pos_key[row(i' - j)],  p2c[i,j] = k_j . pos_query[row(i' - j)]
//   logits   = (q . k + c2p + p2c) / sqrt(Dh * scale_factor),  scale_factor = 1 + #terms (3 for both)
// row() is kernels::deberta_row (log buckets, posenc/kernels/deberta.h), i' = i + Tk - Tq. The
// fused attention takes c2p as its rel_k term and p2c as its rel_q term, both read through a
// rel_index of O(Tq + Tk) entries (no (Tq, Tk) tensor); add_terms also sets the terms'
// scale_factor, which MultiheadAttention folds into its 1/sqrt(Dh).
// share_att_key (DeBERTa v3's default) projects rel with the layer's own q/k projections:
// MultiheadAttention hands them over (share_projections) when it is built; a module used on its
// own keeps share_att_key false (the default here) and owns pos_key_proj / pos_query_proj.
// HF keeps one rel_embeddings per encoder; here each layer's module holds its own.
#pragma once

#include <ATen/ATen.h>
#include <torch/arg.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <utility>

#include "posenc/kernels/deberta.h"
#include "posenc/nn/family_module.h"

namespace posenc::nn {

struct DebertaRelativeOptions {
  DebertaRelativeOptions(int64_t num_heads, int64_t head_dim) : num_heads_(num_heads), head_dim_(head_dim) {}
  TORCH_ARG(int64_t, num_heads);
  TORCH_ARG(int64_t, head_dim);
  TORCH_ARG(int64_t, model_dim) = 0;                 // width of rel_embeddings; 0: num_heads * head_dim
  TORCH_ARG(int64_t, position_buckets) = 256;        // 0: no log buckets (HF's -1)
  TORCH_ARG(int64_t, max_relative_positions) = 512;
  TORCH_ARG(bool, c2p) = true;                       // pos_att_type holds "c2p"
  TORCH_ARG(bool, p2c) = true;                       // pos_att_type holds "p2c"
  TORCH_ARG(bool, share_att_key) = false;            // true: the layer's q/k projections (share_projections)
  TORCH_ARG(bool, norm_rel_ebd) = true;              // LayerNorm on rel_embeddings (HF's "layer_norm")
  TORCH_ARG(double, layer_norm_eps) = 1e-7;          // HF DebertaV2's layer_norm_eps
  TORCH_ARG(double, init_std) = 0.02;                // rel_embeddings ~ N(0, init_std^2), HF's initializer_range
};

// On the family contract (src/nn/families/deberta.cpp): a typed front end of FamilyRelative, whose holder
// builds the submodules norm_rel_ebd (LayerNorm), pos_key_proj and pos_query_proj (Linear) and borrows the
// layer's q_proj / k_proj for share_att_key.
class DebertaRelativeImpl : public FamilyRelativeImpl {
 public:
  // Throws c10::ValueError with kernels::validate_deberta's messages under "[DebertaRelative]", and
  // "[DebertaRelative] pos_att_type must hold c2p or p2c, got neither",
  // "[DebertaRelative] share_att_key needs model_dim = num_heads * head_dim = 64, got 32".
  explicit DebertaRelativeImpl(const DebertaRelativeOptions& options);

  // reset_parameters(): rel_embeddings ~ N(0, init_std^2), LayerNorm to (1, 0), the projections as torch's
  // Linear. logits(q, k): c2p + p2c (B, H, Tq, Tk), unscaled (the layer scales the sum by
  // 1/sqrt(Dh * scale_factor())). add_terms: rel_k = pos_key (c2p), rel_q = pos_query (p2c), rel_index over
  // max(Tq, Tk) - 1 offsets, scale_factor. share_projections: the layer's q/k projections (share_att_key).

  const DebertaRelativeOptions& options() const noexcept { return options_; }
  kernels::DebertaParams params() const noexcept {
    return {options_.position_buckets(), options_.max_relative_positions()};
  }
  // 1 + (c2p) + (p2c): DeBERTa's logits are divided by sqrt(Dh * scale_factor).
  double scale_factor() const noexcept { return 1.0 + (options_.c2p() ? 1 : 0) + (options_.p2c() ? 1 : 0); }
  // (pos_key, pos_query) [H, 2 span, Dh] in `compute` (undefined where the term is off); differentiable.
  std::pair<at::Tensor, at::Tensor> tables(at::ScalarType compute) const;

  // float32 parameters: "rel_embeddings" [2 span, model_dim]; "norm_rel_ebd" (LayerNorm) when
  // options().norm_rel_ebd(); "pos_key_proj" / "pos_query_proj" (Linear model_dim -> H * Dh) when
  // not share_att_key and the term is on.
  const at::Tensor& rel_embeddings() const { return tensor("rel_embeddings"); }
  torch::nn::LayerNorm norm{nullptr};
  torch::nn::Linear pos_key_proj{nullptr}, pos_query_proj{nullptr};

 private:
  DebertaRelativeOptions options_;
};

TORCH_MODULE(DebertaRelative);

}  // namespace posenc::nn
