// The family ops (schemas in ops/schemas.cpp): the contracts of
// posenc/nn/family_contract.h for the Python holder, which keeps a module's
// tensors as its own parameters and hands them back on every call. All are
// CompositeImplicitAutograd: the family's functions call differentiable ops,
// so autograd (and the tracer) see through them.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/library.h>

#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "op_support.h"
#include "ops/attention/term_spec_object.h"
#include "posenc/nn/encoding_family.h"
#include "posenc/nn/family_contract.h"

namespace posenc::nn {
namespace {

using detail::to_std;

const char* type_word(SettingType type) {
  switch (type) {
    case SettingType::kFlag: return "bool";
    case SettingType::kInteger: return "int";
    case SettingType::kReal: return "float";
    case SettingType::kWord: return "str";
    case SettingType::kTensor: return "tensor";
    case SettingType::kIntegers: return "ints";
    case SettingType::kMapping: return "mapping";
    case SettingType::kWords: return "words";
  }
  return "?";
}

nlohmann::ordered_json value_json(const SettingValue& value) {
  return std::visit(
      [](const auto& v) -> nlohmann::ordered_json {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, std::monostate>) return nullptr;
        else if constexpr (std::is_same_v<V, SettingJson>) return nlohmann::ordered_json::parse(v.text);
        else return v;
      },
      value);
}

// [{"module", "summary", "settings": [{"name", "type", "default", "required", "words", "meaning",
//   "positional", "minimum", "python_name"}], "state": [{"name", "parameter", "when", "parameter_when",
//   "python_name", "borrowed"}], "submodules": [{"name", "kind", "eps"}], "forward": "lengths" | "queries_keys" | "rotate" | "embed" | "relative", "embed_sizes"
//   (a grid's size arguments), "methods", "keywords" (own posenc.attention keywords), "adopted" (tensors
//   the caller may give), "pretrained" (the state entry the pretrained loader fills, or ""),
//   "pretrained_loader" (its classmethod), "pretrained_arguments" (its own keywords), "shown", "point",
//   "families": [registry names built by this module]}]
std::string catalog() {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const FamilyContract* c : family_contracts()) {
    nlohmann::ordered_json settings = nlohmann::ordered_json::array();
    for (const SettingSpec& s : c->settings) {
      settings.push_back({{"name", s.name},
                          {"type", type_word(s.type)},
                          {"default", value_json(s.default_value)},
                          {"required", s.positional && std::holds_alternative<std::monostate>(s.default_value)},
                          {"words", s.words},
                          {"meaning", s.meaning},
                          {"positional", s.positional},
                          {"minimum", s.minimum ? nlohmann::ordered_json(*s.minimum) : nlohmann::ordered_json()},
                          {"python_name", s.python_name.empty() ? s.name : s.python_name}});
    }
    nlohmann::ordered_json loader_arguments = nlohmann::ordered_json::array();
    for (const SettingSpec& s : c->pretrained_arguments) {
      loader_arguments.push_back({{"name", s.name}, {"type", type_word(s.type)}, {"default", value_json(s.default_value)},
                                  {"meaning", s.meaning}});
    }
    nlohmann::ordered_json state = nlohmann::ordered_json::array();
    for (const StateSpec& t : c->state) {
      state.push_back({{"name", t.name},
                       {"parameter", t.parameter},
                       {"when", t.when},
                       {"parameter_when", t.parameter_when},
                       {"python_name", t.python_name.empty() ? t.name : t.python_name},
                       {"borrowed", t.borrowed}});
    }
    nlohmann::ordered_json submodules = nlohmann::ordered_json::array();
    for (const SubmoduleSpec& sub : c->submodules) {
      submodules.push_back({{"name", sub.name}, {"kind", sub.kind}, {"eps", sub.eps}});
    }
    std::vector<std::string> families, adopted;
    nlohmann::ordered_json method_list = nlohmann::ordered_json::array();
    for (const FamilyContract::Method& m : c->methods) {
      method_list.push_back({{"name", m.name}, {"arguments", m.arguments}, {"property", m.property},
                             {"outputs", m.outputs}, {"term_entries", m.term_entries},
                             {"constant", m.constant}});
    }
    for (const auto& [name, fn] : c->adopted) adopted.push_back(name);
    for (const EncodingFamily& f : encoding_families()) {
      if (f.module == c->module) families.push_back(f.name);
    }
    out.push_back({{"module", c->module},
                   {"summary", c->summary},
                   {"point", c->point()},
                   {"settings", std::move(settings)},
                   {"state", std::move(state)},
                   {"submodules", std::move(submodules)},
                   {"forward", c->embed             ? "embed"
                               : c->rotate          ? "rotate"
                               : c->relative_logits ? "relative"
                               : c->dense_qk        ? "queries_keys"
                                                    : "lengths"},
                   {"embed_sizes", c->embed_sizes},
                   {"rotate_inputs", c->rotate_inputs},
                   {"positions", {{"name", c->positions_argument},
                                  {"optional", c->positions_optional},
                                  {"count", c->positions_count}}},
                   {"methods", std::move(method_list)},
                   {"keywords", static_cast<bool>(c->keywords)},
                   {"adopted", adopted},
                   {"pretrained", c->pretrained_tensor},
                   {"pretrained_loader", c->pretrained_loader},
                   {"pretrained_arguments", std::move(loader_arguments)},
                   {"shown", c->shown},
                   {"families", families}});
  }
  return out.dump();
}

