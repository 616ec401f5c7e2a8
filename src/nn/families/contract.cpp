// The family contracts (posenc/nn/family_contract.h): the registry of
// modules, the settings' typing and defaults, their JSON form (what the
// Python holder hands the family ops), and the state every holder creates.
#include "posenc/nn/family_contract.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace posenc::nn {
namespace {

std::map<std::string, FamilyContract, std::less<>>& contracts() {
  static std::map<std::string, FamilyContract, std::less<>> all;
  return all;
}

std::optional<double> non_finite(const SettingValue& value);

const char* type_name(SettingType type) noexcept {
  switch (type) {
    case SettingType::kFlag: return "a bool";
    case SettingType::kInteger: return "an int";
    case SettingType::kReal: return "a number";
    case SettingType::kWord: return "a string";
    case SettingType::kTensor: return "a tensor";
    case SettingType::kIntegers: return "a list of ints";
    case SettingType::kMapping: return "a dict or a list of dicts";
    case SettingType::kWords: return "a list of strings";
  }
  return "a value";
}

// ['p2c', 'c2p']
std::string words_text(const std::vector<std::string>& words) {
  std::string out = "[";
  for (size_t i = 0; i < words.size(); ++i) out += (i ? ", '" : "'") + words[i] + "'";
  return out + "]";
}

// 'c2p' and 'p2c' (and: every one may be listed), 'log' or 'power' (or: one of them)
std::string listed(const std::vector<std::string>& words, const char* last) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) {
    out += (i == 0 ? "'" : i + 1 == words.size() ? std::string(" ") + last + " '" : std::string(", '")) + words[i] + "'";
  }
  return out;
}

std::string value_text(const SettingValue& value) {
  std::ostringstream out;
  std::visit(
      [&](const auto& v) {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, std::monostate>) out << "None";
        else if constexpr (std::is_same_v<V, bool>) out << (v ? "true" : "false");
        else if constexpr (std::is_same_v<V, std::string>) out << "'" << v << "'";
        else if constexpr (std::is_same_v<V, std::vector<int64_t>>) out << at::IntArrayRef(v);
        else if constexpr (std::is_same_v<V, SettingJson>) out << v.text;
        else if constexpr (std::is_same_v<V, std::vector<std::string>>) out << words_text(v);
        else out << v;
      },
      value);
  return out.str();
}

