// The catalog: every family's descriptor in the order `posenc encodings`
// lists them, and what is derived from the descriptors alone.
#include <cmath>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "families.h"
#include "posenc/nn/encoding_family.h"

namespace posenc::nn {
namespace families {

// One per file of this folder, in the order `posenc encodings` lists them.
void add_no_encoding(std::vector<EncodingFamily>& out);  // none.cpp: none, nope
void add_input(std::vector<EncodingFamily>& out);        // input.cpp: sinusoidal, learned, learnable-sinusoidal
void add_rotary(std::vector<EncodingFamily>& out);       // rotary.cpp: rope, p-rope, rope-xpos
void add_bias(std::vector<EncodingFamily>& out);         // bias.cpp: alibi, t5
void add_kerple(std::vector<EncodingFamily>& out);       // kerple.cpp: kerple, kerple-power
void add_fire(std::vector<EncodingFamily>& out);         // fire.cpp
void add_cope(std::vector<EncodingFamily>& out);         // cope.cpp
void add_dpb(std::vector<EncodingFamily>& out);          // dpb.cpp
void add_relative(std::vector<EncodingFamily>& out);     // relative.cpp: shaw, shaw-*sinusoidal, xl
void add_deberta(std::vector<EncodingFamily>& out);      // deberta.cpp

}  // namespace families

namespace {

std::vector<EncodingFamily> build_catalog() {
  std::vector<EncodingFamily> out;
  families::add_no_encoding(out);
  families::add_input(out);
  families::add_rotary(out);
  families::add_bias(out);
  families::add_kerple(out);
  families::add_fire(out);
  families::add_cope(out);
  families::add_dpb(out);
  families::add_relative(out);
  families::add_deberta(out);
  return out;
}

// 10000, 0.02, 0.25: as a user writes them.
std::string number_text(double value) {
  std::ostringstream s;
  s << value;
  return s.str();
}

}  // namespace

const char* encoding_point_name(EncodingPoint point) noexcept {
  switch (point) {
    case EncodingPoint::kNone: return "none";
    case EncodingPoint::kInput: return "input";
    case EncodingPoint::kQueryKey: return "query/key";
    case EncodingPoint::kLogitBias: return "logit bias";
    case EncodingPoint::kRelativeVectors: return "relative vectors";
  }
  return "?";
}

double EncodingParameter::value(const EncodingConfig& config) const {
  if (const auto* real = std::get_if<double EncodingConfig::*>(&field)) return config.**real;
  return static_cast<double>(config.*std::get<int64_t EncodingConfig::*>(field));
}

void EncodingParameter::set(EncodingConfig& config, double v) const {
  if (const auto* real = std::get_if<double EncodingConfig::*>(&field)) {
    config.**real = v;
  } else {
    config.*std::get<int64_t EncodingConfig::*>(field) = static_cast<int64_t>(std::llround(v));
  }
}

std::string EncodingParameter::default_text() const { return number_text(value(EncodingConfig{})); }

std::string EncodingParameter::range_error(double v) const {
  const bool has_upper = upper < 1e300;
  const bool ok = std::isfinite(v) && (lower_open ? v > lower : v >= lower) &&
                  (!has_upper || (upper_open ? v < upper : v <= upper));
  if (ok) return "";
  const bool integral = std::holds_alternative<int64_t EncodingConfig::*>(field);
  std::string range;
  if (has_upper) {
    range = "in " + std::string(lower_open ? "(" : "[") + number_text(lower) + ", " + number_text(upper) +
            (upper_open ? ")" : "]");
  } else {
    range = std::string(integral ? "" : "finite and ") + (lower_open ? "> " : ">= ") + number_text(lower);
  }
  return name + " must be " + range + ", got " + number_text(v);
}

const std::vector<EncodingFamily>& encoding_families() {
  static const std::vector<EncodingFamily> catalog = build_catalog();
  return catalog;
}

const EncodingFamily* find_encoding_family(std::string_view name) {
  for (const EncodingFamily& family : encoding_families()) {
    if (family.name == name) return &family;
  }
  return nullptr;
}

std::vector<const EncodingParameter*> encoding_training_options() {
  std::vector<const EncodingParameter*> out;
  for (const EncodingFamily& family : encoding_families()) {
    for (const EncodingParameter& p : family.parameters) {
      if (!p.training_option) continue;
      bool seen = false;
      for (const EncodingParameter* q : out) seen = seen || q->name == p.name;
      if (!seen) out.push_back(&p);
    }
  }
  return out;
}

namespace families {

EncodingParameter real(std::string name, double EncodingConfig::*field, std::string meaning, double lower,
                       bool lower_open, double upper, bool upper_open) {
  EncodingParameter p;
  p.name = std::move(name);
  p.field = field;
  p.meaning = std::move(meaning);
  p.lower = lower;
  p.lower_open = lower_open;
  p.upper = upper;
  p.upper_open = upper_open;
  return p;
}

EncodingParameter integer(std::string name, int64_t EncodingConfig::*field, std::string meaning, int64_t lower) {
  EncodingParameter p;
  p.name = std::move(name);
  p.field = field;
  p.meaning = std::move(meaning);
  p.lower = static_cast<double>(lower);
  return p;
}

EncodingParameter base_parameter(std::string meaning) {
  return real("base", &EncodingConfig::base, std::move(meaning), 0.0, true);
}

EncodingParameter init_std_parameter() {
  return real("init_std", &EncodingConfig::init_std, "N(0, init_std^2) initialisation", 0.0, false);
}

EncodingParameter max_distance_parameter() {
  return integer("max_distance", &EncodingConfig::max_distance, "K: offsets clipped to [-K, K]", 0);
}

}  // namespace families
}  // namespace posenc::nn
