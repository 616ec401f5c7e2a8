// The normalized scheme for the Python front end (python/posenc/hf.py): the
// keyword arguments of the posenc.nn modules, nothing else.
#include <nlohmann/json.hpp>

#include "posenc/hf/hf_config.h"

namespace posenc::hf {
namespace {

using Json = nlohmann::ordered_json;

Json scaling_json(const kernels::RopeScaling& s) {
  if (s.type == kernels::RopeType::kDefault) return nullptr;
  Json j = Json::object();
  j["rope_type"] = std::string(kernels::rope_type_name(s.type));
  if (s.factor) j["factor"] = *s.factor;
  if (s.original_max_position_embeddings) j["original_max_position_embeddings"] = *s.original_max_position_embeddings;
  if (s.max_position_embeddings) j["max_position_embeddings"] = *s.max_position_embeddings;
  if (s.beta_fast) j["beta_fast"] = *s.beta_fast;
  if (s.beta_slow) j["beta_slow"] = *s.beta_slow;
  if (s.mscale) j["mscale"] = *s.mscale;
  if (s.mscale_all_dim) j["mscale_all_dim"] = *s.mscale_all_dim;
  if (s.truncate) j["truncate"] = *s.truncate;
  if (s.attention_factor) j["attention_factor"] = *s.attention_factor;
  if (!s.short_factor.empty()) j["short_factor"] = s.short_factor;
  if (!s.long_factor.empty()) j["long_factor"] = s.long_factor;
  if (s.low_freq_factor) j["low_freq_factor"] = *s.low_freq_factor;
  if (s.high_freq_factor) j["high_freq_factor"] = *s.high_freq_factor;
  if (s.partial_rotary_factor) j["partial_rotary_factor"] = *s.partial_rotary_factor;
  return j;
}

Json layer_json(const HfLayerScheme& l) {
  Json j = Json::object();
  j["rotary"] = nullptr;
  j["bias"] = nullptr;
  j["absolute"] = nullptr;
  j["relative"] = nullptr;
  j["query_temperature"] = nullptr;
  if (l.query_temperature) {
    j["query_temperature"] = {{"floor_scale", l.query_temperature->floor_scale},
                              {"attn_scale", l.query_temperature->attn_scale}};
  }
  if (l.rotary) {
    const HfRotary& r = *l.rotary;
    Json x = {{"head_dim", r.head_dim},
              {"rotary_dim", r.rotary_dim},
              {"base", r.base},
              {"layout", std::string(kernels::rope_layout_name(r.layout))},
              {"scaling", scaling_json(r.scaling)},
              {"mrope_section", r.mrope_section.empty() ? Json(nullptr) : Json(r.mrope_section)},
              {"mrope_interleaved", r.mrope_interleaved},
              {"max_position_embeddings", r.max_position_embeddings}};
    j["rotary"] = x;
  }
  if (l.bias) {
    const HfBias& b = *l.bias;
    if (b.kind == HfBias::Kind::kAlibi) {
      j["bias"] = {{"kind", "alibi"},
                   {"num_heads", b.num_heads},
                   {"slopes", b.alibi_slopes.empty() ? Json(nullptr) : Json(b.alibi_slopes)},
                   {"alibi_bias_max", b.alibi_bias_max}};
    } else {
      j["bias"] = {{"kind", "t5"},
                   {"num_heads", b.num_heads},
                   {"num_buckets", b.num_buckets},
                   {"max_distance", b.max_distance},
                   {"bidirectional", b.bidirectional}};
    }
  }
  if (l.absolute) {
    j["absolute"] = {{"kind", l.absolute->kind == HfAbsolute::Kind::kLearned ? "learned" : "sinusoidal"},
                     {"max_positions", l.absolute->max_positions},
                     {"dim", l.absolute->dim}};
  }
  if (l.relative) {
    j["relative"] = {{"kind", l.relative->kind == HfRelative::Kind::kKey ? "relative_key" : "relative_key_query"},
                     {"max_position_embeddings", l.relative->max_position_embeddings},
                     {"head_dim", l.relative->head_dim},
                     {"num_heads", l.relative->num_heads}};
  }
  return j;
}

}  // namespace

std::string to_json(const HfScheme& s) {
  Json j = Json::object();
  j["model_type"] = s.model_type;
  j["source"] = s.source;
  j["scheme"] = layer_json(s.scheme);
  j["layer_types"] = s.layer_types;
  Json by = Json::object();
  for (const auto& [type, layer] : s.by_layer_type) by[type] = layer_json(layer);
  j["by_layer_type"] = by;
  return j.dump();
}

}  // namespace posenc::hf