// value as the setting's type (an integer is a real too), or the refusal.
SettingValue typed(const FamilyContract& contract, const SettingSpec& spec, const SettingValue& value) {
  if (std::holds_alternative<std::monostate>(value)) {
    TORCH_CHECK_VALUE(!spec.positional, "[", contract.module, "] ", spec.name, " is required");
    return value;
  }
  const bool ok = (spec.type == SettingType::kFlag && std::holds_alternative<bool>(value)) ||
                  (spec.type == SettingType::kInteger && std::holds_alternative<int64_t>(value)) ||
                  (spec.type == SettingType::kReal && (std::holds_alternative<double>(value) ||
                                                       std::holds_alternative<int64_t>(value) ||
                                                       non_finite(value).has_value())) ||
                  (spec.type == SettingType::kWord && std::holds_alternative<std::string>(value)) ||
                  (spec.type == SettingType::kTensor && std::holds_alternative<bool>(value)) ||
                  (spec.type == SettingType::kIntegers && std::holds_alternative<std::vector<int64_t>>(value)) ||
                  (spec.type == SettingType::kMapping && (std::holds_alternative<SettingJson>(value) ||
                                                          std::holds_alternative<std::vector<int64_t>>(value))) ||
                  (spec.type == SettingType::kWords && (std::holds_alternative<std::vector<std::string>>(value) ||
                                                        std::holds_alternative<std::vector<int64_t>>(value)));
  TORCH_CHECK_TYPE(ok, "[", contract.module, "] ", spec.name, " must be ", type_name(spec.type), ", got ",
                   value_text(value));
  if (spec.type == SettingType::kReal && non_finite(value)) return *non_finite(value);
  // JSON reads an empty list as a list of ints; for a mapping setting it is an empty list of dicts.
  if (spec.type == SettingType::kMapping && std::holds_alternative<std::vector<int64_t>>(value)) {
    TORCH_CHECK_TYPE(std::get<std::vector<int64_t>>(value).empty(), "[", contract.module, "] ", spec.name,
                     " must be ", type_name(spec.type), ", got ", value_text(value));
    return SettingJson{"[]"};
  }
  if (spec.type == SettingType::kWords && std::holds_alternative<std::vector<int64_t>>(value)) {
    TORCH_CHECK_TYPE(std::get<std::vector<int64_t>>(value).empty(), "[", contract.module, "] ", spec.name,
                     " must be ", type_name(spec.type), ", got ", value_text(value));
    return std::vector<std::string>{};
  }
  if (spec.type == SettingType::kWords && !spec.words.empty()) {
    for (const std::string& v : std::get<std::vector<std::string>>(value)) {
      TORCH_CHECK_VALUE(std::find(spec.words.begin(), spec.words.end(), v) != spec.words.end(), "[", contract.module,
                        "] ", spec.name, " must hold only ", listed(spec.words, "and"), ", got '", v, "'");
    }
  }
  if (spec.type == SettingType::kReal && std::holds_alternative<int64_t>(value)) {
    return static_cast<double>(std::get<int64_t>(value));
  }
  if (spec.type == SettingType::kInteger && spec.minimum && *spec.minimum != kAnyInteger) {
    const int64_t v = std::get<int64_t>(value);
    TORCH_CHECK_VALUE(v >= *spec.minimum, "[", contract.module, "] ", spec.name, " must be >= ", *spec.minimum,
                      ", got ", v);
  }
  if (spec.type == SettingType::kWord && !spec.words.empty()) {  // no words: the family's check decides
    const std::string& v = std::get<std::string>(value);
    if (std::find(spec.words.begin(), spec.words.end(), v) == spec.words.end()) {
      std::string allowed;
      for (size_t i = 0; i < spec.words.size(); ++i) allowed += (i ? " or '" : "'") + spec.words[i] + "'";
      TORCH_CHECK_VALUE(false, "[", contract.module, "] ", spec.name, " must be ", allowed, ", got '", v, "'");
    }
  }
  return value;
}

// JSON has no NaN or infinity: a real travels as "nan", "inf" or "-inf" then (both ways).
std::optional<double> non_finite(const SettingValue& value) {
  const auto* text = std::get_if<std::string>(&value);
  if (!text) return std::nullopt;
  if (*text == "nan") return std::numeric_limits<double>::quiet_NaN();
  if (*text == "inf") return std::numeric_limits<double>::infinity();
  if (*text == "-inf") return -std::numeric_limits<double>::infinity();
  return std::nullopt;
}

}  // namespace

// ---------------------------------------------------------------------------
// Setting builders

SettingSpec size_setting(std::string name, std::string meaning) {
  SettingSpec s;
  s.name = std::move(name), s.type = SettingType::kInteger, s.meaning = std::move(meaning);
  s.positional = true, s.minimum = 1;
  return s;
}

SettingSpec integer_setting(std::string name, int64_t default_value, std::string meaning, int64_t minimum) {
  SettingSpec s;
  s.name = std::move(name), s.type = SettingType::kInteger, s.default_value = default_value;
  s.meaning = std::move(meaning), s.minimum = minimum;
  return s;
}

SettingSpec real_setting(std::string name, std::optional<double> default_value, std::string meaning) {
  SettingSpec s;
  s.name = std::move(name), s.type = SettingType::kReal, s.meaning = std::move(meaning);
  if (default_value) s.default_value = *default_value;
  return s;
}

SettingSpec flag_setting(std::string name, bool default_value, std::string meaning) {
  SettingSpec s;
  s.name = std::move(name), s.type = SettingType::kFlag, s.default_value = default_value;
  s.meaning = std::move(meaning);
  return s;
}

SettingSpec word_setting(std::string name, std::vector<std::string> words, std::string meaning) {
  SettingSpec s;
  s.name = std::move(name), s.type = SettingType::kWord, s.default_value = words.at(0);
  s.words = std::move(words), s.meaning = std::move(meaning);
  return s;
}

SettingSpec optional_integer_setting(std::string name, std::string meaning, int64_t minimum) {
  SettingSpec s;
  s.name = std::move(name), s.type = SettingType::kInteger, s.meaning = std::move(meaning), s.minimum = minimum;
  return s;
}

