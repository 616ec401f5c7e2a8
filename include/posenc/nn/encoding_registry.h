// Encodings by name, for models, `posenc train` and `posenc encodings`: a
// name is a family of encoding_families() (encoding_family.h), or "A+B" with
// at most one family per point (e.g. learned+shaw, sinusoidal+rope).
// `posenc encodings` lists the families with their defaults.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "posenc/nn/encoding_family.h"

namespace posenc::nn {

// A parsed name: the parts in the order given, validated.
struct EncodingPlan {
  std::string name;                // as given, e.g. "learned+shaw"
  std::vector<std::string> parts;  // {"learned", "shaw"}
};

// Throws c10::ValueError:
//   "[encoding] unknown encoding 'foo'; known: none, sinusoidal, ..., xl (combine with '+')"
//   "[encoding] 'alibi+t5' has two logit bias encodings (alibi, t5); use at most one per point"
//   "[encoding] 'none' cannot be combined, got 'none+rope'" (likewise 'nope')
//   "[encoding] empty part in 'rope+'"
EncodingPlan parse_encoding(std::string_view name);

// Checks config against the plan's needs and parameter ranges:
// "[encoding] rope needs an even head_dim, got 5",
// "[encoding] rope_fraction must be in (0, 1], got 2",
// "[encoding] nope needs a causal model (a decoder): an encoder sees a bag of
// tokens; use 'none' for that baseline" (config.causal false) and
// "[encoding] dim must be divisible by num_heads, got dim 10 and num_heads 4".
void validate_encoding(const EncodingPlan& plan, const EncodingConfig& config);

// One layer's encoding in a per-layer pattern (Gemma 3 style: another RoPE
// base on the global layers than on the local ones): a plan of inner points
// and settings of its families, written "PLAN[:key=value[:key=value]]", e.g.
// "rope:base=1000000" or "rope+alibi". Throws c10::ValueError:
//   "[encoding] layer encoding 'rope:foo=1': rope has no setting 'foo' (its settings: base)"
//   "[encoding] layer encoding 'rope:base': expected key=value, got 'base'"
//   "[encoding] layer encoding 'rope:base=x': base must be a number, got 'x'"
//   "[encoding] layer encoding 'learned': learned is an input encoding (added once, before the first
//    layer); give it in the model's encoding"
struct LayerEncoding {
  EncodingPlan plan;
  std::vector<std::pair<const EncodingParameter*, double>> settings;  // in the order given
};
LayerEncoding parse_layer_encoding(std::string_view spec);

// The model's plan with its inner points replaced by the layer's (its input
// point stays), and config with the layer's settings applied.
EncodingPlan layer_plan(const EncodingPlan& model, const LayerEncoding& layer);
EncodingConfig layer_config(EncodingConfig config, const LayerEncoding& layer);

// Validates each layer's plan (layer_plan) with its settings (layer_config) and returns the parts of
// the model's plan and of every layer's, the families a model with these layers uses.
std::vector<std::string> validate_layer_encodings(const EncodingPlan& model, const EncodingConfig& config,
                                                  const std::vector<std::string>& specs);

// Whether one of parts reads absolute positions (an input or query/key family): what randomized
// positions can act on.
bool reads_absolute_positions(const std::vector<std::string>& parts);

// Sets "key=value" settings (the families' training options, e.g. "input_scale=0.03") in config; the
// ranges are checked by validate_encoding for the families a plan uses. Throws c10::ValueError
// "[encoding] unknown setting 'foo'; known: base, ..." and the key=value / number messages above.
void apply_encoding_settings(EncodingConfig& config, const std::vector<std::string>& settings);

// The input-point module of the plan (added to the token embeddings), or null.
InputEncoding make_input_encoding(const EncodingPlan& plan, const EncodingConfig& config);
// Fresh inner-point modules for one attention layer (each layer owns its own).
AttentionEncodings make_attention_encodings(const EncodingPlan& plan, const EncodingConfig& config);

}  // namespace posenc::nn
