// What the model families' readers share: typed top-level keys, the rope dict
// of either transformers version, layer types, and the per-layer-type scheme.
// Private to posenc::hf.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config_fields.h"
#include "posenc/hf/hf_config.h"
#include "rotary_config.h"

namespace posenc::hf::detail {

// The first of `keys` present (aliases of one value), checked >= 1.
std::optional<int64_t> positive(const Fields& f, std::initializer_list<std::string_view> keys);
// The same, or "[hf] config.json: KEY is required for model_type 'X'".
int64_t required(const Fields& f, std::initializer_list<std::string_view> keys, const std::string& model_type);
// head_dim when given, else hidden_size / num_attention_heads (HF's integer division).
int64_t head_dim_of(const Fields& f, const std::string& model_type, std::initializer_list<std::string_view> hidden,
                    std::initializer_list<std::string_view> heads);
// The v5 rope_parameters or the v4 rope_scaling dict (either may be absent; both is refused).
std::optional<Fields> rope_dict(const Fields& f);
// The config's layer_types (empty when absent), each a string.
std::vector<std::string> layer_types_of(const Fields& f);
// v5: a rope_parameters dict keyed by layer types (every key a value of layer_types).
bool keyed_by_layer_type(const Fields& dict, const std::vector<std::string>& layer_types);
// rope_theta (else `default_theta`), partial_rotary_factor and the lengths, from the top level.
RotaryContext base_context(const Fields& f, double default_theta);
// One scheme per layer type; the model's scheme is layer 0's.
void set_layer_types(HfScheme& out, std::vector<std::string> types,
                     const std::function<HfLayerScheme(const std::string&)>& scheme_of, const Fields& f);
// One rotary for the model from `ctx` and the rope dict, or (v5) one per layer type when rope_parameters is
// keyed by layer type (full-attention layers then take global_head_dim when the config has it).
void read_with_context(const Fields& f, const RotaryContext& ctx, HfScheme& out);
// Types from a period: layer i is `every` when (i + 1) % period == 0 (with offset 1) or i % period == 0
// (offset 0), else `other`. "[hf] config.json: KEY must be >= 1" for a bad period.
std::vector<std::string> periodic_layer_types(int64_t layers, int64_t period, int64_t offset, const std::string& every,
                                              const std::string& other);

}  // namespace posenc::hf::detail