SettingSpec integers_setting(std::string name, std::string meaning) {
  SettingSpec s;
  s.name = std::move(name), s.type = SettingType::kIntegers, s.meaning = std::move(meaning);
  return s;
}

SettingSpec mapping_setting(std::string name, std::string meaning) {
  SettingSpec s;
  s.name = std::move(name), s.type = SettingType::kMapping, s.meaning = std::move(meaning);
  return s;
}

SettingSpec words_setting(std::string name, std::vector<std::string> words, std::vector<std::string> default_value,
                          std::string meaning) {
  SettingSpec s;
  s.name = std::move(name), s.type = SettingType::kWords, s.default_value = std::move(default_value);
  s.words = std::move(words), s.meaning = std::move(meaning);
  return s;
}

// ---------------------------------------------------------------------------
// FamilySettings

FamilySettings& FamilySettings::set(std::string name, SettingValue value) {
  for (auto& [key, v] : values_) {
    if (key == name) {
      v = std::move(value);
      return *this;
    }
  }
  values_.emplace_back(std::move(name), std::move(value));
  return *this;
}

bool FamilySettings::has(std::string_view name) const {
  for (const auto& [key, v] : values_) {
    if (key == name) return !std::holds_alternative<std::monostate>(v);
  }
  return false;
}

const SettingValue& FamilySettings::value(std::string_view name) const {
  for (const auto& [key, v] : values_) {
    if (key == name) return v;
  }
  TORCH_CHECK_VALUE(false, "[family] no setting '", name, "'");
}

int64_t FamilySettings::integer(std::string_view name) const { return std::get<int64_t>(value(name)); }

double FamilySettings::real(std::string_view name) const {
  const SettingValue& v = value(name);
  if (const auto special = non_finite(v)) return *special;
  return std::holds_alternative<int64_t>(v) ? static_cast<double>(std::get<int64_t>(v)) : std::get<double>(v);
}

std::optional<double> FamilySettings::optional_real(std::string_view name) const {
  if (!has(name)) return std::nullopt;
  return real(name);
}

bool FamilySettings::flag(std::string_view name) const { return std::get<bool>(value(name)); }

const std::string& FamilySettings::word(std::string_view name) const { return std::get<std::string>(value(name)); }

std::optional<int64_t> FamilySettings::optional_integer(std::string_view name) const {
  if (!has(name)) return std::nullopt;
  return integer(name);
}

std::vector<int64_t> FamilySettings::integers(std::string_view name) const {
  if (!has(name)) return {};
  return std::get<std::vector<int64_t>>(value(name));
}

const SettingJson* FamilySettings::mapping(std::string_view name) const {
  return has(name) ? &std::get<SettingJson>(value(name)) : nullptr;
}

const std::vector<std::string>& FamilySettings::words(std::string_view name) const {
  static const std::vector<std::string> none;
  const SettingValue& v = value(name);
  return std::holds_alternative<std::vector<std::string>>(v) ? std::get<std::vector<std::string>>(v) : none;  // JSON's []
}

bool FamilySettings::holds_word(std::string_view name, std::string_view word) const {
  const std::vector<std::string>& all = words(name);
  return std::find(all.begin(), all.end(), word) != all.end();
}

std::string FamilySettings::to_json() const {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const auto& [key, v] : values_) {
    std::visit(
        [&](const auto& x) {
          using V = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<V, std::monostate>) out[key] = nullptr;
          else if constexpr (std::is_same_v<V, double>) {
            if (std::isfinite(x)) out[key] = x;
            else out[key] = std::isnan(x) ? "nan" : x > 0 ? "inf" : "-inf";
          } else if constexpr (std::is_same_v<V, SettingJson>) {
            out[key] = nlohmann::ordered_json::parse(x.text);
          } else out[key] = x;
        },
        v);
  }
  return out.dump();
}

