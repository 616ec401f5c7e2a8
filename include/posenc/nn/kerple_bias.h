// KERPLE (Chi et al., NeurIPS 2022): a logit bias of the distance |d| = |j - i'|
// with two learned positive parameters per head,
//   kind "log"    b_h(d) = -r1_h log(1 + r2_h |d|)
//   kind "power"  b_h(d) = -r1_h |d|^r2_h,  r2_h in (0, 2]
// Formulas and gradients: posenc/kernels/kerple.h. As ALiBi, causal masks the
// keys after the query (a decoder); an encoder sees the symmetric |d|.
//
// Parameters and constraints follow the authors' code (github.com/chijames/KERPLE,
// also NVIDIA NeMo's port): r1 ~ U(0, 2) and r2 ~ U(0, 1) per head, and before
// every use the parameters are projected (in place, outside autograd) onto
// r1, r2 >= eps = 0.01 (power: r2 <= 2), so an optimizer step that leaves the
// range is undone rather than producing a NaN.
#pragma once

#include <ATen/ATen.h>
#include <torch/arg.h>

#include <cstdint>
#include <optional>

#include "posenc/kernels/kerple.h"
#include "posenc/nn/attention_bias.h"
#include "posenc/nn/family_module.h"

namespace posenc::nn {

struct KerpleBiasOptions {
  /* implicit */ KerpleBiasOptions(int64_t num_heads) : num_heads_(num_heads) {}
  TORCH_ARG(int64_t, num_heads);
  TORCH_ARG(kernels::KerpleKind, kind) = kernels::KerpleKind::kLog;
  TORCH_ARG(bool, causal) = false;  // -inf on keys after the query (a decoder)
  // Initial r1 / r2 of every head; unset: the authors' U(0, 2) / U(0, 1) draws.
  // "[KerpleBias] r1 must be > 0, got 0"; power: "[KerpleBias] r2 must be in (0, 2], got 3".
  TORCH_ARG(std::optional<double>, r1);
  TORCH_ARG(std::optional<double>, r2);
  TORCH_ARG(double, eps) = 0.01;  // the projection's floor, in (0, 1]
};

// The typed front end of the family's contract (src/nn/families/kerple.cpp): the options as settings, the
// parameters by name. reset_parameters, bias, add_terms and the repr are the holder's.
class KerpleBiasImpl : public FamilyBiasImpl {
 public:
  explicit KerpleBiasImpl(const KerpleBiasOptions& options);

  // Clamps r1, r2 onto [eps, inf) (power: r2 onto [eps, 2]) in place; a no-op
  // (no version bump) when they are in range, so a second forward before a
  // backward does not invalidate the first graph.
  void project() { call("project"); }

  const KerpleBiasOptions& options() const noexcept { return options_; }
  // [num_heads] float32 each, parameters "r1" and "r2".
  const at::Tensor& r1() const { return tensor("r1"); }
  const at::Tensor& r2() const { return tensor("r2"); }

 private:
  KerpleBiasOptions options_;
};

TORCH_MODULE(KerpleBias);

namespace ops {

// torch.ops.posenc.kerple_offset_bias: r1, r2 [H] (float32/64/bf16/f16, one
// dtype, CPU) -> offset rows [H, q_len + k_len - 1] (0 columns when a length is
// 0), element d + k_len - 1 for d = j - i', in r1's dtype; differentiable wrt
// r1 and r2 (first derivatives). Values out of range are refused:
// "[kerple_offset_bias] r1 must be > 0, got 0 (head 0)".
at::Tensor kerple_offset_bias(const at::Tensor& r1, const at::Tensor& r2, int64_t q_len, int64_t k_len,
                              kernels::KerpleKind kind = kernels::KerpleKind::kLog);

}  // namespace ops
}  // namespace posenc::nn
