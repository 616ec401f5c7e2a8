// ALiBi with learned slopes (a scratch family: the contract's proof, docs/families.md):
// bias[h, i, j] = -m_h |i' - j|, the slopes m a parameter started at the paper's.
#pragma once

#include <ATen/ATen.h>
#include <torch/arg.h>

#include <cstdint>

#include "posenc/nn/family_module.h"

namespace posenc::nn {

struct LearnedAlibiBiasOptions {
  /* implicit */ LearnedAlibiBiasOptions(int64_t num_heads) : num_heads_(num_heads) {}
  TORCH_ARG(int64_t, num_heads);
  TORCH_ARG(bool, causal) = false;
};

class LearnedAlibiBiasImpl : public FamilyBiasImpl {
 public:
  explicit LearnedAlibiBiasImpl(const LearnedAlibiBiasOptions& options);
  const at::Tensor& slopes() const { return tensor("slopes"); }  // parameter [num_heads]
};

TORCH_MODULE(LearnedAlibiBias);

}  // namespace posenc::nn