FamilySettings FamilySettings::from_json(std::string_view text, std::string_view op) {
  const nlohmann::json parsed = nlohmann::json::parse(text.begin(), text.end(), nullptr, false, false);
  TORCH_CHECK_VALUE(parsed.is_object(), "[", op, "] settings must be a JSON object of setting values, got '", text,
                    "'");
  FamilySettings out;
  for (const auto& [key, v] : parsed.items()) {
    if (v.is_null()) out.set(key, std::monostate{});
    else if (v.is_boolean()) out.set(key, v.get<bool>());
    else if (v.is_number_integer()) out.set(key, v.get<int64_t>());
    else if (v.is_number()) out.set(key, v.get<double>());
    else if (v.is_string()) out.set(key, v.get<std::string>());
    else if (v.is_array() && std::all_of(v.begin(), v.end(), [](const auto& e) { return e.is_number_integer(); })) {
      out.set(key, v.get<std::vector<int64_t>>());
    } else if (v.is_array() && std::all_of(v.begin(), v.end(), [](const auto& e) { return e.is_string(); })) {
      out.set(key, v.get<std::vector<std::string>>());
    } else if (v.is_object() || v.is_array()) {
      out.set(key, SettingJson{v.dump()});
    } else {
      TORCH_CHECK_VALUE(false, "[", op, "] setting '", key, "' must be null, a bool, a number, a string, a list "
                        "or a dict");
    }
  }
  return out;
}

// ---------------------------------------------------------------------------
// FamilyContract

FamilySettings FamilyContract::complete(const FamilySettings& given) const {
  for (const auto& [key, v] : given.values()) {
    const bool known = std::any_of(settings.begin(), settings.end(), [&](const SettingSpec& s) { return s.name == key; });
    TORCH_CHECK_VALUE(known, "[", module, "] unknown setting '", key, "'");
  }
  FamilySettings out;
  for (const SettingSpec& spec : settings) {
    bool found = false;
    for (const auto& [key, v] : given.values()) {
      if (key == spec.name) {
        out.set(spec.name, typed(*this, spec, v));
        found = true;
      }
    }
    if (!found) out.set(spec.name, typed(*this, spec, spec.default_value));
  }
  if (derive) derive(out);
  if (check) check(out);
  return out;
}

FamilyState FamilyContract::init(const FamilySettings& settings) const {
  if (state.empty()) return {};
  const std::vector<std::vector<int64_t>> sizes = shapes(settings);
  FamilyState tensors(state.size());
  for (size_t i = 0; i < state.size(); ++i) {
    if (present(settings, state[i]) && !state[i].borrowed) tensors[i] = at::empty(sizes.at(i));
  }
  at::NoGradGuard no_grad;
  if (reset) reset(settings, tensors);
  return tensors;
}

const at::Tensor& FamilyContract::tensor(const FamilyState& tensors, std::string_view name) const {
  for (size_t i = 0; i < state.size(); ++i) {
    if (state[i].name == name) return tensors.at(i);
  }
  TORCH_CHECK_VALUE(false, "[", module, "] has no tensor '", name, "'");
}

bool FamilyContract::present(const FamilySettings& given, const StateSpec& entry) const {
  if (entry.present_if) return entry.present_if(given);
  return entry.when.empty() || given.flag(entry.when);
}

const SubmoduleSpec* FamilyContract::submodule_of(const StateSpec& entry) const {
  const size_t dot = entry.name.find('.');
  if (dot == std::string::npos) return nullptr;
  for (const SubmoduleSpec& sub : submodules) {
    if (entry.name.compare(0, dot, sub.name) == 0 && sub.name.size() == dot) return &sub;
  }
  return nullptr;
}

bool FamilyContract::trained(const FamilySettings& given, const StateSpec& entry) const {
  return entry.parameter_when.empty() ? entry.parameter : given.flag(entry.parameter_when);
}

FamilyState FamilyContract::expand_state(const FamilySettings& given, const std::vector<at::Tensor>& tensors) const {
  std::string names;
  size_t count = 0, borrowed = 0;
  for (const StateSpec& entry : state) {
    if (!present(given, entry)) continue;
    names += (count++ ? ", " : "") + entry.name;
    borrowed += entry.borrowed ? 1 : 0;
  }
  // Without the borrowed tensors (the layer has not handed them over) or with them.
  const bool lent = tensors.size() == count;
  TORCH_CHECK_VALUE(lent || (borrowed > 0 && tensors.size() == count - borrowed), "[", module, "] state must hold ",
                    count, " tensors (", names, "), got ", tensors.size());
  if (state.empty()) return {};
  const std::vector<std::vector<int64_t>> sizes = shapes(given);
  FamilyState out(state.size());
  size_t next = 0;
  for (size_t i = 0; i < state.size(); ++i) {
    if (!present(given, state[i]) || (state[i].borrowed && !lent)) continue;
    const at::Tensor& t = tensors[next++];
    TORCH_CHECK_VALUE(t.defined() && t.sizes() == at::IntArrayRef(sizes[i]), "[", module, "] ", state[i].name,
                      " must have shape ", at::IntArrayRef(sizes[i]), ", got ",
                      t.defined() ? t.sizes() : at::IntArrayRef{});
    TORCH_CHECK_TYPE(t.is_floating_point(), "[", module, "] ", state[i].name, " must be floating, got ",
                     t.scalar_type());
    out[i] = t;
  }
  return out;
}

