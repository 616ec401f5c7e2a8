// RoPE as a family on the contract (RotaryEmbedding): its settings, the
// rotation of q and k with cos/sin tables shared by every module of the same
// settings, learned frequencies and xPos, its typed front end and the
// registry's rope, p-rope and rope-xpos.
#include <ATen/ATen.h>
#include <ATen/TracerMode.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "families.h"
#include "op_support.h"
#include "ops/rope/support.h"
#include "posenc/nn/ops.h"
#include "posenc/nn/rotary_embedding.h"
#include "rope_scaling_setting.h"

namespace posenc::nn {
namespace {

constexpr const char* kModule = "RotaryEmbedding";

struct Rope {
  int64_t head_dim = 0, rotary_dim = 0;
  double base = 10000.0;
  kernels::RopeLayout layout = kernels::RopeLayout::kHalf;
  kernels::RopeScaling scaling;
  std::string scaling_text = "null";  // the tables' key
  std::optional<int64_t> seq_len;
  kernels::Precision precision = kernels::Precision::kExact;
  bool learned = false;
  double xpos_scale_base = 0.0, xpos_gamma = 0.4, xpos_center = 0.0;
  std::optional<double> attention_scaling;

  ops::RopeOptions table_options() const {
    ops::RopeOptions o;
    o.base = base, o.scaling = scaling, o.seq_len = seq_len, o.precision = precision;
    return o;
  }
};

Rope read(const FamilySettings& s) {
  Rope r;
  r.head_dim = s.integer("head_dim");
  r.rotary_dim = s.optional_integer("rotary_dim").value_or(r.head_dim);
  r.base = s.real("base");
  r.layout = kernels::parse_rope_layout(s.word("layout"));
  if (const SettingJson* m = s.mapping("scaling")) r.scaling_text = m->text;
  r.scaling = families::scaling_setting(s.mapping("scaling"));
  r.seq_len = s.optional_integer("seq_len");
  r.precision = kernels::parse_precision(s.word("precision"));
  r.learned = s.flag("learned_frequencies");
  r.xpos_scale_base = s.real("xpos_scale_base");
  r.xpos_gamma = s.real("xpos_gamma");
  r.xpos_center = s.real("xpos_center");
  r.attention_scaling = s.optional_real("attention_scaling");
  return r;
}

void check(const FamilySettings& s) {
  families::checked_rotary_dim(kModule, s);
  const Rope r = read(s);
  const bool scaled = r.scaling.type != kernels::RopeType::kDefault;
  const bool xpos = r.xpos_scale_base != 0.0;
  const std::string_view type = kernels::rope_type_name(r.scaling.type);
  TORCH_CHECK_VALUE(!r.learned || !scaled, "[", kModule, "] learned_frequencies start from base^(-2i/R) and take no ",
                    "scaling, got rope_type '", type, "'");
  TORCH_CHECK_VALUE(!xpos || !scaled, "[", kModule, "] xPos uses the unscaled frequencies, got rope_type '", type, "'");
  TORCH_CHECK_VALUE(!xpos || !r.learned, "[", kModule, "] xPos and learned_frequencies cannot be combined");
  TORCH_CHECK_VALUE(!r.seq_len || *r.seq_len >= 1, "[", kModule, "] seq_len must be at least 1, got ",
                    r.seq_len.value_or(0));
  if (r.attention_scaling) {
    const double a = *r.attention_scaling;
    TORCH_CHECK_VALUE(std::isfinite(a) && a > 0, "[", kModule, "] attention_scaling must be finite and > 0, got ", a);
    TORCH_CHECK_VALUE(!xpos && !r.learned, "[", kModule, "] attention_scaling applies to the cached tables; it cannot ",
                      "be combined with learned_frequencies or xPos");
  }
  // The base, the scaling and the precision, with the ops' own messages.
  ops::rope_inv_freq(r.rotary_dim, r.base, r.scaling, r.seq_len);
  ops::rope_cos_sin_range(0, 1, r.rotary_dim, r.table_options(), at::kFloat);
}

// ---------------------------------------------------------------------------
// The tables: cos and sin of positions [0, length) per (R, base, scaling, precision) and compute dtype, shared by
// every module of those settings (a model's layers), rebuilt whenever the regime that seq_len selects gives other
// frequencies (dynamic, longrope) and grown by doubling, so never stale. Tensors, not spans: a trace that captured
// a table keeps it alive.

struct Tables {
  std::mutex mutex;
  kernels::RopeFrequencies frequencies;
  at::Tensor cos, sin;  // [length, R/2], attention factor included
  uint64_t builds = 0;
};

// Bounded: a process that builds many settings keeps the most recent ones.
constexpr size_t kMaxTables = 32;

std::shared_ptr<Tables> tables_of(const Rope& r, at::ScalarType compute) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<Tables>> all;
  static std::list<std::string> recent;
  std::ostringstream key;
  key.precision(17);
  key << r.rotary_dim << '|' << r.base << '|' << static_cast<int>(r.precision) << '|' << c10::toString(compute) << '|'
      << r.scaling_text;
  const std::lock_guard<std::mutex> lock(mutex);
  auto& entry = all[key.str()];
  if (!entry) {
    entry = std::make_shared<Tables>();
    recent.push_back(key.str());
    if (recent.size() > kMaxTables) {
      all.erase(recent.front());
      recent.pop_front();
    }
  }
  return entry;
}

bool same(const kernels::RopeFrequencies& a, const kernels::RopeFrequencies& b) {
  return a.inv_freq == b.inv_freq && a.attention_factor == b.attention_factor;
}

// Rows `p` (non-negative, < seq_len) of the shared tables: p.shape + [R/2]; the gather is traced, the build is not.
std::pair<at::Tensor, at::Tensor> cached(const Rope& r, int64_t seq_len, int64_t last, const at::Tensor& p,
                                         at::ScalarType compute, double* factor) {
  const std::shared_ptr<Tables> tables = tables_of(r, compute);
  at::Tensor cos, sin;
  {
    at::tracer::impl::NoTracerDispatchMode untraced;
    const std::lock_guard<std::mutex> lock(tables->mutex);
    kernels::RopeFrequencies wanted = detail::translate_errors(
        [&] { return kernels::rope_frequencies(r.rotary_dim, r.base, r.scaling, seq_len, "rope"); });
    const bool fresh = tables->builds > 0 && same(wanted, tables->frequencies);
    const int64_t length = fresh ? tables->cos.size(0) : 0;
    if (last >= length) {
      ops::RopeOptions o = r.table_options();
      o.seq_len = seq_len;
      // Growth alone doubles (O(log T) rebuilds while a sequence grows); new frequencies build what is asked.
      const int64_t rows = fresh ? std::max(last + 1, 2 * length) : last + 1;
      std::tie(tables->cos, tables->sin) = ops::rope_cos_sin_range(0, rows, r.rotary_dim, o, compute);
      tables->frequencies = std::move(wanted);
      ++tables->builds;
    }
    cos = tables->cos, sin = tables->sin;
    *factor = tables->frequencies.attention_factor;
  }
  const at::Tensor index = p.reshape({-1});
  const std::vector<int64_t> sizes = detail::table_sizes(p.sizes(), r.rotary_dim / 2);
  return {cos.index_select(0, index).reshape(sizes), sin.index_select(0, index).reshape(sizes)};
}

// (cos, sin), positions.shape + [R/2] in `compute`, attention factor (or attention_scaling) included.
std::pair<at::Tensor, at::Tensor> cos_sin(const Rope& r, const at::Tensor& p, at::ScalarType compute) {
  // Traced (torch.compile, torch.export), the positions have no values to read: the table op is recorded as it
  // is, and the module's cache, which would keep the tracer's tensors, is not used.
  const bool traced = !detail::holds_data(p);
  int64_t first = 0, last = 0;
  const bool any = !traced && p.numel() > 0;  // traced sizes may be symbolic
  if (any) {
    at::tracer::impl::NoTracerDispatchMode untraced;
    first = p.min().item<int64_t>(), last = p.max().item<int64_t>();
  }
  double factor = 1.0;
  at::Tensor cos, sin;
  if (traced || !any || first < 0 || (r.seq_len && last >= *r.seq_len)) {
    // Outside what a table of [0, seq_len) holds (or traced): straight from the table op.
    std::tie(cos, sin) = ops::rope_cos_sin(p, r.rotary_dim, r.table_options(), compute);
    if (r.attention_scaling) {
      const bool by_length =
          r.scaling.type == kernels::RopeType::kDynamic || r.scaling.type == kernels::RopeType::kLongrope;
      TORCH_CHECK_VALUE(!traced || !by_length || r.seq_len, "[", kModule, "] attention_scaling with a "
                        "length-dependent scaling needs seq_len under a tracer (torch.compile, torch.export): it "
                        "reads the positions' values");
      const int64_t length = r.seq_len.value_or(std::max<int64_t>(last + 1, 1));
      factor = detail::translate_errors([&] {
        return kernels::rope_frequencies(r.rotary_dim, r.base, r.scaling, length, kModule).attention_factor;
      });
    }
  } else {
    std::tie(cos, sin) = cached(r, r.seq_len.value_or(last + 1), last, p, compute, &factor);
  }
  if (!r.attention_scaling) return {cos, sin};
  const double ratio = *r.attention_scaling / factor;  // HF's attention_scaling replaces the scaling's factor
  return {cos * ratio, sin * ratio};
}

std::vector<at::Tensor> rotate(const FamilySettings& s, const FamilyState& state, const RotateCall& call) {
  const Rope r = read(s);
  const at::Tensor& q = call.inputs[0];
  const at::Tensor& k = call.inputs[1];
  families::check_qk(kModule, q, k, r.head_dim);
  at::Tensor p;
  if (call.positions) {
    p = detail::int64_positions(kModule, *call.positions);
  } else {
    TORCH_CHECK_VALUE(q.size(-2) == k.size(-2), "[", kModule, "] positions None means arange(T) for q and k of one ",
                      "length, got ", q.size(-2), " and ", k.size(-2), "; pass positions");
    p = at::arange(q.size(-2), at::kLong);
  }
  detail::rows_batch(kModule, {}, q, p.sizes(), p.sizes());
  detail::rows_batch(kModule, {}, k, p.sizes(), p.sizes());
  if (r.learned) {
    const at::Tensor& omega = state[0];
    ops::RopeOptions o;
    o.rotary_dim = r.rotary_dim, o.layout = r.layout, o.precision = r.precision;
    return {ops::rope_learned(q, p, omega.to(detail::compute_dtype(q.scalar_type())), o),
            ops::rope_learned(k, p, omega.to(detail::compute_dtype(k.scalar_type())), o)};
  }
  if (r.xpos_scale_base != 0.0) {
    ops::XposOptions o;
    o.scale_base = r.xpos_scale_base, o.gamma = r.xpos_gamma, o.center = r.xpos_center;
    o.rotary_dim = r.rotary_dim, o.base = r.base, o.layout = r.layout, o.precision = r.precision;
    auto [q_out, k_out] = ops::xpos(q, k, p, o);
    return {q_out, k_out};
  }
  return families::rotate_both(q, k, r.layout, [&](at::ScalarType compute) { return cos_sin(r, p, compute); });
}

// float64 [R/2]: omega when learned, else the frequencies at the fixed seq_len (unset: the original regime).
at::Tensor inv_freq(const FamilySettings& s, const FamilyState& state) {
  const Rope r = read(s);
  if (r.learned) return state[0].detach().to(at::kDouble);
  return ops::rope_inv_freq(r.rotary_dim, r.base, r.scaling, r.seq_len).first;
}

std::string shown(const FamilySettings& s, const char* true_word, const char*) {
  const Rope r = read(s);
  std::ostringstream out;
  out << "head_dim=" << r.head_dim << ", rotary_dim=" << r.rotary_dim << ", base=" << r.base
      << ", layout=" << kernels::rope_layout_name(r.layout) << ", rope_type=" << kernels::rope_type_name(r.scaling.type)
      << ", precision=" << kernels::precision_name(r.precision);
  if (r.learned) out << ", learned_frequencies=" << true_word;
  if (r.xpos_scale_base != 0.0) out << ", xpos_scale_base=" << r.xpos_scale_base;
  return out.str();
}

FamilyContract contract() {
  FamilyContract c;
  c.module = kModule;
  c.summary =
      "RoPE (Su et al. 2021): forward(q, k, positions=None) -> (q', k'), pair (a, b) of the first rotary_dim channels "
      "turned to (a cos - b sin, b cos + a sin) at angle position x inv_freq, cos and sin times the attention factor; "
      "layout \"half\" (GPT-NeoX, HF Llama) or \"interleaved\" (GPT-J). q, k (..., T, head_dim), positions int64 (T) "
      "or (B, T), None: arange(T). The cos/sin tables of positions [0, L) are shared by every module of the same "
      "settings, rebuilt when seq_len selects other frequencies (dynamic, longrope), so never stale.";
  SettingSpec head_dim = size_setting("head_dim", "D of q and k");
  head_dim.minimum = kAnyInteger;  // the family's own words: "head_dim must be positive"
  c.settings = {
      head_dim,
      optional_integer_setting("rotary_dim", "R, even (None: head_dim); channels R .. D-1 stay", kAnyInteger),
      real_setting("base", 10000.0, "frequencies base^(-2i/R)"),
      word_setting("layout", {"half", "interleaved"}, "pairs (i, i + R/2) or (2i, 2i + 1)"),
      mapping_setting("scaling", "a Hugging Face rope_scaling dict (None: plain RoPE)"),
      optional_integer_setting("seq_len", "the length that selects the regime of dynamic / longrope (None: max "
                                          "position + 1)", kAnyInteger),
      word_setting("precision", {"exact", "fp32"}, "angles in float64 modulo 2 pi, or the common float32 formula"),
      flag_setting("learned_frequencies", false, "omega [R/2] a parameter, from base^(-2i/R), no scaling"),
      real_setting("xpos_scale_base", 0.0, "xPos (Sun et al. 2022) when > 0: q times zeta^((p - center)/scale_base)"),
      real_setting("xpos_gamma", 0.4, "zeta_j = (2j/R + gamma)/(1 + gamma)"),
      real_setting("xpos_center", 0.0, "xPos's centre position"),
      real_setting("attention_scaling", std::nullopt, "replaces the scaling's attention factor (HF configs may set "
                                                      "it)"),
  };
  c.state = {{"omega", true, "learned_frequencies"}};
  c.derive = families::derive_rotary_dim;
  c.check = check;
  c.shapes = [](const FamilySettings& s) {
    return std::vector<std::vector<int64_t>>{{s.optional_integer("rotary_dim").value_or(s.integer("head_dim")) / 2}};
  };
  c.reset = [](const FamilySettings& s, FamilyState& state) {
    if (!state[0].defined()) return;
    const Rope r = read(s);
    state[0].copy_(ops::rope_inv_freq(r.rotary_dim, r.base).first);
  };
  c.rotate_inputs = {"q", "k"};
  c.positions_optional = true;
  c.rotate = rotate;
  c.methods = {
      // (cos, sin) stacked: the tables forward rotates by (neither learned nor xPos), positions.shape + [R/2].
      {"cos_sin", {"positions", "dtype"},
       [](const FamilySettings& s, const FamilyState&, const MethodCall& call) {
         TORCH_CHECK_VALUE(call.positions, "[", kModule, "] cos_sin needs positions");
         const at::Tensor p = detail::int64_positions(kModule, *call.positions);
         const at::ScalarType dtype = call.dtype.value_or(at::kFloat);
         TORCH_CHECK_TYPE(dtype == at::kFloat || dtype == at::kDouble, "[", kModule,
                          "] cos_sin's dtype must be float32 or float64, got ", dtype);
         const auto [cos, sin] = cos_sin(read(s), p, dtype);
         return at::stack({cos, sin});
       },
       false, 2},
      {"inv_freq", {}, [](const FamilySettings& s, const FamilyState& t, const MethodCall&) { return inv_freq(s, t); },
       true},
      // The factor multiplying cos and sin: attention_scaling when given, else the scaling's.
      {"attention_factor", {},
       [](const FamilySettings& s, const FamilyState&, const MethodCall&) {
         const Rope r = read(s);
         const double f = r.attention_scaling ? *r.attention_scaling
                                              : ops::rope_inv_freq(r.rotary_dim, r.base, r.scaling, r.seq_len).second;
         return at::scalar_tensor(f, at::kDouble);
       },
       true},
  };
  c.shown_with = shown;
  return c;
}

const FamilyContractRegistration registered_contract(contract());

FamilySettings settings_of(const RotaryEmbeddingOptions& o) {
  FamilySettings s;
  s.set("head_dim", o.head_dim());
  if (o.rotary_dim() != 0) s.set("rotary_dim", o.rotary_dim());
  s.set("base", o.base()).set("layout", std::string(kernels::rope_layout_name(o.layout())));
  s.set("scaling", families::scaling_value(o.scaling()));
  if (o.seq_len()) s.set("seq_len", *o.seq_len());
  s.set("precision", std::string(kernels::precision_name(o.precision())));
  s.set("learned_frequencies", o.learned_frequencies());
  s.set("xpos_scale_base", o.xpos_scale_base()).set("xpos_gamma", o.xpos_gamma()).set("xpos_center", o.xpos_center());
  if (o.attention_scaling()) s.set("attention_scaling", *o.attention_scaling());
  return s;
}

}  // namespace

