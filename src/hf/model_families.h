// The model families: which top-level keys of config.json give the positional
// scheme of each model_type (docs/hf_configs.md). Private to posenc::hf.
#pragma once

#include <string>

#include "config_fields.h"
#include "posenc/hf/hf_config.h"

namespace posenc::hf::detail {

// `text` holds the language model's keys (text_config when the config has
// one, else the whole config); `model_type` is the top-level one.
// Fills scheme, layer_types and by_layer_type of `out`.
void read_model_family(const Fields& text, const std::string& model_type, HfScheme& out);

// The model types read_model_family knows, for messages.
std::string known_model_types();

}  // namespace posenc::hf::detail
