// Encodings by name, for models, `posenc train` and `posenc encodings`.
//
//   none, nope (causal decoders only)                    no encoding
//   sinusoidal, learned, learnable-sinusoidal             input point
//   rope, rope-xpos                                       query/key point
//   alibi, t5, kerple, kerple-power                       logit bias
//   shaw, shaw-sinusoidal, shaw-learnable-sinusoidal, xl  relative vectors
//   A+B (e.g. learned+shaw, sinusoidal+rope)              one name per point at most
// Every name has documented defaults (EncodingInfo::parameters) taken from
// EncodingConfig; docs/attention.md lists them.
#pragma once

#include "posenc/kernels/rope_scaling.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "posenc/nn/input_encoding.h"
#include "posenc/nn/multihead_attention.h"

namespace posenc::nn {

// The model's sizes and the encodings' settings (defaults in brackets).
struct EncodingConfig {
  int64_t dim = 64;                // model width D
  int64_t num_heads = 4;           // H; head_dim = D / H
  int64_t max_positions = 512;     // rows of a learned table
  bool causal = false;             // decoder: causal ALiBi mask, T5 causal buckets
  double base = 10000.0;           // sinusoids and RoPE
  double xpos_scale_base = 512.0;  // rope-xpos
  int64_t max_distance = 16;       // Shaw / sinusoidal relative clipping K
  int64_t t5_num_buckets = 32;
  int64_t t5_max_distance = 128;
  double init_std = 0.02;
  // p-rope: the share p of RoPE's frequency pairs that turn, the fastest (Barbero et al. 2024); in (0, 1].
  double rope_fraction = 0.25;
  // "rope": a context-extension scaling (Hugging Face rope_scaling). Training
  // always uses none; evaluation may apply one to a trained model (posenc eval
  // --rope-scaling), which has no parameters to change.
  kernels::RopeScaling rope_scaling;
};

struct EncodingInfo {
  std::string name;         // e.g. "shaw"
  std::string point;        // "none" | "input" | "query/key" | "logit bias" | "relative vectors"
  std::string description;  // one line, with the paper
  std::vector<std::pair<std::string, std::string>> parameters;  // (name, default and meaning)
};

// The single names, in the order above.
const std::vector<EncodingInfo>& encoding_catalog();

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

// Checks config against the plan: "[encoding] rope needs an even head_dim, got 5",
// "[encoding] nope needs a causal model (a decoder): an encoder sees a bag of
// tokens; use 'none' for that baseline" (config.causal false) and
// "[encoding] dim must be divisible by num_heads, got dim 10 and num_heads 4".
void validate_encoding(const EncodingPlan& plan, const EncodingConfig& config);

// The input-point module of the plan (added to the token embeddings), or null.
InputEncoding make_input_encoding(const EncodingPlan& plan, const EncodingConfig& config);
// Fresh inner-point modules for one attention layer (each layer owns its own).
AttentionEncodings make_attention_encodings(const EncodingPlan& plan, const EncodingConfig& config);

}  // namespace posenc::nn
