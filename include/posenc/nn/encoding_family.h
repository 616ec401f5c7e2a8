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
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/nn/family_contract.h"
#include "posenc/nn/input_encoding.h"
#include "posenc/nn/multihead_attention.h"

namespace posenc::nn {

// The model's sizes, set by whoever builds the model, and the families' settings by name.
// A family declares its settings (EncodingFamily::parameters: name, default, range); none is a
// field here, so a new family adds no line to this struct.
struct EncodingConfig {
  int64_t dim = 64;             // model width D
  int64_t num_heads = 4;        // H; head_dim = D / H
  int64_t max_positions = 512;  // rows of a learned table
  bool causal = false;          // decoder: causal ALiBi mask, T5 causal buckets
  // "rope": a context-extension scaling (Hugging Face rope_scaling). Training
  // always uses none; evaluation may apply one to a trained model (posenc eval
  // --rope-scaling), which has no parameters to change.
  kernels::RopeScaling rope_scaling;
  // The settings given (`posenc encodings` lists the names and defaults); a name not here reads
  // its family's default. Write them with set(), which checks the name and rounds integers.
  std::map<std::string, double, std::less<>> settings;

  // The setting called name: its value here, else the declaring family's default. A name no
  // family declares throws "[encoding] no family has a setting 'bse'".
  double real(std::string_view name) const;
  // An integer setting; a real one throws "[encoding] base is a real setting, not an integer".
  int64_t integer(std::string_view name) const;
  // Sets a family's setting (an integer setting is rounded; a model size sets its field); no range
  // check (validate_encoding does it when a plan uses the family).
  EncodingConfig& set(std::string_view name, double value);
};

// Where a family acts; a plan has at most one family per point.
enum class EncodingPoint { kNone, kInput, kQueryKey, kLogitBias, kRelativeVectors };

// "none" | "input" | "query/key" | "logit bias" | "relative vectors".
const char* encoding_point_name(EncodingPoint point) noexcept;

// One setting a family reads from EncodingConfig, with its default and admissible range. Families
// that share a name (base, init_std, max_distance) share the setting: same default, same range.
struct EncodingParameter {
  std::string name;  // the key in `posenc encodings` and in config.json's encoding_parameters
  double default_value = 0.0;
  bool integral = false;  // an integer setting: config.json stores an integer
  // A model size the family reads (max_positions): the field that holds it, else null.
  int64_t EncodingConfig::*model_size = nullptr;
  double lower = -1e300, upper = 1e300;  // the range, checked when a plan uses the family
  bool lower_open = false, upper_open = false;
  std::string meaning;  // printed after the default: "(frequencies base^(-2i/dim))"
  // false for a model size the family reads (max_positions): set by the model, not a training option.
  bool training_option = true;

  double value(const EncodingConfig& config) const;
  // Sets it in config (rounded to an integer for an integer setting); no range check.
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

// The setting called name as its first family in catalog order declares it, or null.
const EncodingParameter* find_encoding_parameter(std::string_view name);

// The distinct training options of every family, in catalog order (each name
// once): the fields of config.json's encoding_parameters.
std::vector<const EncodingParameter*> encoding_training_options();

}  // namespace posenc::nn
