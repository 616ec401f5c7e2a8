// A family's whole contract, once, for C++ and Python alike: its module's
// name, its typed settings (with defaults, admissible values and meaning), the
// named tensors it owns (parameters and buffers), how it draws them, and its
// functions at the point it acts at (DESIGN.md §2: the logit-bias point's
// dense and terms, the query/key point's rotate). The C++ holders
// (family_module.h) and the Python holder (posenc.nn, generated classes)
// both work through it; neither restates a family.
//
//   settings   name, type, default: KerpleBias(num_heads, kind="log", causal=false, r1=None, r2=None, eps=0.01)
//   check      the settings' own rules, "[KerpleBias] eps must be in (0, 1], got 2"
//   shapes     the state's shapes, in the order of `state`
//   reset      the authors' initial draws, in place (torch's default generator)
//   dense      the logit-bias point's term as one tensor, [H, q_len, k_len]
//   terms      the same term for the fused attention (offset rows, a tile, ...)
//   rotate     the query/key point: q and k (or q alone) transformed by position (RoPE, M-RoPE, temperature)
//   embed      the input point: a vector per position, or per cell of a grid (sinusoidal, learned, 2D/3D)
//   relative   the relative-vectors point: logits(q, k) and values(probs) (Shaw, NEZHA, Transformer-XL, 2D)
//   methods    named functions of the state (FIRE's threshold, KERPLE's projection)
//
// A family registers its contract in its file (src/nn/families/<name>.cpp) with one namespace-scope
// `const FamilyContractRegistration registered(contract());`.
#pragma once

#include <ATen/ATen.h>

#include <climits>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "posenc/nn/attention_terms.h"

namespace posenc::nn {

// A JSON object or array of objects as it was given (a Hugging Face rope_scaling dict, or one per axis):
// the family reads it; the contract only carries it.
struct SettingJson {
  std::string text;
  bool operator==(const SettingJson&) const = default;
};

// A setting's value; std::monostate is None (an optional setting left unset).
using SettingValue = std::variant<std::monostate, bool, int64_t, double, std::string, std::vector<int64_t>, SettingJson,
                                  std::vector<std::string>>;

// kTensor: a tensor the caller may give for the state entry of the same name (FamilyContract::adopted);
// its value is a flag saying whether it was given. kIntegers: a list of ints (M-RoPE's sections).
// kMapping: a dict, or a list of dicts (SettingJson). kWords: a list of strings, each among `words` (DeBERTa's
// pos_att_type).
enum class SettingType { kFlag, kInteger, kReal, kWord, kTensor, kIntegers, kMapping, kWords };

// An integer setting with no lower bound of its own (its family's check says more).
inline constexpr int64_t kAnyInteger = INT64_MIN;

struct SettingSpec {
  std::string name;
  SettingType type = SettingType::kReal;
  SettingValue default_value;      // monostate: required when positional, else an optional left unset
  std::vector<std::string> words;  // kWord, kWords: the admissible values, in the order messages list them (none: any)
  std::string meaning;             // one line for the docstring
  bool positional = false;         // before the `*` in Python (num_heads, head_dim)
  std::optional<int64_t> minimum;  // kInteger: checked by the holder, "[Name] hidden must be >= 1, got 0"
  std::string python_name = {};    // the Python attribute when the name is a method there (Shaw's values)
};

// The builders of settings a contract lists.
SettingSpec size_setting(std::string name, std::string meaning);  // positional, required, an int >= 1
SettingSpec integer_setting(std::string name, int64_t default_value, std::string meaning, int64_t minimum);
SettingSpec real_setting(std::string name, std::optional<double> default_value, std::string meaning);  // nullopt: None
SettingSpec flag_setting(std::string name, bool default_value, std::string meaning);
SettingSpec word_setting(std::string name, std::vector<std::string> words, std::string meaning);  // default words[0]
SettingSpec optional_integer_setting(std::string name, std::string meaning, int64_t minimum);  // default None
SettingSpec integers_setting(std::string name, std::string meaning);  // default None
SettingSpec mapping_setting(std::string name, std::string meaning);   // default None
SettingSpec words_setting(std::string name, std::vector<std::string> words, std::vector<std::string> default_value,
                          std::string meaning);

// The values of every setting of one module, by name, in the contract's order.
class FamilySettings {
 public:
  FamilySettings() = default;
  FamilySettings& set(std::string name, SettingValue value);

