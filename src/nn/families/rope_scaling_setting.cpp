#include "rope_scaling_setting.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "op_support.h"
#include "ops/rope/support.h"
#include "posenc/hf/hf_config.h"
#include "posenc/nn/ops.h"

namespace posenc::nn::families {
namespace {

using Json = nlohmann::json;

template <class T>
c10::optional<T> key(const Json& dict, const char* name) {
  const auto found = dict.find(name);
  if (found == dict.end() || found->is_null()) return c10::nullopt;
  try {
    return found->get<T>();
  } catch (const Json::exception&) {
    TORCH_CHECK_TYPE(false, "[rope] rope_scaling key '", name, "' has the wrong type, got ", found->dump());
  }
}

kernels::RopeScaling from_dict(const Json& dict) {
  TORCH_CHECK_TYPE(dict.is_object(), "[rope] scaling must be a rope_scaling dict or None, got ", dict.dump());
  const auto type = key<std::string>(dict, "rope_type");
  const auto legacy = key<std::string>(dict, "type");
  const std::string kind = type ? *type : legacy.value_or("");
  const std::vector<std::string> known = detail::rope_scaling_keys();
  for (const auto& [name, value] : dict.items()) {
    // partial_rotary_factor is a scaling key only for proportional RoPE (Gemma 4); elsewhere it sets R.
    const bool ok = std::find(known.begin(), known.end(), name) != known.end() &&
                    (name != "partial_rotary_factor" || kind == "proportional");
    if (ok) continue;
    const std::optional<std::string> elsewhere = hf::misplaced_scaling_key(name, "rope");
    TORCH_CHECK_VALUE(false, elsewhere ? *elsewhere : "[rope] unknown rope_scaling key '" + name + "'");
  }
  return detail::make_rope_scaling(
      type, legacy, key<double>(dict, "factor"), key<int64_t>(dict, "original_max_position_embeddings"),
      key<int64_t>(dict, "max_position_embeddings"), key<double>(dict, "beta_fast"), key<double>(dict, "beta_slow"),
      key<double>(dict, "mscale"), key<double>(dict, "mscale_all_dim"), key<bool>(dict, "truncate"),
      key<double>(dict, "attention_factor"), key<std::vector<double>>(dict, "short_factor"),
      key<std::vector<double>>(dict, "long_factor"), key<double>(dict, "low_freq_factor"),
      key<double>(dict, "high_freq_factor"), key<double>(dict, "partial_rotary_factor"));
}

Json to_dict(const kernels::RopeScaling& s) {
  Json j = Json::object();
  j["rope_type"] = std::string(kernels::rope_type_name(s.type));
  auto put = [&](const char* name, const auto& v) {
    if (v) j[name] = *v;
  };
  put("factor", s.factor);
  put("original_max_position_embeddings", s.original_max_position_embeddings);
  put("max_position_embeddings", s.max_position_embeddings);
  put("beta_fast", s.beta_fast);
  put("beta_slow", s.beta_slow);
  put("mscale", s.mscale);
  put("mscale_all_dim", s.mscale_all_dim);
  put("truncate", s.truncate);
  put("attention_factor", s.attention_factor);
  if (!s.short_factor.empty()) j["short_factor"] = s.short_factor;
  if (!s.long_factor.empty()) j["long_factor"] = s.long_factor;
  put("low_freq_factor", s.low_freq_factor);
  put("high_freq_factor", s.high_freq_factor);
  put("partial_rotary_factor", s.partial_rotary_factor);
  return j;
}

Json parse(const std::string& text) {
  const Json parsed = Json::parse(text, nullptr, false);
  TORCH_CHECK_VALUE(!parsed.is_discarded(), "[rope] scaling must be JSON, got '", text, "'");
  return parsed;
}

}  // namespace

kernels::RopeScaling scaling_from_json(const std::string& text) { return from_dict(parse(text)); }

kernels::RopeScaling scaling_setting(const SettingJson* setting) {
  return setting ? scaling_from_json(setting->text) : kernels::RopeScaling{};
}

std::vector<kernels::RopeScaling> scalings_setting(const SettingJson* setting) {
  if (!setting) return {};
  const Json parsed = parse(setting->text);
  if (parsed.is_object()) return {from_dict(parsed)};
  std::vector<kernels::RopeScaling> out;
  for (const Json& axis : parsed) out.push_back(axis.is_null() ? kernels::RopeScaling{} : from_dict(axis));
  return out;
}

SettingValue scaling_value(const kernels::RopeScaling& scaling) {
  if (kernels::is_unscaled(scaling)) return std::monostate{};
  return SettingJson{to_dict(scaling).dump()};
}

SettingValue scalings_value(const std::vector<kernels::RopeScaling>& scalings) {
  if (scalings.empty()) return std::monostate{};
  Json list = Json::array();
  for (const kernels::RopeScaling& s : scalings) list.push_back(kernels::is_unscaled(s) ? Json() : to_dict(s));
  return SettingJson{list.dump()};
}

void derive_rotary_dim(FamilySettings& s) {
  if (!s.has("rotary_dim")) s.set("rotary_dim", s.integer("head_dim"));
}

int64_t checked_rotary_dim(const char* module, const FamilySettings& s) {
  const int64_t head_dim = s.integer("head_dim");
  TORCH_CHECK_VALUE(head_dim >= 1, "[", module, "] head_dim must be positive, got ", head_dim);
  const int64_t r = s.optional_integer("rotary_dim").value_or(head_dim);
  const kernels::RopeLayout layout = kernels::parse_rope_layout(s.word("layout"));
  detail::translate_errors([&] { kernels::validate(kernels::RopeApplyParams{head_dim, r, layout, false}, module); });
  return r;
}

void check_qk(const char* module, const at::Tensor& q, const at::Tensor& k, int64_t head_dim) {
  for (const auto& [name, t] : {std::pair<const char*, const at::Tensor*>{"q", &q}, {"k", &k}}) {
    detail::check_rope_input(module, name, *t);
    TORCH_CHECK_VALUE(t->size(-1) == head_dim, "[", module, "] ", name, " must have head_dim = ", head_dim,
                      " channels in its last dimension, got shape ", detail::shape_string(t->sizes()));
  }
}

std::vector<at::Tensor> rotate_both(const at::Tensor& q, const at::Tensor& k, kernels::RopeLayout layout,
                                    const RopeTables& tables) {
  const at::ScalarType q_compute = detail::compute_dtype(q.scalar_type());
  const at::ScalarType k_compute = detail::compute_dtype(k.scalar_type());
  const auto [q_cos, q_sin] = tables(q_compute);
  at::Tensor q_out = ops::rope_rotate(q, q_cos, q_sin, layout);
  if (k_compute == q_compute) return {q_out, ops::rope_rotate(k, q_cos, q_sin, layout)};
  const auto [k_cos, k_sin] = tables(k_compute);
  return {q_out, ops::rope_rotate(k, k_cos, k_sin, layout)};
}

}  // namespace posenc::nn::families
