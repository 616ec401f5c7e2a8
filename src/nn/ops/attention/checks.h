// Private: the checks of the attention's terms that its keyword sugar
// (keywords.cpp) shares with check_attention (checks.cpp), with the same words.
#pragma once

#include <ATen/ATen.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "posenc/nn/attention_ops.h"

namespace posenc::nn::detail {

// The call's scale, 1/sqrt(Dh) by default.
inline double scale_of(const AttentionCall& call, int64_t head_dim) {
  if (call.scale) return *call.scale;
  return head_dim > 0 ? 1.0 / std::sqrt(static_cast<double>(head_dim)) : 1.0;
}

// "[8, 31]": a table's expected or actual shape.
std::string list_of(at::IntArrayRef sizes);
// A term tensor: floating, on the CPU, in q's dtype or the compute dtype
// ("[attention] rel_k must have q's dtype (float32), got float64").
void check_term(const char* name, const at::Tensor& t, const at::Tensor& q);
// Finite, else the first bad entry by position ("[attention] rel_k must be finite, got nan at [2, 0]").
void check_finite_table(const char* name, const at::Tensor& t);

}  // namespace posenc::nn::detail