  bool has(std::string_view name) const;  // present and not None
  const SettingValue& value(std::string_view name) const;
  int64_t integer(std::string_view name) const;
  double real(std::string_view name) const;  // an integer value reads as a real
  std::optional<double> optional_real(std::string_view name) const;
  bool flag(std::string_view name) const;
  const std::string& word(std::string_view name) const;
  std::optional<int64_t> optional_integer(std::string_view name) const;
  std::vector<int64_t> integers(std::string_view name) const;  // None: empty
  const SettingJson* mapping(std::string_view name) const;     // None: nullptr
  const std::vector<std::string>& words(std::string_view name) const;
  bool holds_word(std::string_view name, std::string_view word) const;  // a kWords setting lists it
  const std::vector<std::pair<std::string, SettingValue>>& values() const noexcept { return values_; }

  // {"num_heads": 4, "kind": "log", "r1": null, ...} and back.
  std::string to_json() const;
  static FamilySettings from_json(std::string_view text, std::string_view op);

 private:
  std::vector<std::pair<std::string, SettingValue>> values_;
};

// One tensor a module owns: a parameter, or a buffer (persistent: in the state_dict); `when` names a
// flag setting without which the module has no such tensor (DPB's norm_weight: "norm").
// python_name: the Python module's attribute when torch's convention names it otherwise
// (LearnedEncoding's table is `weight` there, as nn.Embedding and Hugging Face name it).
// parameter_when: a flag setting making the tensor a parameter when true and a buffer when false
// (SinusoidalRelative's omega is trained only when learnable); empty: `parameter` decides.
// present_if: instead of `when`, when presence reads more than one flag (DeBERTa's pos_key_proj: its
// c2p term on and share_att_key off).
// A name "<sub>.<tensor>" is a tensor of the submodule <sub> (FamilyContract::submodules).
// borrowed: a tensor of the attention layer the module reads but does not own, never drawn or registered:
// "q_proj.weight", "q_proj.bias", "k_proj.weight", "k_proj.bias" are the layer's query and key projections
// (DeBERTa's share_att_key); until the layer hands them over (share_projections) they are undefined.
struct StateSpec {
  std::string name;
  bool parameter = true;
  std::string when = {};
  std::string python_name = {};
  std::string parameter_when = {};
  std::function<bool(const FamilySettings&)> present_if = {};
  bool borrowed = false;
};

// A submodule a module owns, one of torch's own kinds so that callers use it as one (DeBERTa's pos_key_proj
// is a Linear, called on its own): its tensors are the state entries "<name>.<tensor>". A holder builds it
// before the contract's draws, with torch's constructor (whose draws come first, as in a module that
// builds a Linear), then gives its tensors the contract's values.
//   kind "Linear":    weight [out, in], bias [out] (bias absent: bias=False)
//   kind "LayerNorm": weight and bias of the normalised shape, eps from the real setting `eps`
struct SubmoduleSpec {
  std::string name;
  std::string kind;
  std::string eps = {};
};

// The tensors of one module, in the contract's state order; an absent one (`when` false) is undefined.
using FamilyState = std::vector<at::Tensor>;

// A named function of a module's state (FIRE's "threshold", DPB's "offset_rows"), with the call's
// arguments it reads, among "q_len", "k_len", "max_distance", "positions" and "dtype" (unset: the
// method's default), in that order.
struct MethodCall {
  int64_t q_len = 0, k_len = 0;
  int64_t max_distance = 0;
  std::optional<at::Tensor> positions;
  std::optional<at::ScalarType> dtype;
};

// The query/key point's call: the tensors it transforms (q and k, or q alone) and their positions
// (unset: the family's default, when it has one).
struct RotateCall {
  std::vector<at::Tensor> inputs;
  std::optional<at::Tensor> positions;
};

// The input point's call: the rows at `positions` (any shape S: S + [dim]), else rows start .. start+count-1,
// else (a grid family) every cell of the grid `sizes`; in `dtype`.
struct EmbedCall {
  std::vector<int64_t> sizes;
  std::optional<at::Tensor> positions;
  int64_t start = 0;
  std::optional<int64_t> count;
  at::ScalarType dtype = at::kFloat;
};

// posenc.attention keywords, as far as the settings fix them: the names of the tensors (in the order
// FamilyContract::keywords gives them) and the plain values.
struct FamilyKeywords {
  std::vector<std::string> tensors;
  FamilySettings values;
};

struct FamilyContract {
  std::string module;  // "KerpleBias": the C++ and Python class, and the prefix of its messages
  std::string summary;  // the docstring's first paragraph
  std::vector<SettingSpec> settings;
  std::vector<StateSpec> state;
  std::vector<SubmoduleSpec> submodules;  // in the order the holders build them
  // Settings that follow from others, filled in before the check (RoPE's rotary_dim None: head_dim).
  std::function<void(FamilySettings&)> derive;
  // The settings' own rules (types and integer minimums are checked before).
  std::function<void(const FamilySettings&)> check;
  std::function<std::vector<std::vector<int64_t>>(const FamilySettings&)> shapes;  // absent ones: any
  std::function<void(const FamilySettings&, FamilyState&)> reset;  // under no_grad
  // The logit bias point. dense: [H, q_len, k_len] in the state's dtype, -inf where masked;
  // unset for a term of q and k (CoPE: dense_qk). terms: written into the attention terms in `compute`.
  std::function<at::Tensor(const FamilySettings&, const FamilyState&, int64_t q_len, int64_t k_len)> dense;
  std::function<at::Tensor(const FamilySettings&, const FamilyState&, const at::Tensor& q, const at::Tensor& k,
                           double scale, const std::optional<at::Tensor>& key_padding_mask)>
      dense_qk;
  std::function<void(const FamilySettings&, const FamilyState&, AttentionTerms&, int64_t q_len, int64_t k_len,
                     at::ScalarType compute)>
      terms;
  // The query/key point: the inputs it takes ({"q", "k"}: forward(q, k, positions) -> (q', k'); {"q"}:
  // forward(q, positions) -> q'), the name of its positions argument, whether it may be left out, and
  // whether an int N stands for 0 .. N-1. rotate checks its call and returns one tensor per input.
  std::vector<std::string> rotate_inputs;
  std::string positions_argument = "positions";
  bool positions_optional = false;
  bool positions_count = false;
  std::function<std::vector<at::Tensor>(const FamilySettings&, const FamilyState&, const RotateCall&)> rotate;
  // The input point. embed_sizes: a grid family's size arguments ({"height", "width"}: forward(height, width)
  // -> [height*width, dim], row-major); empty: forward(positions), an int N standing for 0 .. N-1.
  std::vector<std::string> embed_sizes;
  std::function<at::Tensor(const FamilySettings&, const FamilyState&, const EmbedCall&)> embed;
  // The relative-vectors point (its attention terms: `terms`). relative_logits: q (B, H, Tq, Dh), k (B, H, Tk, Dh)
  // -> the extra logit terms (B, H, Tq, Tk), not q . k and not scaled, queries at i' = i + Tk - Tq.
  // relative_values: probs (B, H, Tq, Tk) -> (B, H, Tq, Dh), added to the output; has_values says whether the
  // settings give the module value vectors (unset: never). The module's heads are its num_heads setting
  // (absent: 0, one table shared by the heads), its width head_dim.
  std::function<at::Tensor(const FamilySettings&, const FamilyState&, const at::Tensor& q, const at::Tensor& k)>
      relative_logits;
  std::function<at::Tensor(const FamilySettings&, const FamilyState&, const at::Tensor& probs)> relative_values;
  std::function<bool(const FamilySettings&)> has_values;
  // posenc.attention's documented keywords for this term (Python's attention_kwargs), when the family
  // has its own ({"t5_table": table, "t5_num_buckets": 32, ...}): the names and plain values (from the
  // settings alone, so the Python holder reads them once, outside any trace) and the tensors per call.
  // Unset: the term list's generic keywords.
  std::function<FamilyKeywords(const FamilySettings&)> keyword_names;
  std::function<std::vector<at::Tensor>(const FamilySettings&, const FamilyState&, int64_t q_len, int64_t k_len,
                                        at::ScalarType dtype)>
      keywords;
  // A tensor the caller may give for a state entry at construction (ALiBi's `slopes`): checked and converted
  // here ("[AlibiBias] slopes must be a 1-D floating tensor of num_heads = 4 values, got (3,) torch.float32"),
  // its setting a flag saying it was given. Unset: no such argument.
  std::vector<std::pair<std::string, std::function<at::Tensor(const FamilySettings&, const at::Tensor&)>>> adopted;
  // A pretrained checkpoint's tensor as the module's state entry (T5's relative_attention_bias.weight as
  // "table"): the sizes read from its shape, checked ("[T5Bias] weight must be a 2-D floating tensor
  // (num_buckets, num_heads), got 3-D torch.float32"). Unset: no from_pretrained_weight.
  // pretrained_loader: the Python classmethod's name; pretrained_arguments: the loader's own keywords
  // (BERT's max_position_embeddings), in `given` beside the module's settings and gone from the result;
  // pretrained_value: the state entry made from the weight (Shaw's rows flipped; unset: the weight itself).
  std::string pretrained_tensor;
  std::string pretrained_loader = "from_pretrained_weight";
  std::vector<SettingSpec> pretrained_arguments;
  std::function<FamilySettings(const at::Tensor& weight, FamilySettings given)> pretrained;
  std::function<at::Tensor(const at::Tensor& weight, const FamilySettings& given)> pretrained_value;
  // Named functions of the state a module offers besides its point (FIRE's "threshold", KERPLE's
  // "project", which acts in place and returns an undefined tensor): C++ and Python methods alike.
  // A property takes no argument and reads as an attribute in Python (RoPE's inv_freq); a 0-d result
  // reads as a float there. A view of the terms (term_entries set, no call) returns the named entries of
  // the module's attention terms, None where absent (DeBERTa's tables: relative_keys, relative_queries).
  struct Method {
    std::string name;
    std::vector<std::string> arguments;
    std::function<at::Tensor(const FamilySettings&, const FamilyState&, const MethodCall&)> call;
    bool property = false;
    int outputs = 1;  // 2: two results stacked on a new first dimension (RoPE's cos_sin), a pair to callers
    std::vector<std::string> term_entries = {};
    bool constant = false;  // a property of the settings alone: Python reads it once, as a plain attribute
  };
  std::vector<Method> methods;
  // The settings the repr shows, in order: KerpleBias(num_heads=4, kind=log, causal=false).
  std::vector<std::string> shown;
  // Instead of `shown`, when the repr reads more than settings (RoPE's rotary_dim resolved, its rope_type).
  std::function<std::string(const FamilySettings&, const char* true_word, const char* false_word)> shown_with;

