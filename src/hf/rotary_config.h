// One rotary embedding from a rope dict (v4 `rope_scaling`, v5
// `rope_parameters` or one of its per-layer-type dicts) plus what the model
// family resolved from the top level. Private to posenc::hf.
#pragma once

#include <optional>
#include <string>

#include "config_fields.h"
#include "posenc/hf/hf_config.h"

namespace posenc::hf::detail {

struct RotaryContext {
  const Fields* top = nullptr;  // the (text) config, for top-level keys and messages
  int64_t head_dim = 0;         // resolved by the family (> 0)
  double base = 10000.0;        // top-level rope_theta (or the family's key / default)
  std::string base_key = "rope_theta";
  std::optional<double> partial;  // top-level partial_rotary_factor / rotary_pct
  std::string partial_key = "partial_rotary_factor";
  std::optional<int64_t> rotary_dim;  // GPT-J's rotary_dim: overrides partial
  kernels::RopeLayout layout = kernels::RopeLayout::kHalf;
  std::optional<int64_t> max_position_embeddings;
  std::optional<int64_t> top_original;  // top-level original_max_position_embeddings (Phi-3)
};

// `dict` absent: unscaled RoPE from the context alone.
HfRotary read_rotary(const RotaryContext& ctx, const std::optional<Fields>& dict);

}  // namespace posenc::hf::detail
