// Identical-word attention maps for the report: of a fresh, seeded one-layer
// attention with a relative-vector family (posenc::nn), and of a trained
// `posenc train` run (analysis::identical_word_attention). Both need the
// torch layer; without it torch_layer_available() is false and the two
// functions throw std::runtime_error.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "posenc/analysis/matrix.h"

namespace posenc::report::detail {

bool torch_layer_available() noexcept;

struct AttentionMap {
  analysis::Matrix attention;  // [T, T], rows sum to 1
  std::string description;     // what model, what probe
  nlohmann::ordered_json details = nlohmann::ordered_json::object();
};

// A registry family as the report needs it (posenc::nn's descriptors).
struct RegistryFamily {
  std::string name;
  std::string point;  // "input" | "query/key" | "logit bias" | "relative vectors" | "none"
  std::string description;
  std::string report_section;  // the section that shows it; "" none
};

// Every family of the registry, in its order; empty without the torch layer.
std::vector<RegistryFamily> registry_families();

// family: a registry name ("kerple", "learned+shaw"), "sinusoidal-relative"
// (shaw-sinusoidal) or "2d-relative". One
// MultiheadAttention layer (D = 64, 4 heads, the registry's defaults; causal
// when the family needs a decoder) built after torch::manual_seed(seed), an
// input family's vectors added to its input; `words` sequences of T = length
// identical tokens, each a N(0, 1) embedding; the weights averaged over words
// and heads.
// 2d-relative runs on a grid_side x grid_side grid (T = grid_side^2).
AttentionMap fresh_relative_attention(std::string_view family, int64_t length, int64_t grid_side, int64_t words,
                                      uint64_t seed);

// The first layer's identical-word attention of a trained run.
AttentionMap trained_attention(const std::filesystem::path& run_dir);

}  // namespace posenc::report::detail