at::Tensor FamilyContract::call(std::string_view name, const FamilySettings& given, const FamilyState& tensors,
                               const MethodCall& arguments) const {
  for (const Method& method : methods) {
    if (method.name != name) continue;
    TORCH_CHECK_VALUE(method.call, "[", module, "] ", name, " is a view of the module's attention terms: read "
                      "them with add_terms");
    return method.call(given, tensors, arguments);
  }
  TORCH_CHECK_VALUE(false, "[", module, "] has no method '", name, "'");
}

std::pair<FamilySettings, at::Tensor> FamilyContract::load_pretrained(const at::Tensor& weight,
                                                                     const FamilySettings& given) const {
  TORCH_CHECK_VALUE(pretrained, "[", module, "] has no pretrained tensor");
  const auto argument = [&](std::string_view key) -> const SettingSpec* {
    for (const SettingSpec& spec : pretrained_arguments) {
      if (spec.name == key) return &spec;
    }
    return nullptr;
  };
  FamilySettings all;
  for (const auto& [key, v] : given.values()) {
    if (!argument(key)) all.set(key, v);
  }
  for (const SettingSpec& spec : pretrained_arguments) {
    const SettingValue& v = given.has(spec.name) ? given.value(spec.name) : spec.default_value;
    all.set(spec.name, typed(*this, spec, v));
  }
  const FamilySettings loaded = pretrained(weight, all);
  FamilySettings settings;
  for (const auto& [key, v] : loaded.values()) {
    if (!argument(key)) settings.set(key, v);
  }
  return {complete(settings), pretrained_value ? pretrained_value(weight, all) : weight};
}

std::string FamilyContract::point() const {
  if (embed) return "input";
  if (relative_logits) return "relative vectors";
  if (!rotate) return "logit bias";
  return rotate_inputs.size() == 1 ? "query" : "query/key";  // the query alone: QueryTemperature
}

std::string FamilyContract::describe(const FamilySettings& given, const char* true_word,
                                     const char* false_word) const {
  if (shown_with) return shown_with(given, true_word, false_word);
  std::ostringstream out;
  for (size_t i = 0; i < shown.size(); ++i) {
    out << (i ? ", " : "") << shown[i] << "=";
    std::visit(
        [&](const auto& v) {
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, std::monostate>) out << "None";
          else if constexpr (std::is_same_v<V, bool>) out << (v ? true_word : false_word);
          else if constexpr (std::is_same_v<V, std::vector<int64_t>>) out << at::IntArrayRef(v);
          else if constexpr (std::is_same_v<V, SettingJson>) out << v.text;
          else if constexpr (std::is_same_v<V, std::vector<std::string>>) out << words_text(v);
          else out << v;
        },
        given.value(shown[i]));
  }
  return out.str();
}

FamilyContractRegistration::FamilyContractRegistration(FamilyContract contract) {
  std::string name = contract.module;
  contracts().emplace(std::move(name), std::move(contract));
}

const FamilyContract& family_contract(std::string_view module) {
  const auto& all = contracts();
  const auto found = all.find(module);
  if (found != all.end()) return found->second;
  std::string known;
  for (const auto& [name, c] : all) known += (known.empty() ? "" : ", ") + name;
  TORCH_CHECK_VALUE(false, "[family] unknown module '", module, "'; known: ", known);
}

std::vector<const FamilyContract*> family_contracts() {
  std::vector<const FamilyContract*> out;
  for (const auto& [name, c] : contracts()) out.push_back(&c);
  return out;
}

}  // namespace posenc::nn