const FamilyContract& contract_of(c10::string_view module) { return family_contract(to_std(module)); }

// The settings as the holder stored them (complete() output): parsed, not checked again.
FamilySettings settings_of(c10::string_view text) { return FamilySettings::from_json(to_std(text), "family"); }

std::string settings(c10::string_view module, c10::string_view text) {
  return contract_of(module).complete(settings_of(text)).to_json();
}

std::string preset(c10::string_view family, int64_t num_heads, int64_t head_dim, bool causal) {
  const EncodingFamily* f = find_encoding_family(to_std(family));
  TORCH_CHECK_VALUE(f && !f->module.empty(), "[family] '", family, "' is not a family on the contract");
  EncodingConfig config;
  config.num_heads = num_heads, config.dim = num_heads * head_dim, config.causal = causal;
  return family_contract(f->module).complete(f->preset(config)).to_json();
}

FamilyState checked_state(const FamilyContract& c, const FamilySettings& s, at::TensorList state) {
  return c.expand_state(s, std::vector<at::Tensor>(state.begin(), state.end()));
}

// [{"name", "present", "parameter", "borrowed", "shape"}] per state entry, for these settings: what the holder
// builds (its submodules' shapes before the draws, which tensors it registers, and how).
std::string layout(c10::string_view module, c10::string_view text) {
  const FamilyContract& c = contract_of(module);
  const FamilySettings s = settings_of(text);
  const std::vector<std::vector<int64_t>> sizes = c.state.empty() ? std::vector<std::vector<int64_t>>{} : c.shapes(s);
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (size_t i = 0; i < c.state.size(); ++i) {
    const StateSpec& t = c.state[i];
    out.push_back({{"name", t.python_name.empty() ? t.name : t.python_name},
                   {"present", c.present(s, t)},
                   {"parameter", c.trained(s, t)},
                   {"borrowed", t.borrowed},
                   {"shape", sizes.at(i)}});
  }
  return out.dump();
}

// The present tensors only: what the holder registers.
std::vector<at::Tensor> init(c10::string_view module, c10::string_view text) {
  const FamilyContract& c = contract_of(module);
  const FamilySettings s = settings_of(text);
  std::vector<at::Tensor> out;
  for (at::Tensor& t : c.init(s)) {
    if (t.defined()) out.push_back(std::move(t));
  }
  return out;
}

void reset(c10::string_view module, c10::string_view text, at::TensorList state) {
  const FamilyContract& c = contract_of(module);
  const FamilySettings s = settings_of(text);
  FamilyState tensors = checked_state(c, s, state);
  at::NoGradGuard no_grad;
  c.reset(s, tensors);
}

at::Tensor dense(c10::string_view module, c10::string_view text, at::TensorList state, int64_t q_len, int64_t k_len) {
  const FamilyContract& c = contract_of(module);
  const FamilySettings s = settings_of(text);
  TORCH_CHECK_VALUE(q_len >= 0 && k_len >= 0, "[", c.module, "] q_len and k_len must be >= 0, got ", q_len, " and ",
                    k_len);
  return c.dense(s, checked_state(c, s, state), q_len, k_len);
}