RotaryEmbeddingImpl::RotaryEmbeddingImpl(const RotaryEmbeddingOptions& options)
    : FamilyTransformImpl(kModule, settings_of(options)), options_(options) {}

std::tuple<at::Tensor, at::Tensor> RotaryEmbeddingImpl::forward(const at::Tensor& q, const at::Tensor& k,
                                                                const at::Tensor& positions) {
  std::vector<at::Tensor> out = rotate({q, k}, positions);
  return {out[0], out[1]};
}

std::pair<at::Tensor, at::Tensor> RotaryEmbeddingImpl::cos_sin(const at::Tensor& positions, at::ScalarType compute) {
  MethodCall call;
  call.positions = positions, call.dtype = compute;
  const at::Tensor both = FamilyTransformImpl::call("cos_sin", call);
  return {both[0], both[1]};
}

int64_t RotaryEmbeddingImpl::rotary_dim() const {
  return options_.rotary_dim() == 0 ? options_.head_dim() : options_.rotary_dim();
}

uint64_t rope_table_builds(const RotaryEmbeddingOptions& options, at::ScalarType compute) {
  const Rope r = read(family_contract(kModule).complete(settings_of(options)));
  const std::shared_ptr<Tables> tables = tables_of(r, compute);
  const std::lock_guard<std::mutex> lock(tables->mutex);
  return tables->builds;
}

}  // namespace posenc::nn

