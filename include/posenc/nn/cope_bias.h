// CoPE (Golovneva et al. 2024, arXiv 2405.18719, "Contextual Position
// Encoding: Learning to Count What's Important"): positions counted by the
// content. For query i (key position i' = i + Tk - Tq) and keys j <= i':
//   g_ij = sigmoid(scale q_i . k_j),  p_ij = sum_{t=j}^{i'} g_it,  P = min(p_ij, npos_max - 1)
//   b_ij = (1 - w) q_i . e[floor P] + w q_i . e[ceil P],  w = P - floor P
// added to the logits after the scaling (formula, layouts and gradients:
// posenc/kernels/cope.h). The term depends on q and k, so the module cannot
// give a dense [H, Tq, Tk] bias by itself: it hands the attention its table
// (the tile kind "cope") and the attention op computes the term from q and k,
// per query row in the fused kernel, never as a (Tq, Tk) tensor.
//
// As the authors' code (the paper's CoPE listing; facebookresearch/RAM
// projects/cope): one table e [npos_max, head_dim] shared by a layer's heads
// (their pos_emb [1, head_dim, npos_max], broadcast over batch x heads),
// initialised to zero, gates from the scaled logits q.k / sqrt(Dh) with
// masked keys (causal, padding) counting 0. npos_max defaults to 64 here (the
// listing has no default; RAM's training script uses block_size + 1). CoPE is
// defined for decoders; a CopeBias must be causal.
#pragma once

#include <ATen/ATen.h>
#include <torch/arg.h>

#include <cstdint>
#include <optional>

#include "posenc/nn/attention_bias.h"
#include "posenc/nn/family_module.h"

namespace posenc::nn {

// The attention's tile term of kind "cope" (registered in src/nn/families/cope.cpp):
// its table e [npos, Dh], shared by the heads.
inline TileTerm cope_tile(const at::Tensor& e) { return {"cope", {e}}; }

struct CopeBiasOptions {
  CopeBiasOptions(int64_t num_heads, int64_t head_dim) : num_heads_(num_heads), head_dim_(head_dim) {}
  TORCH_ARG(int64_t, num_heads);
  TORCH_ARG(int64_t, head_dim);       // Dh >= 1
  TORCH_ARG(int64_t, npos_max) = 64;  // >= 1 positions; contextual positions clamp at npos_max - 1
  TORCH_ARG(bool, causal) = true;     // must be true: CoPE is defined for causal attention
};

// The typed front end of the family's contract (src/nn/families/cope.cpp). reset_parameters (e = 0, the
// authors' start), bias(q, k, scale) ((B, H, Tq, Tk), -inf where j > i'; differentiable), add_terms
// (the tile term "cope" and the causal mask) and the repr are the holder's; bias(q_len, k_len) is
// refused (runtime_error naming bias(q, k)).
// "[CopeBias] causal must be true: CoPE is defined for decoders (causal attention), got false",
// "[CopeBias] npos_max must be >= 1, got 0", "[CopeBias] head_dim must be >= 1, got 0".
class CopeBiasImpl : public FamilyBiasImpl {
 public:
  explicit CopeBiasImpl(const CopeBiasOptions& options);

  const CopeBiasOptions& options() const noexcept { return options_; }
  // Parameter "e" [npos_max, head_dim] (float32 unless moved).
  const at::Tensor& e() const { return tensor("e"); }

 private:
  CopeBiasOptions options_;
};

TORCH_MODULE(CopeBias);

namespace ops {

// torch.ops.posenc.cope_bias: q (B, H, Tq, Dh), k (B, H, Tk, Dh), e [npos, Dh],
// one floating dtype, CPU; scale of q.k inside the gates (the attention's,
// 1/sqrt(Dh) by default); key_padding_mask (B, Tk) bool, true = padding (its
// gate is 0) -> (B, H, Tq, Tk) in that dtype (float32 math for 16-bit
// inputs), 0 where j > i'. Differentiable wrt q, k and e (first derivatives).
// "[cope_bias] e must be [npos, Dh] with Dh = 8, got [16, 4]".
at::Tensor cope_bias(const at::Tensor& q, const at::Tensor& k, const at::Tensor& e, double scale,
                     const std::optional<at::Tensor>& key_padding_mask = std::nullopt);

}  // namespace ops
}  // namespace posenc::nn