at::Tensor dense_qk(c10::string_view module, c10::string_view text, at::TensorList state, const at::Tensor& q,
                    const at::Tensor& k, double scale, const c10::optional<at::Tensor>& key_padding_mask) {
  const FamilyContract& c = contract_of(module);
  const FamilySettings s = settings_of(text);
  TORCH_CHECK_VALUE(c.dense_qk, "[", c.module, "] the term depends on the lengths alone: call it with q_len, k_len");
  std::optional<at::Tensor> mask;
  if (detail::given(key_padding_mask)) mask = *key_padding_mask;
  return c.dense_qk(s, checked_state(c, s, state), q, k, scale, mask);
}

std::tuple<std::vector<at::Tensor>, detail::TermSpecArg> terms(c10::string_view module, c10::string_view text,
                                                               at::TensorList state, int64_t q_len, int64_t k_len,
                                                               at::ScalarType compute) {
  const FamilyContract& c = contract_of(module);
  const FamilySettings s = settings_of(text);
  TORCH_CHECK_VALUE(q_len >= 0 && k_len >= 0, "[", c.module, "] q_len and k_len must be >= 0, got ", q_len, " and ",
                    k_len);
  AttentionTerms out;
  c.terms(s, checked_state(c, s, state), out, q_len, k_len, compute);
  TermList list = pack_terms(out);
  return {std::move(list.tensors), c10::make_intrusive<detail::TermSpecObject>(std::move(list.spec))};
}

// The term list's tensors alone: what torch.compile's tracers can record (no script object).
std::vector<at::Tensor> term_tensors(c10::string_view module, c10::string_view text, at::TensorList state,
                                     int64_t q_len, int64_t k_len, at::ScalarType compute) {
  return std::get<0>(terms(module, text, state, q_len, k_len, compute));
}

// {"tensors": the keyword names of family_keywords' tensors, "values": the plain keywords}, from the
// settings alone (no str output per call: the tracer records none).
std::string keyword_names(c10::string_view module, c10::string_view text) {
  const FamilyContract& c = contract_of(module);
  TORCH_CHECK_VALUE(c.keyword_names, "[", c.module, "] has no keywords of its own: use its term list");
  const FamilyKeywords k = c.keyword_names(settings_of(text));
  nlohmann::ordered_json out{{"tensors", k.tensors}, {"values", nlohmann::ordered_json::parse(k.values.to_json())}};
  return out.dump();
}

std::vector<at::Tensor> keywords(c10::string_view module, c10::string_view text, at::TensorList state, int64_t q_len,
                                 int64_t k_len, at::ScalarType dtype) {
  const FamilyContract& c = contract_of(module);
  const FamilySettings s = settings_of(text);
  TORCH_CHECK_VALUE(c.keywords, "[", c.module, "] has no keywords of its own: use its term list");
  return c.keywords(s, checked_state(c, s, state), q_len, k_len, dtype);
}

at::Tensor adopt(c10::string_view module, c10::string_view text, c10::string_view name, const at::Tensor& value) {
  const FamilyContract& c = contract_of(module);
  for (const auto& [entry, fn] : c.adopted) {
    if (entry == to_std(name)) return fn(settings_of(text), value);
  }
  TORCH_CHECK_VALUE(false, "[", c.module, "] takes no tensor '", name, "'");
}

// The settings of a module holding `weight` as its pretrained_tensor (sizes from its shape), and that
// state entry as made from the weight.
std::tuple<std::string, at::Tensor> pretrained(c10::string_view module, const at::Tensor& weight,
                                               c10::string_view text) {
  auto [settings, value] = contract_of(module).load_pretrained(weight, settings_of(text));
  return {settings.to_json(), std::move(value)};
}

at::Tensor call(c10::string_view module, c10::string_view text, at::TensorList state, c10::string_view method,
                int64_t q_len, int64_t k_len, c10::optional<at::ScalarType> dtype,
                const c10::optional<at::Tensor>& positions, int64_t max_distance) {
  const FamilyContract& c = contract_of(module);
  const FamilySettings s = settings_of(text);
  MethodCall arguments;
  arguments.q_len = q_len, arguments.k_len = k_len, arguments.max_distance = max_distance;
  if (dtype) arguments.dtype = *dtype;
  if (detail::given(positions)) arguments.positions = *positions;
  return c.call(to_std(method), s, checked_state(c, s, state), arguments);
}

