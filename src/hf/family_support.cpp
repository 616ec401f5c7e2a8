#include "family_support.h"

#include <algorithm>

namespace posenc::hf::detail {

// The first of `keys` present (aliases of one value), checked >= 1.
std::optional<int64_t> positive(const Fields& f, std::initializer_list<std::string_view> keys) {
  for (std::string_view k : keys) {
    if (const std::optional<int64_t> v = f.integer(k)) {
      if (*v < 1) f.fail(k, "must be >= 1, got ", *v);
      return v;
    }
  }
  return std::nullopt;
}

int64_t required(const Fields& f, std::initializer_list<std::string_view> keys, const std::string& model_type) {
  if (const std::optional<int64_t> v = positive(f, keys)) return *v;
  fail_config(f.source(), f.path_of(*keys.begin()), " is required for model_type '", model_type, "'");
}

// hidden_size / num_attention_heads (HF's integer division), when head_dim is absent.
int64_t head_dim_of(const Fields& f, const std::string& model_type, std::initializer_list<std::string_view> hidden,
                    std::initializer_list<std::string_view> heads) {
  if (const std::optional<int64_t> d = positive(f, {"head_dim"})) return *d;
  const int64_t h = required(f, hidden, model_type);
  const int64_t n = required(f, heads, model_type);
  if (h / n < 1) fail_config(f.source(), "hidden size ", h, " / ", n, " heads gives a head dimension of 0");
  return h / n;
}

// The v5 rope_parameters or the v4 rope_scaling dict (either may be absent).
std::optional<Fields> rope_dict(const Fields& f) {
  if (f.has("rope_parameters") && f.has("rope_scaling")) {
    f.fail("rope_scaling", "and rope_parameters are both given: rope_parameters (transformers v5) replaces "
                           "rope_scaling (v4); keep one");
  }
  return f.has("rope_parameters") ? f.object("rope_parameters") : f.object("rope_scaling");
}

std::vector<std::string> layer_types_of(const Fields& f) {
  std::vector<std::string> out;
  if (!f.has("layer_types")) return out;
  const Json& list = f.json().at("layer_types");
  if (!list.is_array()) f.fail("layer_types", "must be a list of strings, got ", show(list));
  for (const Json& v : list) {
    if (!v.is_string()) f.fail("layer_types", "must be a list of strings, got ", show(v));
    out.push_back(v.get<std::string>());
  }
  return out;
}

// v5: a rope_parameters dict keyed by layer types (every key a value of layer_types).
bool keyed_by_layer_type(const Fields& dict, const std::vector<std::string>& layer_types) {
  if (layer_types.empty() || dict.json().empty()) return false;
  for (const auto& [key, value] : dict.json().items()) {
    if (std::find(layer_types.begin(), layer_types.end(), key) == layer_types.end()) return false;
  }
  return true;
}

RotaryContext base_context(const Fields& f, double default_theta) {
  RotaryContext ctx;
  ctx.top = &f;
  ctx.base = f.number("rope_theta").value_or(default_theta);
  ctx.partial = f.number("partial_rotary_factor");
  ctx.max_position_embeddings = positive(f, {"max_position_embeddings"});
  ctx.top_original = positive(f, {"original_max_position_embeddings"});
  return ctx;
}

// Per layer type: one rotary each, the model's scheme is layer 0's.
void set_layer_types(HfScheme& out, std::vector<std::string> types,
                     const std::function<HfLayerScheme(const std::string&)>& scheme_of, const Fields& f) {
  if (types.empty()) f.fail("layer_types", "is required when rope parameters differ per layer type");
  for (const std::string& t : types) {
    if (!out.by_layer_type.contains(t)) out.by_layer_type.emplace(t, scheme_of(t));
  }
  out.layer_types = std::move(types);
  out.scheme = out.by_layer_type.at(out.layer_types.front());
}

void read_with_context(const Fields& f, const RotaryContext& ctx, HfScheme& out) {
  const std::optional<Fields> dict = rope_dict(f);
  const std::vector<std::string> types = layer_types_of(f);
  if (dict && keyed_by_layer_type(*dict, types)) {
    set_layer_types(out, types, [&](const std::string& t) {
      RotaryContext c = ctx;
      if (t == "full_attention" && f.has("global_head_dim")) c.head_dim = *positive(f, {"global_head_dim"});
      const std::optional<Fields> inner = dict->object(t);
      return HfLayerScheme{read_rotary(c, inner), {}, {}, {}, {}};
    }, f);
    return;
  }
  out.scheme.rotary = read_rotary(ctx, dict);
}

std::vector<std::string> periodic_layer_types(int64_t layers, int64_t period, int64_t offset, const std::string& every,
                                              const std::string& other) {
  std::vector<std::string> out;
  for (int64_t i = 0; i < layers; ++i) out.push_back((i + offset) % period == 0 ? every : other);
  return out;
}

}  // namespace posenc::hf::detail