  // The settings completed with the defaults, typed and checked: "[KerpleBias] unknown setting 'x'",
  // "[KerpleBias] kind must be 'log' or 'power', got 'cubic'", "[KerpleBias] num_heads is required".
  FamilySettings complete(const FamilySettings& given) const;
  // Fresh state (float32) with the initial draws, from complete settings.
  FamilyState init(const FamilySettings& settings) const;
  // The tensor of the state called name.
  const at::Tensor& tensor(const FamilyState& state, std::string_view name) const;
  // The method called name: "[FireBias] has no method 'x'".
  at::Tensor call(std::string_view name, const FamilySettings& settings, const FamilyState& state,
                  const MethodCall& arguments = {}) const;
  // "num_heads=4, kind=log, causal=false" (bools as `true_word` / `false_word`: Python writes True).
  std::string describe(const FamilySettings& settings, const char* true_word = "true",
                       const char* false_word = "false") const;
  // "input", "logit bias", "query/key", "query" (a transform of q alone) or "relative vectors": the point
  // its functions serve.
  std::string point() const;
  // Whether the tensor `entry` of the state exists for these settings, and whether it is a parameter.
  bool present(const FamilySettings& settings, const StateSpec& entry) const;
  bool trained(const FamilySettings& settings, const StateSpec& entry) const;
  // The present tensors (as a holder keeps them) back in state order, absent ones undefined; the borrowed
  // ones may be left out together (not handed over yet: undefined). Refuses a state that does not match the
  // settings: "[KerpleBias] state must hold 2 tensors (r1, r2), got 1".
  FamilyState expand_state(const FamilySettings& settings, const std::vector<at::Tensor>& present) const;
  // The submodule owning the state entry (its name up to the dot), or nullptr.
  const SubmoduleSpec* submodule_of(const StateSpec& entry) const;
  // The pretrained loader's call: the module's settings (sizes from the weight, the loader's arguments gone)
  // and its state entry made from the weight; `given` holds settings and loader arguments alike.
  std::pair<FamilySettings, at::Tensor> load_pretrained(const at::Tensor& weight, const FamilySettings& given) const;
};

struct FamilyContractRegistration {
  explicit FamilyContractRegistration(FamilyContract contract);
};

// The contract of the module called name: "[family] unknown module 'X'; known: AlibiBias, ...".
const FamilyContract& family_contract(std::string_view module);
// Every registered module, in name order.
std::vector<const FamilyContract*> family_contracts();

}  // namespace posenc::nn
