// Model families whose layers differ in their positional encoding: RoPE on
// some layers and none on others (Cohere 2, EXAONE 4, SmolLM3, Llama 4), or another
// base or scaling per layer type (OLMo 3, ModernBERT). Private to posenc::hf;
// the rules, from each HF config class and attention code, are in
// docs/hf_configs.md.
#pragma once

#include <string>

#include "config_fields.h"
#include "posenc/hf/hf_config.h"

namespace posenc::hf::detail {

void read_cohere2(const Fields& f, const std::string& model_type, HfScheme& out);
void read_exaone4(const Fields& f, const std::string& model_type, HfScheme& out);
void read_olmo3(const Fields& f, const std::string& model_type, HfScheme& out);
void read_smollm3(const Fields& f, const std::string& model_type, HfScheme& out);
void read_llama4(const Fields& f, const std::string& model_type, HfScheme& out);
void read_modernbert(const Fields& f, const std::string& model_type, HfScheme& out);

}  // namespace posenc::hf::detail
