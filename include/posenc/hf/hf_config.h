// A Hugging Face model's positional scheme, read from its config.json as
// pasted: transformers v4 (`rope_scaling` with `type` / `rope_type`,
// top-level `rope_theta`, `partial_rotary_factor`, `head_dim`, `rotary_pct`,
// `rotary_emb_base`, `rotary_dim`) and v5 (`rope_parameters`, one dict or one
// per layer type). Torch-free: the CLI and any C++ caller can read a config.
//
// Every value is validated once, here, with HF's current semantics (what
// transformers' modeling_rope_utils.py and each model's config / attention
// code compute). Messages name the file, the key path, the expectation and
// the value:
//   "[hf] config.json: rope_scaling.factor must be > 0, got -2"
//   "[hf] config.json: rope_scaling.foo is not a key posenc knows for rope_type 'yarn'"
// Keys HF ignores for position (vocab_size, ...) are ignored; a positional
// key posenc does not understand is refused, named. What is read from which
// key, per model family, is in docs/hf_configs.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/kernels/rope.h"          // RopeLayout
#include "posenc/kernels/rope_scaling.h"  // RopeScaling

namespace posenc::hf {

// Rotary embedding of queries and keys (kernels/rope.h). HF computes the
// frequencies over the rotated channels R: omega_i from (R, base, scaling).
struct HfRotary {
  int64_t head_dim = 0;    // D: channels of a query/key head the rotary acts on (DeepSeek: qk_rope_head_dim)
  int64_t rotary_dim = 0;  // R: even, 2 <= R <= D; channels R .. D-1 are not rotated
  double base = 10000.0;   // rope_theta (rotary_emb_base, rope_local_base_freq for Gemma 3 sliding layers)
  kernels::RopeLayout layout = kernels::RopeLayout::kHalf;  // GPT-J, DeepSeek: interleaved
  kernels::RopeScaling scaling;                             // validated for (R, base)
  std::vector<int64_t> mrope_section;  // empty, or (t, h, w) sizes summing to R/2 (Qwen2-VL M-RoPE)
  bool mrope_interleaved = false;      // Qwen3-VL's assignment of frequencies to t, h, w
  int64_t max_position_embeddings = 0;  // the config's (0: absent); informational
};

// A bias added to the attention logits.
struct HfBias {
  enum class Kind { kAlibi, kT5 };
  Kind kind = Kind::kAlibi;
  int64_t num_heads = 0;
  // ALiBi: empty means the geometric slopes of Press et al. (BLOOM, Falcon:
  // posenc's alibi_slopes); MPT's alibi_bias_max gives its own, listed here.
  std::vector<double> alibi_slopes;
  double alibi_bias_max = 8.0;
  // T5 buckets (kernels/t5.h).
  int64_t num_buckets = 32;
  int64_t max_distance = 128;
  bool bidirectional = true;  // encoder: true; decoder: false
};

// A vector per position added to the token embeddings.
struct HfAbsolute {
  enum class Kind { kLearned, kSinusoidal };
  Kind kind = Kind::kLearned;
  int64_t max_positions = 0;  // rows of the table (max_position_embeddings, n_positions)
  int64_t dim = 0;            // hidden size
};

// BERT's relative position vectors (Shaw et al.): a table of 2*max - 1 rows of
// head_dim, offsets -(max-1) .. max-1, shared by the heads.
struct HfRelative {
  enum class Kind { kKey, kKeyQuery };  // relative_key, relative_key_query
  Kind kind = Kind::kKey;
  int64_t max_position_embeddings = 0;
  int64_t head_dim = 0;
  int64_t num_heads = 0;
};

// Llama 4's NoPE layers (attn_temperature_tuning): the queries at absolute position p (from 0) are
// multiplied by log(floor((p + 1) / floor_scale) + 1) * attn_scale + 1 (Nakanishi 2025's scalable softmax,
// by position): 1 up to floor_scale - 1, then growing with the log of the position.
struct HfQueryTemperature {
  double floor_scale = 8192.0;
  double attn_scale = 0.1;
};

// What one layer uses; any subset may be set (BERT: absolute; Falcon: rotary or bias), or none (a NoPE layer).
struct HfLayerScheme {
  std::optional<HfRotary> rotary;
  std::optional<HfBias> bias;
  std::optional<HfAbsolute> absolute;
  std::optional<HfRelative> relative;
  std::optional<HfQueryTemperature> query_temperature;
};

struct HfScheme {
  std::string model_type;  // as in the config ("" when absent)
  std::string source;      // the file name used in messages
  HfLayerScheme scheme;    // the model's (the first layer's when layers differ)
  // Per-layer-type models (Gemma 2/3/4, v5 rope_parameters keyed by layer
  // type): layer i uses by_layer_type.at(layer_types[i]). Empty otherwise.
  // T5 also lists "encoder" and "decoder" here (layer_types empty).
  std::vector<std::string> layer_types;
  std::map<std::string, HfLayerScheme, std::less<>> by_layer_type;

  // Layer i's scheme: by its layer type when layer_types is set, else `scheme`.
  // Throws "[hf] config.json: layer 40 is out of range: the config has 34 layers (layer_types)".
  const HfLayerScheme& for_layer(int64_t i) const;
  // Throws "[hf] config.json: no layer type 'x'; the config has full_attention, sliding_attention".
  const HfLayerScheme& for_layer_type(std::string_view type) const;
};

// Reads and validates config.json text. `source` names the file in messages.
// Throws std::invalid_argument for malformed JSON, a bad value or an unknown
// positional key, std::runtime_error for a scheme HF defines that posenc
// cannot compute (named, with the reason).
HfScheme read_hf_config(std::string_view json_text, std::string_view source = "config.json");

// The same from a file; `path` is the name in messages.
HfScheme read_hf_config_file(const std::string& path);

// The scheme as one JSON object (for the Python front end; docs/hf_configs.md):
// {"model_type", "source", "scheme": {"rotary": {...} | null, "bias", "absolute",
//  "relative"}, "layer_types": [...], "by_layer_type": {type: scheme}}.
// A rotary's "scaling" is a rope_scaling dict as posenc.apply_rope takes it, or null.
std::string to_json(const HfScheme& scheme);

// For the functional API (posenc.apply_rope's scaling dict, C++ RopeScaling
// parsing): when `key` is an HF config key that belongs elsewhere than in a
// rope_scaling dict, the message saying where, e.g.
//   "[rope] mrope_section goes to the multimodal rotary; use posenc.hf.positional_scheme
//    or apply_mrope(..., mrope_section=...)"
// else nullopt (the caller reports an unknown key as before).
std::optional<std::string> misplaced_scaling_key(std::string_view key, std::string_view op = "rope");

}  // namespace posenc::hf
