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

Registration::Registration(int rank, AddFamilies add) { registered().push_back({rank, add}); }

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

EncodingParameter input_scale_parameter() {
  return real("input_scale", &EncodingConfig::input_scale, "amplitude of the sinusoids added to the embeddings", 0.0,
              true);
}

EncodingParameter max_distance_parameter() {
  return integer("max_distance", &EncodingConfig::max_distance, "K: offsets clipped to [-K, K]", 0);
}

}  // namespace families
}  // namespace posenc::nn
