// FIRE (Li et al. 2023, arXiv 2310.04418, "Functional Interpolation for
// Relative Positions Improves Long Context Transformers"): a causal logit bias
// that is a small learned MLP of the progressively interpolated offset,
//   b_h(i', j) = f(psi(i' - j) / psi(max(L, i')))_h,  psi(t) = log(1 + c t),  j <= i'
//   f: 1 -> hidden (ReLU) -> num_heads
// (formula, layouts and gradients: posenc/kernels/fire.h). The bias depends on
// the query position, not only on the offset, so it reaches the fused
// attention as a term computed per tile (the tile kind "fire"), never as a
// (Tq, Tk) tensor; bias() gives the dense [H, Tq, Tk] form.
//
// Parameters and their initialisation follow the authors' PyTorch code (the
// paper's appendix): f is torch.nn.Linear(1, hidden), ReLU,
// torch.nn.Linear(hidden, H) with torch's default draws (U(-1, 1) for the
// first layer, U(-1/sqrt(hidden), 1/sqrt(hidden)) for the second), c starts at
// 0.1, and L = |L_multiplier * init_L| with init_L = 512 fixed and the learned
// multiplier starting at 1 (the absolute value keeps L positive); c enters as
// |c| as in their psi(x) = log(|c x| + 1). Unlike their code no eps is added
// to psi(max(L, i')): with c, L > 0 it is > 0 already. FIRE is defined for
// decoders; a FireBias must be causal.
#pragma once

#include <ATen/ATen.h>
#include <torch/arg.h>

#include <cstdint>

#include "posenc/nn/attention_bias.h"
#include "posenc/nn/family_module.h"

namespace posenc::nn {

// FIRE's tensors (posenc/kernels/fire.h), the tensors of its tile term in
// this order; undefined w1: absent.
struct FireTerm {
  at::Tensor w1, b1;    // [hidden]: the 1 -> hidden layer
  at::Tensor w2;        // [H, hidden]
  at::Tensor b2;        // [H]
  at::Tensor c;         // 0-d, > 0
  at::Tensor threshold; // 0-d L, > 0
  bool defined() const noexcept { return w1.defined(); }
};

// The attention's tile term of kind "fire" (registered in src/nn/families/fire.cpp).
inline TileTerm fire_tile(const FireTerm& t) { return {"fire", {t.w1, t.b1, t.w2, t.b2, t.c, t.threshold}}; }

struct FireBiasOptions {
  /* implicit */ FireBiasOptions(int64_t num_heads) : num_heads_(num_heads) {}
  TORCH_ARG(int64_t, num_heads);
  TORCH_ARG(int64_t, hidden) = 32;       // the MLP's width (the paper: 32)
  TORCH_ARG(bool, causal) = true;        // must be true: FIRE is defined for causal attention
  TORCH_ARG(double, init_c) = 0.1;       // > 0
  TORCH_ARG(double, init_L) = 512.0;     // > 0, the fixed scale of the learned threshold
};

// The typed front end of the family's contract (src/nn/families/fire.cpp). reset_parameters, bias (-inf where
// j > i'), add_terms (the tile term "fire" and the causal mask) and the repr are the holder's.
// "[FireBias] causal must be true: FIRE is defined for decoders (causal attention), got false",
// "[FireBias] hidden must be >= 1, got 0", "[FireBias] init_c must be > 0, got 0",
// "[FireBias] init_L must be > 0, got -1".
class FireBiasImpl : public FamilyBiasImpl {
 public:
  explicit FireBiasImpl(const FireBiasOptions& options);

  const FireBiasOptions& options() const noexcept { return options_; }
  // Parameters (float32 unless moved): "w1", "b1" [hidden], "w2" [H, hidden], "b2" [H] (the layout of
  // torch.nn.Linear(1, hidden) squeezed and torch.nn.Linear(hidden, H)), "c" and "L_multiplier" (0-d).
  const at::Tensor& w1() const { return tensor("w1"); }
  const at::Tensor& b1() const { return tensor("b1"); }
  const at::Tensor& w2() const { return tensor("w2"); }
  const at::Tensor& b2() const { return tensor("b2"); }
  const at::Tensor& c() const { return tensor("c"); }
  const at::Tensor& L_multiplier() const { return tensor("L_multiplier"); }
  // The values the op sees: |c| and L = |L_multiplier * init_L| (0-d, differentiable).
  at::Tensor effective_c() const { return call("effective_c"); }
  at::Tensor threshold() const { return call("threshold"); }

 private:
  FireBiasOptions options_;
};

TORCH_MODULE(FireBias);

namespace ops {

// torch.ops.posenc.fire_bias: w1, b1 [hidden], w2 [H, hidden], b2 [H], c and
// threshold (L) 0-d, one floating dtype, CPU -> [H, q_len, k_len] in that
// dtype (float32 math for 16-bit inputs), 0 where j > i' (FIRE is causal: the
// attention masks those keys); differentiable wrt all six (first derivatives).
// "[fire_bias] c must be > 0, got -1", "[fire_bias] w2 must be [H, hidden] = [4, 32], got [4, 16]".
at::Tensor fire_bias(const at::Tensor& w1, const at::Tensor& b1, const at::Tensor& w2, const at::Tensor& b2,
                     const at::Tensor& c, const at::Tensor& threshold, int64_t q_len, int64_t k_len);
inline at::Tensor fire_bias(const FireTerm& t, int64_t q_len, int64_t k_len) {
  return fire_bias(t.w1, t.b1, t.w2, t.b2, t.c, t.threshold, q_len, k_len);
}

}  // namespace ops
}  // namespace posenc::nn
