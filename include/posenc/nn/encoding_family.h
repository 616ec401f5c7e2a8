// One descriptor per encoding family: its name, the point where it acts
// (DESIGN.md §2), its parameters with defaults, bounds and meaning, what it
// needs of the model, and how to build its module. The registry
// (encoding_registry.h), `posenc encodings`, the training config's
// encoding_parameters, the report's family sections and the Python catalog
// are all read from encoding_families(); none keeps a list of its own.
//
// Adding a family: write its module, end the module's .cpp with the
// descriptor and its registration (src/nn/families/families.h: a rank orders
// `posenc encodings`), and list kernel, op and module in cmake/families.cmake.
// No list of families is edited.
#pragma once

#include "posenc/kernels/rope_scaling.h"

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "posenc/nn/family_contract.h"
#include "posenc/nn/input_encoding.h"
#include "posenc/nn/multihead_attention.h"

namespace posenc::nn {

// The model's sizes and every family's settings (defaults in brackets). The
// descriptors name the fields they read; the model fields (dim, num_heads,
// max_positions, causal) are set by whoever builds the model.
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
  // sinusoidal, learnable-sinusoidal: the sinusoids' amplitude (1: the paper's formula). The
  // experiment suites use init_std * sqrt(2), the scale of their token embeddings (see
  // docs/experiments.md): unscaled, the table is 35x the N(0, 0.02^2) embeddings it is added to.
  double input_scale = 1.0;
  // p-rope: the share p of RoPE's frequency pairs that turn, the fastest (Barbero et al. 2024); in (0, 1].
  double rope_fraction = 0.25;
  // cope: contextual positions clamp at cope_npos - 1 (the authors' npos_max).
  int64_t cope_npos = 64;
  // deberta: Hugging Face's position_buckets (0: no log buckets) and max_relative_positions.
  int64_t deberta_position_buckets = 256;
  int64_t deberta_max_relative_positions = 512;
  // "rope": a context-extension scaling (Hugging Face rope_scaling). Training
  // always uses none; evaluation may apply one to a trained model (posenc eval
  // --rope-scaling), which has no parameters to change.
  kernels::RopeScaling rope_scaling;
};

// Where a family acts; a plan has at most one family per point.
enum class EncodingPoint { kNone, kInput, kQueryKey, kLogitBias, kRelativeVectors };

// "none" | "input" | "query/key" | "logit bias" | "relative vectors".
const char* encoding_point_name(EncodingPoint point) noexcept;

// One setting a family reads from EncodingConfig, with its admissible range.
struct EncodingParameter {
  std::string name;  // the key in `posenc encodings` and in config.json's encoding_parameters
  std::variant<double EncodingConfig::*, int64_t EncodingConfig::*> field;
  double lower = -1e300, upper = 1e300;  // the range, checked when a plan uses the family
  bool lower_open = false, upper_open = false;
  std::string meaning;  // printed after the default: "(frequencies base^(-2i/dim))"
  // false for a model size the family reads (max_positions): set by the model, not a training option.
  bool training_option = true;

  double value(const EncodingConfig& config) const;
  // Sets the field (rounded to an integer for an integer field); no range check.
  void set(EncodingConfig& config, double value) const;
  // The default as `posenc encodings` prints it: "10000", "0.02".
  std::string default_text() const;
  // Empty when value is in range, else "rope_fraction must be in (0, 1], got 2".
  std::string range_error(double value) const;
};

// What a family needs of the model; validate_encoding enforces it.
struct EncodingNeeds {
  bool even_head_dim = false;  // works on (sin, cos) channel pairs of a head
  bool even_dim = false;       // works on channel pairs of the model width
  bool causal = false;         // a decoder only (nope)
  std::string causal_hint;     // the refusal's advice when causal is missing
};

struct EncodingFamily {
  std::string name;         // e.g. "shaw"; a registry name, never containing '+'
  EncodingPoint point = EncodingPoint::kNone;
  std::string description;  // one line, with the paper
  std::vector<EncodingParameter> parameters;
  EncodingNeeds needs;
  // The report's section that shows it at initialisation: its own (empty), or
  // the one it coincides with there ("sinusoidal" for learnable-sinusoidal);
  // none when in_report is false. A family without a dedicated section gets the
  // identical-word attention of a fresh layer.
  std::string report_section;
  bool in_report = true;
  // The input point's module (added to the token embeddings); set for kInput only.
  std::function<InputEncoding(const EncodingConfig&)> make_input;
  // Fills the slot of its point in one attention layer's encodings; set for
  // kQueryKey, kLogitBias and kRelativeVectors.
  std::function<void(const EncodingConfig&, AttentionEncodings&)> make_attention;
  // A family on the contract (family_contract.h) names its module and its settings for a model
  // (make_attention builds its typed front end with the same settings): the Python package's
  // generated class reads them (torch.ops.posenc.family_preset).
  std::string module;
  std::function<FamilySettings(const EncodingConfig&)> preset;
};

// Every family, in the order `posenc encodings` lists them (none, input,
// query/key, logit bias, relative vectors).
const std::vector<EncodingFamily>& encoding_families();

// The family called name, or null.
const EncodingFamily* find_encoding_family(std::string_view name);

// The distinct training options of every family, in catalog order (each name
// once): the fields of config.json's encoding_parameters.
std::vector<const EncodingParameter*> encoding_training_options();

}  // namespace posenc::nn