// The query/key point: one tensor out per input (q and k, or q alone).
std::vector<at::Tensor> rotate(c10::string_view module, c10::string_view text, at::TensorList state,
                               at::TensorList inputs, const c10::optional<at::Tensor>& positions) {
  const FamilyContract& c = contract_of(module);
  const FamilySettings s = settings_of(text);
  TORCH_CHECK_VALUE(c.rotate, "[", c.module, "] acts at the ", c.point(), " point, not at the query/key point");
  TORCH_CHECK_VALUE(inputs.size() == c.rotate_inputs.size(), "[", c.module, "] takes ", c.rotate_inputs.size(),
                    " inputs, got ", inputs.size());
  RotateCall call;
  call.inputs.assign(inputs.begin(), inputs.end());
  if (detail::given(positions)) call.positions = *positions;
  return c.rotate(s, checked_state(c, s, state), call);
}

// The input point: rows at `positions`, else rows start .. start+count-1, else a grid family's cells.
at::Tensor embed(c10::string_view module, c10::string_view text, at::TensorList state, at::IntArrayRef sizes,
                 const c10::optional<at::Tensor>& positions, int64_t start, c10::optional<int64_t> count,
                 at::ScalarType dtype) {
  const FamilyContract& c = contract_of(module);
  const FamilySettings s = settings_of(text);
  TORCH_CHECK_VALUE(c.embed, "[", c.module, "] acts at the ", c.point(), " point, not at the input");
  TORCH_CHECK_VALUE(sizes.size() == c.embed_sizes.size(), "[", c.module, "] takes ", c.embed_sizes.size(),
                    " grid sizes, got ", sizes.size());
  EmbedCall call;
  call.sizes = sizes.vec();
  if (detail::given(positions)) call.positions = *positions;
  call.start = start;
  if (count) call.count = *count;
  call.dtype = dtype;
  return c.embed(s, checked_state(c, s, state), call);
}

// The relative-vectors point: the extra logit terms of q and k, and the value vectors of probs.
at::Tensor relative_logits(c10::string_view module, c10::string_view text, at::TensorList state, const at::Tensor& q,
                           const at::Tensor& k) {
  const FamilyContract& c = contract_of(module);
  const FamilySettings s = settings_of(text);
  TORCH_CHECK_VALUE(c.relative_logits, "[", c.module, "] acts at the ", c.point(),
                    " point, not at the relative-vectors point");
  return c.relative_logits(s, checked_state(c, s, state), q, k);
}

at::Tensor relative_values(c10::string_view module, c10::string_view text, at::TensorList state,
                           const at::Tensor& probs) {
  const FamilyContract& c = contract_of(module);
  const FamilySettings s = settings_of(text);
  TORCH_CHECK(c.relative_values && c.has_values && c.has_values(s), "[", c.module, "] has no value vectors");
  return c.relative_values(s, checked_state(c, s, state), probs);
}

// The repr's arguments, in Python's words (True / False).
std::string describe(c10::string_view module, c10::string_view text) {
  return contract_of(module).describe(settings_of(text), "True", "False");
}

}  // namespace

// No tensor argument: no backend to read, CPU tensors out (as schemas.cpp's tables).
TORCH_LIBRARY_IMPL(posenc, CompositeExplicitAutograd, m) {
  m.impl("family_catalog", &catalog);
  m.impl("family_settings", &settings);
  m.impl("family_preset", &preset);
  m.impl("family_init", &init);
  m.impl("family_layout", &layout);
  m.impl("family_keyword_names", &keyword_names);
  m.impl("family_describe", &describe);
}

TORCH_LIBRARY_IMPL(posenc, CompositeImplicitAutograd, m) {
  m.impl("family_reset", &reset);
  m.impl("family_dense", &dense);
  m.impl("family_dense_qk", &dense_qk);
  m.impl("family_terms", &terms);
  m.impl("family_term_tensors", &term_tensors);
  m.impl("family_call", &call);
  m.impl("family_rotate", &rotate);
  m.impl("family_embed", &embed);
  m.impl("family_relative_logits", &relative_logits);
  m.impl("family_relative_values", &relative_values);
  m.impl("family_keywords", &keywords);
  m.impl("family_adopt", &adopt);
  m.impl("family_pretrained", &pretrained);
}

}  // namespace posenc::nn
