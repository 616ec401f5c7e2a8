#include "hybrid_families.h"

#include <cmath>
#include <optional>
#include <vector>

#include "family_support.h"
#include "rotary_config.h"

namespace posenc::hf::detail {
namespace {

const HfLayerScheme kNoPositions{};  // a NoPE layer: attention sees no position at all

// sliding_window given as null (HF's None), as opposed to absent (the class default, a window).
bool window_is_null(const Fields& f) {
  return f.json().contains("sliding_window") && f.json().at("sliding_window").is_null();
}

// layer_types, else the period rule of the config class: layer i is full attention when
// (i + 1) % period == 0 (Gemma 3, Cohere 2, EXAONE 4, OLMo 3).
std::vector<std::string> sliding_full_types(const Fields& f, const std::string& model_type, int64_t period) {
  std::vector<std::string> types = layer_types_of(f);
  if (types.empty()) {
    types = periodic_layer_types(required(f, {"num_hidden_layers"}, model_type), period, 1, "full_attention",
                                 "sliding_attention");
  }
  for (const std::string& t : types) {
    if (t != "sliding_attention" && t != "full_attention") {
      f.fail("layer_types", "must hold sliding_attention or full_attention, got '", t, "'");
    }
  }
  return types;
}

// The rope dict of a layer type: its own when rope_parameters is keyed by layer type, else the one dict.
std::optional<Fields> dict_for(const std::optional<Fields>& dict, const std::vector<std::string>& types,
                               const std::string& type) {
  if (dict && keyed_by_layer_type(*dict, types)) return dict->object(type);
  return dict;
}

// SmolLM3's and Llama 4's no_rope_layers as layer types: `with` where the entry is 1 (RoPE), `without` where
// it is 0; absent or empty, every no_rope_layer_interval-th layer (4) is NoPE: (i + 1) % interval == 0.
std::vector<std::string> rope_layer_types(const Fields& f, const std::string& model_type, const std::string& with,
                                          const std::string& without) {
  const int64_t layers = required(f, {"num_hidden_layers"}, model_type);
  std::vector<int64_t> use_rope = f.integers("no_rope_layers");
  if (use_rope.empty()) {
    const int64_t interval = positive(f, {"no_rope_layer_interval"}).value_or(4);
    for (int64_t i = 0; i < layers; ++i) use_rope.push_back((i + 1) % interval != 0 ? 1 : 0);
  }
  if (static_cast<int64_t>(use_rope.size()) != layers) {
    f.fail("no_rope_layers", "must have one entry per layer (num_hidden_layers = ", layers, "), got ",
           use_rope.size());
  }
  std::vector<std::string> types;
  for (const int64_t v : use_rope) {
    if (v != 0 && v != 1) f.fail("no_rope_layers", "must hold 0 (NoPE) or 1 (RoPE), got ", v);
    types.push_back(v == 1 ? with : without);
  }
  return types;
}

}  // namespace

// Cohere 2 (Command R7B): Cohere's interleaved RoPE on the sliding-window layers only; HF's attention
// applies it iff the layer has a window, so the full-attention layers (every 4th by default) and, with
// sliding_window null, all layers have none. head_dim is hidden_size / heads whatever the config says
// (HF's config class sets it so).
void read_cohere2(const Fields& f, const std::string& model_type, HfScheme& out) {
  RotaryContext ctx = base_context(f, 10000.0);
  const int64_t hidden = required(f, {"hidden_size"}, model_type);
  const int64_t heads = required(f, {"num_attention_heads"}, model_type);
  ctx.head_dim = hidden / heads;
  ctx.layout = kernels::RopeLayout::kInterleaved;
  const std::vector<std::string> types =
      sliding_full_types(f, model_type, positive(f, {"sliding_window_pattern"}).value_or(4));
  const std::optional<Fields> dict = rope_dict(f);
  const bool windowed = !window_is_null(f);
  set_layer_types(out, types, [&](const std::string& t) {
    if (t != "sliding_attention" || !windowed) return kNoPositions;
    return HfLayerScheme{read_rotary(ctx, dict_for(dict, types, t)), {}, {}, {}, {}};
  }, f);
}

// EXAONE 4: RoPE on every layer when sliding_window is null; else (hybrid) on the sliding layers only, the
// full-attention ones (every sliding_window_pattern-th, default 4) having none.
void read_exaone4(const Fields& f, const std::string& model_type, HfScheme& out) {
  RotaryContext ctx = base_context(f, 10000.0);
  ctx.head_dim = head_dim_of(f, model_type, {"hidden_size"}, {"num_attention_heads"});
  if (window_is_null(f) && !f.has("layer_types")) {
    read_with_context(f, ctx, out);
    return;
  }
  const std::vector<std::string> types =
      sliding_full_types(f, model_type, positive(f, {"sliding_window_pattern"}).value_or(4));
  const std::optional<Fields> dict = rope_dict(f);
  const bool windowed = !window_is_null(f);
  set_layer_types(out, types, [&](const std::string& t) {
    if (t == "full_attention" && windowed) return kNoPositions;
    return HfLayerScheme{read_rotary(ctx, dict_for(dict, types, t)), {}, {}, {}, {}};
  }, f);
}

// OLMo 3: RoPE on every layer; the sliding layers (three of every four) unscaled, the full-attention ones
// with the config's scaling. rope_theta's default is v5's, 500000 (v4's class had 10000).
void read_olmo3(const Fields& f, const std::string& model_type, HfScheme& out) {
  RotaryContext ctx = base_context(f, 500000.0);
  ctx.head_dim = head_dim_of(f, model_type, {"hidden_size"}, {"num_attention_heads"});
  const std::vector<std::string> types = sliding_full_types(f, model_type, 4);
  const std::optional<Fields> dict = rope_dict(f);
  if (dict && keyed_by_layer_type(*dict, types)) {
    read_with_context(f, ctx, out);
    return;
  }
  set_layer_types(out, types, [&](const std::string& t) {
    return HfLayerScheme{read_rotary(ctx, t == "full_attention" ? dict : std::nullopt), {}, {}, {}, {}};
  }, f);
}

// SmolLM3: RoPE except on the layers no_rope_layers marks 0 (default: every no_rope_layer_interval-th,
// 4, is NoPE: layer i has RoPE iff (i + 1) % 4 != 0). posenc names the two kinds "rope" and "no_rope".
void read_smollm3(const Fields& f, const std::string& model_type, HfScheme& out) {
  RotaryContext ctx = base_context(f, 2000000.0);
  ctx.head_dim = head_dim_of(f, model_type, {"hidden_size"}, {"num_attention_heads"});
  const std::vector<std::string> types = rope_layer_types(f, model_type, "rope", "no_rope");
  const std::optional<Fields> dict = rope_dict(f);
  set_layer_types(out, types, [&](const std::string& t) {
    return t == "rope" ? HfLayerScheme{read_rotary(ctx, dict), {}, {}, {}, {}} : kNoPositions;
  }, f);
}

// Llama 4 (the text model): interleaved RoPE (complex pairs) except on the layers no_rope_layers marks 0
// (default: every no_rope_layer_interval-th, 4); on those, with attn_temperature_tuning (default true),
// the queries are scaled by position (HfQueryTemperature). HF's layer types: chunked_attention with RoPE,
// full_attention without. head_dim defaults to 128, rope_theta to 500000.
void read_llama4(const Fields& f, const std::string& model_type, HfScheme& out) {
  RotaryContext ctx = base_context(f, 500000.0);
  ctx.head_dim = positive(f, {"head_dim"}).value_or(128);
  ctx.layout = kernels::RopeLayout::kInterleaved;
  // A flag HF tests for truth: true/false, or a number (nonzero is true).
  bool tuning = true;
  if (f.has("attn_temperature_tuning")) {
    const Json& v = f.json().at("attn_temperature_tuning");
    if (!v.is_boolean() && !v.is_number()) f.fail("attn_temperature_tuning", "must be true or false, got ", show(v));
    tuning = v.is_boolean() ? v.get<bool>() : v.get<double>() != 0;
  }
  HfQueryTemperature temperature;
  temperature.floor_scale = f.number("floor_scale").value_or(8192.0);
  temperature.attn_scale = f.number("attn_scale").value_or(0.1);
  if (!(std::isfinite(temperature.floor_scale) && temperature.floor_scale > 0)) {
    f.fail("floor_scale", "must be > 0, got ", temperature.floor_scale);
  }
  if (!std::isfinite(temperature.attn_scale)) {
    f.fail("attn_scale", "must be a finite number, got ", temperature.attn_scale);
  }
  const std::vector<std::string> types = rope_layer_types(f, model_type, "chunked_attention", "full_attention");
  const std::optional<Fields> dict = rope_dict(f);
  set_layer_types(out, types, [&](const std::string& t) {
    if (t == "chunked_attention") return HfLayerScheme{read_rotary(ctx, dict), {}, {}, {}, {}};
    HfLayerScheme nope;
    if (tuning) nope.query_temperature = temperature;
    return nope;
  }, f);
}

// ModernBERT (an encoder): layer i attends globally when i % global_attn_every_n_layers (3) == 0, at
// global_rope_theta (160000), else in a local window at local_rope_theta (10000; null: the global one).
// The scaling, when given, applies to both.
void read_modernbert(const Fields& f, const std::string& model_type, HfScheme& out) {
  RotaryContext ctx = base_context(f, 160000.0);
  ctx.head_dim = head_dim_of(f, model_type, {"hidden_size"}, {"num_attention_heads"});
  std::vector<std::string> types = layer_types_of(f);
  if (types.empty()) {
    types = periodic_layer_types(required(f, {"num_hidden_layers"}, model_type),
                                 positive(f, {"global_attn_every_n_layers"}).value_or(3), 0, "full_attention",
                                 "sliding_attention");
  }
  const std::optional<Fields> dict = rope_dict(f);
  if (dict && keyed_by_layer_type(*dict, types)) {
    read_with_context(f, ctx, out);
    return;
  }
  const double global = f.number("global_rope_theta").value_or(160000.0);
  const bool local_null = f.json().contains("local_rope_theta") && f.json().at("local_rope_theta").is_null();
  const double local = local_null ? global : f.number("local_rope_theta").value_or(10000.0);
  set_layer_types(out, types, [&](const std::string& t) {
    if (t != "sliding_attention" && t != "full_attention") {
      f.fail("layer_types", "must hold sliding_attention or full_attention, got '", t, "'");
    }
    RotaryContext c = ctx;
    const bool full = t == "full_attention";
    c.base = full ? global : local;
    c.base_key = full || local_null ? "global_rope_theta" : "local_rope_theta";
    return HfLayerScheme{read_rotary(c, dict), {}, {}, {}, {}};
  }, f);
}

}  // namespace posenc::hf::detail
