// The catalog: the descriptors every family file registers, in the order
// `posenc encodings` lists them, and what is derived from the descriptors alone.
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "families.h"
#include "posenc/nn/encoding_family.h"

namespace posenc::nn {
namespace {

struct Registered {
  int rank;
  families::AddFamilies add;
};

// Filled by the descriptor files' static initialisers, before any caller can ask for the catalog.
std::vector<Registered>& registered() {
  static std::vector<Registered> files;
  return files;
}

std::vector<EncodingFamily> build_catalog() {
  std::vector<Registered> files = registered();
  std::sort(files.begin(), files.end(), [](const Registered& a, const Registered& b) { return a.rank < b.rank; });
  std::vector<EncodingFamily> out;
  for (size_t i = 0; i < files.size(); ++i) {
    TORCH_INTERNAL_ASSERT(i == 0 || files[i - 1].rank != files[i].rank, "two family files registered rank ",
                          files[i].rank);
    files[i].add(out);
  }
  for (size_t i = 0; i < out.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      TORCH_INTERNAL_ASSERT(out[j].name != out[i].name, "family '", out[i].name, "' registered twice");
    }
  }
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
  if (model_size != nullptr) return static_cast<double>(config.*model_size);
  const auto given = config.settings.find(name);
  return given == config.settings.end() ? default_value : given->second;
}

void EncodingParameter::set(EncodingConfig& config, double v) const {
  const double stored = integral ? static_cast<double>(std::llround(v)) : v;
  if (model_size != nullptr) {
    config.*model_size = static_cast<int64_t>(stored);
  } else {
    config.settings[name] = stored;
  }
}

std::string EncodingParameter::default_text() const { return number_text(value(EncodingConfig{})); }

namespace {

const EncodingParameter& declared(std::string_view name) {
  const EncodingParameter* p = find_encoding_parameter(name);
  TORCH_CHECK_VALUE(p != nullptr, "[encoding] no family has a setting '", name, "'");
  return *p;
}

}  // namespace

double EncodingConfig::real(std::string_view name) const { return declared(name).value(*this); }

int64_t EncodingConfig::integer(std::string_view name) const {
  const EncodingParameter& p = declared(name);
  TORCH_CHECK_VALUE(p.integral, "[encoding] ", name, " is a real setting, not an integer");
  return static_cast<int64_t>(p.value(*this));
}

EncodingConfig& EncodingConfig::set(std::string_view name, double value) {
  declared(name).set(*this, value);
  return *this;
}

std::string EncodingParameter::range_error(double v) const {
  const bool has_upper = upper < 1e300;
  const bool ok = std::isfinite(v) && (lower_open ? v > lower : v >= lower) &&
                  (!has_upper || (upper_open ? v < upper : v <= upper));
  if (ok) return "";
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

const EncodingParameter* find_encoding_parameter(std::string_view name) {
  for (const EncodingFamily& family : encoding_families()) {
    for (const EncodingParameter& p : family.parameters) {
      if (p.name == name) return &p;
    }
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

Registration::Registration(int rank, AddFamilies add) { registered().push_back({rank, add}); }

EncodingParameter real(std::string name, double default_value, std::string meaning, double lower, bool lower_open,
                       double upper, bool upper_open) {
  EncodingParameter p;
  p.name = std::move(name);
  p.default_value = default_value;
  p.meaning = std::move(meaning);
  p.lower = lower;
  p.lower_open = lower_open;
  p.upper = upper;
  p.upper_open = upper_open;
  return p;
}

EncodingParameter integer(std::string name, int64_t default_value, std::string meaning, int64_t lower) {
  EncodingParameter p;
  p.name = std::move(name);
  p.default_value = static_cast<double>(default_value);
  p.integral = true;
  p.meaning = std::move(meaning);
  p.lower = static_cast<double>(lower);
  return p;
}

EncodingParameter base_parameter(std::string meaning) { return real("base", 10000.0, std::move(meaning), 0.0, true); }

EncodingParameter init_std_parameter() {
  return real("init_std", 0.02, "N(0, init_std^2) initialisation", 0.0, false);
}

// 1: the paper's formula. The experiment suites use init_std * sqrt(2), the scale of their token
// embeddings (docs/experiments.md): unscaled, the table is 35x the N(0, 0.02^2) embeddings it is added to.
EncodingParameter input_scale_parameter() {
  return real("input_scale", 1.0, "amplitude of the sinusoids added to the embeddings", 0.0, true);
}

EncodingParameter max_distance_parameter() {
  return integer("max_distance", 16, "K: offsets clipped to [-K, K]", 0);
}

}  // namespace families
}  // namespace posenc::nn
