// Private: the checks of FIRE's six tensors (posenc/nn/fire_bias.h's
// FireTerm), shared by the fire_bias op and the attention's tile kind "fire"
// (both in ops/fire.cpp), and their view as kernel parameters.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>

#include "posenc/kernels/fire.h"
#include "posenc/nn/fire_bias.h"

namespace posenc::nn::detail {

// Every tensor given, floating, on the CPU, in w1's dtype; w1, b1 [hidden >= 1],
// w2 [H, hidden] (H = heads when given), b2 [H], c and threshold 0-d, both
// finite and > 0. Names carry `prefix` ("fire_" in attention):
// "[attention] fire_c must be > 0, got -1".
void check_fire(const char* op, const char* prefix, const FireTerm& t, std::optional<int64_t> heads = std::nullopt);

// The kernel's view of checked tensors, contiguous in T (kept alive by the caller).
template <class T>
kernels::FireParams<T> fire_params(const at::Tensor& w1, const at::Tensor& b1, const at::Tensor& w2,
                                   const at::Tensor& b2, double c, double threshold) {
  return {w2.size(0), w1.size(0), w1.data_ptr<T>(), b1.data_ptr<T>(), w2.data_ptr<T>(), b2.data_ptr<T>(),
          static_cast<T>(c), static_cast<T>(threshold)};
}

}  // namespace posenc::nn::detail
