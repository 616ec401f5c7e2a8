// The attention benchmarks against the torch 2 peer users run:
// F.scaled_dot_product_attention (SDPA) on the same inputs, in the torch 2
// environment (torch2_peer.h), for every family with an SDPA form
// (attention_families.h): checked first, then timed turn about with posenc's
// side, one call each, the paired median of SDPA / ours printed beside its
// target.
//
// Targets (issue 46): no bias (none, rope) >= 1.3x forward and forward +
// backward; causal >= 1.6x forward, >= 1.5x forward + backward; a family whose
// bias SDPA takes as a dense mask (alibi, t5, kerple, dpb, fire) >= 3x, where
// SDPA also holds that mask, H*T^2 floats, and ours O(T*Dh).
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <vector>

#include "attention_families.h"

namespace posenc::bench {

struct PeerComparison {
  bool backward = false;  // forward + backward: SDPA's q, k, v gradients against ours
  // posenc's outputs for the check: out, then (backward) the gradients of q, k, v.
  std::function<std::vector<at::Tensor>(const AttentionFamily&)> ours_outputs;
  std::function<void(const AttentionFamily&)> ours_call;   // one call (a step with a backward), timed
  std::function<at::Tensor(const AttentionFamily&)> grad;  // backward: the output's gradient both sides take
  std::function<bool(const AttentionFamily&)> selected;    // the families this run measures
};

// Prints the comparison; returns 0, 1 when a result differs from SDPA's, 3
// when a target is missed. With no torch 2 environment it says so and
// returns 0: the eager comparison stands alone.
int compare_with_torch2(const PeerComparison& how);

}  // namespace posenc::bench