// The descriptors: what `posenc encodings`, the registry and the report read.
namespace posenc::nn::families {
namespace {

FamilySettings head_settings(const EncodingConfig& c) {
  FamilySettings s;
  return s.set("head_dim", c.dim / c.num_heads).set("base", c.real("base"));
}

void add_rotary(std::vector<EncodingFamily>& out) {
  EncodingFamily rope;
  rope.name = "rope";
  rope.point = EncodingPoint::kQueryKey;
  rope.description = "rotary embedding of q and k, half (GPT-NeoX) layout, full head_dim (Su et al. 2021, RoFormer)";
  rope.parameters = {base_parameter("frequencies base^(-2i/head_dim)")};
  rope.needs.even_head_dim = true;
  rope.make_attention = [](const EncodingConfig& c, AttentionEncodings& slots) {
    slots.rotary =
        RotaryEmbedding(RotaryEmbeddingOptions(c.dim / c.num_heads).base(c.real("base")).scaling(c.rope_scaling));
  };
  rope.module = kModule;
  rope.preset = [](const EncodingConfig& c) {
    return head_settings(c).set("scaling", scaling_value(c.rope_scaling));
  };
  out.push_back(std::move(rope));

  EncodingFamily p_rope;
  p_rope.name = "p-rope";
  p_rope.point = EncodingPoint::kQueryKey;
  p_rope.description =
      "RoPE on the fastest share p of its frequency pairs only; the slowest pairs do not turn and carry content "
      "(Barbero et al. 2024, p-RoPE; Gemma's proportional RoPE)";
  p_rope.parameters = {base_parameter("frequencies base^(-2i/head_dim)"),
                       real("rope_fraction", 0.25,
                            "p: pairs i < floor(p head_dim / 2) turn, the rest stay", 0.0, true, 1.0, false)};
  p_rope.needs.even_head_dim = true;
  // Hugging Face's "proportional" type at factor 1 is exactly p-RoPE: the first floor(p d/2) pairs keep
  // base^(-2i/d), the others get frequency 0.
  const auto proportional = [](const EncodingConfig& c) {
    kernels::RopeScaling s;
    s.type = kernels::RopeType::kProportional;
    s.partial_rotary_factor = c.real("rope_fraction");
    return s;
  };
  p_rope.make_attention = [proportional](const EncodingConfig& c, AttentionEncodings& slots) {
    slots.rotary = RotaryEmbedding(RotaryEmbeddingOptions(c.dim / c.num_heads).base(c.real("base")).scaling(proportional(c)));
  };
  p_rope.module = kModule;
  p_rope.preset = [proportional](const EncodingConfig& c) {
    return head_settings(c).set("scaling", scaling_value(proportional(c)));
  };
  out.push_back(std::move(p_rope));

  EncodingFamily xpos;
  xpos.name = "rope-xpos";
  xpos.point = EncodingPoint::kQueryKey;
  xpos.description = "RoPE with the xPos exponential decay of q.k with distance (Sun et al. 2022)";
  xpos.parameters = {base_parameter("frequencies base^(-2i/head_dim)"),
                     real("xpos_scale_base", 512.0,
                          "decay zeta^((i-j)/scale_base), gamma 0.4", 0.0, true)};
  xpos.needs.even_head_dim = true;
  xpos.make_attention = [](const EncodingConfig& c, AttentionEncodings& slots) {
    slots.rotary = RotaryEmbedding(
        RotaryEmbeddingOptions(c.dim / c.num_heads).base(c.real("base")).xpos_scale_base(c.real("xpos_scale_base")));
  };
  xpos.module = kModule;
  xpos.preset = [](const EncodingConfig& c) { return head_settings(c).set("xpos_scale_base", c.real("xpos_scale_base")); };
  out.push_back(std::move(xpos));
}

const Registration registered(30, add_rotary);

}  // namespace
}  // namespace posenc::nn::families
