// Encodings by name (encoding_registry.h): a parser for "A+B" plans and the
// factories that turn a plan and a config into modules, all read from the
// families' descriptors (encoding_family.h).
#include "posenc/nn/encoding_registry.h"

#include <c10/util/Exception.h>

#include <exception>
#include <string>
#include <string_view>
#include <vector>

namespace posenc::nn {
namespace {

constexpr const char* kOp = "encoding";

std::string known_names() {
  std::string out;
  for (const EncodingFamily& family : encoding_families()) out += (out.empty() ? "" : ", ") + family.name;
  return out;
}

const EncodingFamily& family_of(std::string_view part, std::string_view name) {
  TORCH_CHECK_VALUE(!part.empty(), "[", kOp, "] empty part in '", name, "'");
  const EncodingFamily* family = find_encoding_family(part);
  TORCH_CHECK_VALUE(family != nullptr, "[", kOp, "] unknown encoding '", part, "'; known: ", known_names(),
                    " (combine with '+')");
  return *family;
}

}  // namespace

EncodingPlan parse_encoding(std::string_view name) {
  EncodingPlan plan{std::string(name), {}};
  std::vector<const EncodingFamily*> families;
  size_t start = 0;
  while (true) {
    const size_t end = name.find('+', start);
    const std::string_view part = name.substr(start, end == std::string_view::npos ? name.npos : end - start);
    families.push_back(&family_of(part, name));
    plan.parts.emplace_back(part);
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  if (families.size() > 1) {
    for (const EncodingFamily* f : families) {
      TORCH_CHECK_VALUE(f->point != EncodingPoint::kNone, "[", kOp, "] '", f->name, "' cannot be combined, got '",
                        name, "'");
    }
  }
  for (size_t a = 0; a < families.size(); ++a) {
    for (size_t b = a + 1; b < families.size(); ++b) {
      TORCH_CHECK_VALUE(families[a]->point != families[b]->point, "[", kOp, "] '", name, "' has two ",
                        encoding_point_name(families[a]->point), " encodings (", families[a]->name, ", ",
                        families[b]->name, "); use at most one per point");
    }
  }
  return plan;
}

void validate_encoding(const EncodingPlan& plan, const EncodingConfig& config) {
  for (const std::string& part : plan.parts) family_of(part, plan.name);
  TORCH_CHECK_VALUE(config.dim >= 1, "[", kOp, "] dim must be >= 1, got ", config.dim);
  TORCH_CHECK_VALUE(config.num_heads >= 1, "[", kOp, "] num_heads must be >= 1, got ", config.num_heads);
  TORCH_CHECK_VALUE(config.dim % config.num_heads == 0, "[", kOp, "] dim must be divisible by num_heads, got dim ",
                    config.dim, " and num_heads ", config.num_heads);
  const int64_t head_dim = config.dim / config.num_heads;
  for (const std::string& part : plan.parts) {
    const EncodingFamily& f = *find_encoding_family(part);
    TORCH_CHECK_VALUE(!f.needs.causal || config.causal, "[", kOp, "] ", part,
                      " needs a causal model (a decoder): ", f.needs.causal_hint);
    // Sinusoids and rotations work on (sin, cos) pairs of channels.
    TORCH_CHECK_VALUE(!f.needs.even_head_dim || head_dim % 2 == 0, "[", kOp, "] ", part,
                      " needs an even head_dim, got ", head_dim);
    TORCH_CHECK_VALUE(!f.needs.even_dim || config.dim % 2 == 0, "[", kOp, "] ", part, " needs an even dim, got ",
                      config.dim);
    for (const EncodingParameter& p : f.parameters) {
      const std::string error = p.range_error(p.value(config));
      TORCH_CHECK_VALUE(error.empty(), "[", kOp, "] ", error);
    }
  }
  // What depends on several settings at once is checked by the modules, in their own words.
}

// The number of a "key=value" setting; context opens the message ("layer encoding 'rope:base=x': ").
double setting_value(std::string_view key, const std::string& text, const std::string& context) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  TORCH_CHECK_VALUE(!text.empty() && used == text.size(), "[", kOp, "] ", context, key, " must be a number, got '",
                    text, "'");
  return value;
}

LayerEncoding parse_layer_encoding(std::string_view spec) {
  const size_t colon = spec.find(':');
  LayerEncoding layer;
  layer.plan = parse_encoding(spec.substr(0, colon));
  for (const std::string& part : layer.plan.parts) {
    TORCH_CHECK_VALUE(find_encoding_family(part)->point != EncodingPoint::kInput, "[", kOp, "] layer encoding '",
                      spec, "': ", part,
                      " is an input encoding (added once, before the first layer); give it in the model's encoding");
  }
  size_t start = colon;
  while (start != std::string_view::npos) {
    const size_t end = spec.find(':', start + 1);
    const std::string_view item = spec.substr(start + 1, end == std::string_view::npos ? spec.npos : end - start - 1);
    start = end;
    const size_t eq = item.find('=');
    TORCH_CHECK_VALUE(eq != std::string_view::npos && eq > 0, "[", kOp, "] layer encoding '", spec,
                      "': expected key=value, got '", item, "'");
    const std::string_view key = item.substr(0, eq), text = item.substr(eq + 1);
    const EncodingParameter* parameter = nullptr;
    std::string names;
    for (const std::string& part : layer.plan.parts) {
      for (const EncodingParameter& p : find_encoding_family(part)->parameters) {
        if (!p.training_option) continue;
        if (p.name == key) parameter = &p;
        if (names.find(p.name) == std::string::npos) names += (names.empty() ? "" : ", ") + p.name;
      }
    }
    TORCH_CHECK_VALUE(parameter != nullptr, "[", kOp, "] layer encoding '", spec, "': ", layer.plan.name,
                      " has no setting '", key, "' (its settings: ", names.empty() ? "none" : names, ")");
    const double value = setting_value(key, std::string(text), "layer encoding '" + std::string(spec) + "': ");
    layer.settings.emplace_back(parameter, value);
  }
  return layer;
}

void apply_encoding_settings(EncodingConfig& config, const std::vector<std::string>& settings) {
  for (const std::string& item : settings) {
    const size_t eq = item.find('=');
    TORCH_CHECK_VALUE(eq != std::string::npos && eq > 0, "[", kOp, "] expected key=value, got '", item, "'");
    const std::string key = item.substr(0, eq), text = item.substr(eq + 1);
    const EncodingParameter* parameter = nullptr;
    std::string names;
    for (const EncodingParameter* p : encoding_training_options()) {
      if (p->name == key) parameter = p;
      names += (names.empty() ? "" : ", ") + p->name;
    }
    TORCH_CHECK_VALUE(parameter != nullptr, "[", kOp, "] unknown setting '", key, "'; known: ", names);
    parameter->set(config, setting_value(key, text, ""));
  }
}

std::vector<std::string> validate_layer_encodings(const EncodingPlan& model, const EncodingConfig& config,
                                                  const std::vector<std::string>& specs) {
  std::vector<std::string> parts = model.parts;
  for (const std::string& spec : specs) {
    const LayerEncoding layer = parse_layer_encoding(spec);
    validate_encoding(layer_plan(model, layer), layer_config(config, layer));
    parts.insert(parts.end(), layer.plan.parts.begin(), layer.plan.parts.end());
  }
  return parts;
}

bool reads_absolute_positions(const std::vector<std::string>& parts) {
  for (const std::string& part : parts) {
    const EncodingPoint point = find_encoding_family(part)->point;
    if (point == EncodingPoint::kInput || point == EncodingPoint::kQueryKey) return true;
  }
  return false;
}

EncodingPlan layer_plan(const EncodingPlan& model, const LayerEncoding& layer) {
  EncodingPlan out;
  for (const std::string& part : model.parts) {
    if (find_encoding_family(part)->point == EncodingPoint::kInput) out.parts.push_back(part);
  }
  for (const std::string& part : layer.plan.parts) {
    if (find_encoding_family(part)->point != EncodingPoint::kNone) out.parts.push_back(part);
  }
  if (out.parts.empty()) out.parts.push_back(layer.plan.parts.front());  // "none" or "nope"
  for (const std::string& part : out.parts) out.name += (out.name.empty() ? "" : "+") + part;
  return out;
}

EncodingConfig layer_config(EncodingConfig config, const LayerEncoding& layer) {
  for (const auto& [parameter, value] : layer.settings) parameter->set(config, value);
  return config;
}

InputEncoding make_input_encoding(const EncodingPlan& plan, const EncodingConfig& config) {
  validate_encoding(plan, config);
  for (const std::string& part : plan.parts) {
    const EncodingFamily& f = *find_encoding_family(part);
    if (f.point == EncodingPoint::kInput) return f.make_input(config);
  }
  return nullptr;
}

AttentionEncodings make_attention_encodings(const EncodingPlan& plan, const EncodingConfig& config) {
  validate_encoding(plan, config);
  AttentionEncodings out;
  for (const std::string& part : plan.parts) {
    const EncodingFamily& f = *find_encoding_family(part);
    if (f.make_attention) f.make_attention(config, out);
  }
  return out;
}

}  // namespace posenc::nn
