#include "posenc/hf/hf_config.h"

#include <fstream>
#include <sstream>

#include "config_fields.h"
#include "model_families.h"

namespace posenc::hf {

using detail::fail_config;
using detail::Fields;
using detail::Json;

HfScheme read_hf_config(std::string_view json_text, std::string_view source) {
  Json root;
  try {
    root = Json::parse(json_text.begin(), json_text.end());
  } catch (const Json::parse_error& e) {
    // nlohmann's what() reads "[json.exception.parse_error.101] parse error at line 1, column 2: ...".
    std::string what = e.what();
    const size_t at = what.find("] ");
    fail_config(source, "not valid JSON: ", at == std::string::npos ? what : what.substr(at + 2));
  }
  if (!root.is_object()) fail_config(source, "must hold one JSON object, got ", detail::show(root));

  HfScheme out;
  out.source = std::string(source);
  const Fields top(root, out.source, "");
  out.model_type = top.string("model_type").value_or("");
  if (out.model_type.empty()) {
    fail_config(source, "model_type is required (it says which keys hold the positional scheme)");
  }
  // Multimodal configs (Qwen2.5/3-VL, Gemma 3/4) keep the language model's keys in text_config.
  const std::optional<Fields> text_config = top.object("text_config");
  detail::read_model_family(text_config ? *text_config : top, out.model_type, out);
  return out;
}

HfScheme read_hf_config_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_config(path, "cannot open the file");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) fail_config(path, "cannot read the file");
  return read_hf_config(text.str(), path);
}

const HfLayerScheme& HfScheme::for_layer(int64_t i) const {
  if (layer_types.empty()) {
    if (i < 0) fail_argument("hf", source, ": layer must be >= 0, got ", i);
    return scheme;
  }
  const auto n = static_cast<int64_t>(layer_types.size());
  if (i < 0 || i >= n) {
    fail_argument("hf", source, ": layer ", i, " is out of range: the config has ", n, " layers (layer_types)");
  }
  return by_layer_type.at(layer_types[static_cast<size_t>(i)]);
}

const HfLayerScheme& HfScheme::for_layer_type(std::string_view type) const {
  const auto it = by_layer_type.find(type);
  if (it == by_layer_type.end()) {
    std::string names;
    for (const auto& [name, s] : by_layer_type) names += (names.empty() ? "" : ", ") + name;
    if (names.empty()) fail_argument("hf", source, ": no layer type '", type, "'; the config has one scheme for every layer");
    fail_argument("hf", source, ": no layer type '", type, "'; the config has ", names);
  }
  return it->second;
}

std::optional<std::string> misplaced_scaling_key(std::string_view key, std::string_view op) {
  const auto say = [&](std::string_view where, std::string_view call) {
    return posenc::detail::join_message(op, key, " goes to ", where, "; use posenc.hf.positional_scheme or ", call);
  };
  if (key == "mrope_section" || key == "mrope_interleaved") {
    return say("the multimodal rotary", std::string("apply_mrope(..., ") + std::string(key) + "=...)");
  }
  if (key == "rope_theta") return say("the rotary base", "apply_rope(..., base=...)");
  if (key == "partial_rotary_factor") {
    return say("the rotary dimension (int(head_dim * partial_rotary_factor))", "apply_rope(..., rotary_dim=...)");
  }
  if (key == "head_dim") return say("the shape of x (its last dimension)", "apply_rope(x, ...)");
  return std::nullopt;
}

}  // namespace posenc::hf
