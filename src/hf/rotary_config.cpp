// HF's semantics, key by key (transformers v5 RotaryEmbeddingConfigMixin
// standardize_rope_params / validate_rope and _compute_*_parameters):
//   rope_type (or legacy type; "mrope" = default with mrope_section, "su" = longrope)
//   rope_theta, partial_rotary_factor: in the dict (v5) or at the top level (v4)
//   rotary dim R = int(head_dim * partial_rotary_factor)
//   original_max_position_embeddings (llama3, yarn, longrope): the top-level
//     one when the config has it (Phi-3), else the dict's, else max_position_embeddings
//   dynamic: the original length is max_position_embeddings
//   longrope with a top-level original: factor = max_position_embeddings / original
// Keys HF knows but the type does not use are ignored, as HF does.
#include "rotary_config.h"

#include <array>
#include <cmath>
#include <stdexcept>

namespace posenc::hf::detail {
namespace {

constexpr std::array<std::string_view, 18> kRopeKeys = {
    "rope_type", "type", "rope_theta", "partial_rotary_factor", "mrope_section", "mrope_interleaved",
    "factor", "original_max_position_embeddings", "beta_fast", "beta_slow", "mscale", "mscale_all_dim",
    "truncate", "attention_factor", "short_factor", "long_factor", "low_freq_factor", "high_freq_factor"};

bool is_rope_key(std::string_view key) {
  for (std::string_view k : kRopeKeys) {
    if (k == key) return true;
  }
  return false;
}

// The type name as HF spells it, mapped to posenc's ("proportional" stays).
std::string read_type(const Fields& d) {
  const std::optional<std::string> rope_type = d.string("rope_type");
  const std::optional<std::string> type = d.string("type");
  if (rope_type && type && *rope_type != *type) {
    d.fail("rope_type", "('", *rope_type, "') and ", d.path_of("type"), " ('", *type, "') disagree");
  }
  std::string name = rope_type ? *rope_type : type.value_or("default");
  if (name == "mrope") name = "default";  // Qwen2-VL v4: HF renames it to default
  if (name == "su") name = "longrope";    // Phi-3 v4 configs
  if (name == "proportional") return name;
  for (std::string_view known : {"default", "linear", "ntk", "dynamic", "yarn", "longrope", "llama3"}) {
    if (name == known) return name;
  }
  d.fail(rope_type ? "rope_type" : "type",
         "must be one of default, linear, dynamic, yarn, longrope, llama3, proportional (or mrope, su, ntk), got '",
         name, "'");
}

void check_positive(const Fields& f, std::string_view key, const std::optional<double>& v) {
  if (v && !(std::isfinite(*v) && *v > 0)) f.fail(key, "must be > 0, got ", *v);
}

void check_length(const Fields& f, std::string_view key, const std::optional<int64_t>& v) {
  if (v && *v < 1) f.fail(key, "must be >= 1, got ", *v);
}

// A posenc kernel message "[hf] what" becomes "[hf] source: path: what".
[[noreturn]] void rethrow_at(const Fields& d, const std::invalid_argument& e) {
  std::string what = e.what();
  const std::string tag = "[hf] ";
  if (what.rfind(tag, 0) == 0) what = what.substr(tag.size());
  fail_config(d.source(), d.path().empty() ? std::string("rope") : d.path(), ": ", what);
}

}  // namespace

HfRotary read_rotary(const RotaryContext& ctx, const std::optional<Fields>& dict) {
  static const Json kEmpty = Json::object();
  const Fields d = dict ? *dict : Fields(kEmpty, ctx.top->source(), "rope_scaling");
  for (const auto& [key, value] : d.json().items()) {
    if (is_rope_key(key)) continue;
    if (key == "max_position_embeddings") {
      d.fail(key, "goes to the top level of config.json, not in ", d.path());
    }
    d.fail(key, "is not a rope parameter posenc knows (HF keys: rope_type, rope_theta, partial_rotary_factor, "
                "factor, original_max_position_embeddings, beta_fast, beta_slow, mscale, mscale_all_dim, truncate, "
                "attention_factor, short_factor, long_factor, low_freq_factor, high_freq_factor, mrope_section, "
                "mrope_interleaved)");
  }

  HfRotary r;
  r.head_dim = ctx.head_dim;
  r.layout = ctx.layout;
  r.max_position_embeddings = ctx.max_position_embeddings.value_or(0);

  const std::string type = read_type(d);
  const std::optional<double> theta = d.number("rope_theta");
  r.base = theta ? *theta : ctx.base;
  if (!(std::isfinite(r.base) && r.base > 0)) {
    if (theta) d.fail("rope_theta", "must be > 0, got ", r.base);
    ctx.top->fail(ctx.base_key, "must be > 0, got ", r.base);
  }

  const std::optional<double> inner_partial = d.number("partial_rotary_factor");
  const std::optional<double> partial = inner_partial ? inner_partial : ctx.partial;
  if (partial && !(*partial > 0 && *partial <= 1)) {
    if (inner_partial) d.fail("partial_rotary_factor", "must be in (0, 1], got ", *partial);
    ctx.top->fail(ctx.partial_key, "must be in (0, 1], got ", *partial);
  }

  if (type == "proportional") {
    // Gemma 4: over the whole head (pairs i, i + D/2), the first
    // floor(p * D / 2) pairs turn at rope_theta^(-2i/D) / factor, the rest do
    // not turn. p = 1 with no factor is plain RoPE and is read as such.
    r.rotary_dim = ctx.head_dim;
    kernels::RopeScaling& s = r.scaling;
    s.factor = d.number("factor");
    check_positive(d, "factor", s.factor);
    if ((partial && *partial != 1.0) || (s.factor && *s.factor != 1.0)) {
      s.type = kernels::RopeType::kProportional;
      if (partial && *partial != 1.0) s.partial_rotary_factor = partial;
      if (s.factor && *s.factor == 1.0) s.factor.reset();
    } else {
      s.factor.reset();
    }
    try {
      kernels::validate(s, r.rotary_dim, r.base, "hf");
    } catch (const std::invalid_argument& e) {
      rethrow_at(d, e);
    }
  } else {
    if (ctx.rotary_dim) {
      r.rotary_dim = *ctx.rotary_dim;
    } else {
      // Python's int(head_dim * partial_rotary_factor): truncation.
      r.rotary_dim = static_cast<int64_t>(static_cast<double>(ctx.head_dim) * partial.value_or(1.0));
    }
    if (r.rotary_dim < 2 || r.rotary_dim % 2 != 0) {
      fail_config(d.source(), "the rotary dimension must be even and >= 2, got ", r.rotary_dim, " (head_dim ",
                  ctx.head_dim, partial ? " * partial_rotary_factor " : "", partial ? std::to_string(*partial) : "",
                  ")");
    }
    kernels::RopeScaling& s = r.scaling;
    s.type = kernels::parse_rope_type(type, "hf");
    using kernels::RopeType;
    const RopeType t = s.type;
    const bool uses_factor = t != RopeType::kDefault;
    if (uses_factor) {
      s.factor = d.number("factor");
      check_positive(d, "factor", s.factor);
    }
    // The pretraining length: top level first (Phi-3), then the dict, then max_position_embeddings.
    if (t == RopeType::kYarn || t == RopeType::kLongrope || t == RopeType::kLlama3) {
      const std::optional<int64_t> inner = d.integer("original_max_position_embeddings");
      check_length(d, "original_max_position_embeddings", inner);
      s.original_max_position_embeddings = ctx.top_original ? ctx.top_original : inner;
      if (!s.original_max_position_embeddings) s.original_max_position_embeddings = ctx.max_position_embeddings;
      if (!s.original_max_position_embeddings) {
        d.fail("original_max_position_embeddings",
               "is required for rope_type '", type, "' (here, or max_position_embeddings at the top level)");
      }
    }
    if (t == RopeType::kDynamic) {
      if (!ctx.max_position_embeddings) {
        ctx.top->fail("max_position_embeddings", "is required for rope_type 'dynamic' (its original length)");
      }
      s.original_max_position_embeddings = ctx.max_position_embeddings;
    }
    if (t == RopeType::kYarn) {
      s.beta_fast = d.number("beta_fast");
      s.beta_slow = d.number("beta_slow");
      check_positive(d, "beta_fast", s.beta_fast);
      check_positive(d, "beta_slow", s.beta_slow);
      // HF warns only when beta_fast < beta_slow, and computes a reversed ramp then.
      if (s.beta_fast.value_or(32.0) < s.beta_slow.value_or(1.0)) {
        d.fail("beta_fast", "must be >= beta_slow (", s.beta_slow.value_or(1.0), "), got ", s.beta_fast.value_or(32.0));
      }
      s.mscale = d.number("mscale");
      s.mscale_all_dim = d.number("mscale_all_dim");
      s.truncate = d.boolean("truncate");
    }
    if (t == RopeType::kYarn || t == RopeType::kLongrope) {
      s.attention_factor = d.number("attention_factor");
      check_positive(d, "attention_factor", s.attention_factor);
    }
    if (t == RopeType::kLongrope) {
      if (!d.has("short_factor")) d.fail("short_factor", "is required for rope_type 'longrope'");
      if (!d.has("long_factor")) d.fail("long_factor", "is required for rope_type 'longrope'");
      s.short_factor = d.numbers("short_factor");
      s.long_factor = d.numbers("long_factor");
      if (ctx.top_original) {
        // Phi-3: the attention factor follows max_position_embeddings / original.
        s.factor.reset();
        s.max_position_embeddings = ctx.max_position_embeddings;
      } else if (!s.factor && !s.attention_factor) {
        s.max_position_embeddings = ctx.max_position_embeddings;
      }
    }
    if (t == RopeType::kLlama3) {
      s.low_freq_factor = d.number("low_freq_factor");
      s.high_freq_factor = d.number("high_freq_factor");
    }
    if (uses_factor && t != RopeType::kLongrope && !s.factor) {
      d.fail("factor", "is required for rope_type '", type, "'");
    }
    try {
      kernels::validate(s, r.rotary_dim, r.base, "hf");
    } catch (const std::invalid_argument& e) {
      rethrow_at(d, e);
    }
  }

  r.mrope_section = d.integers("mrope_section");
  r.mrope_interleaved = d.boolean("mrope_interleaved").value_or(false);
  if (!r.mrope_section.empty()) {
    int64_t sum = 0;
    for (int64_t v : r.mrope_section) {
      if (v < 0) d.fail("mrope_section", "must hold sizes >= 0, got ", show(d.json().at("mrope_section")));
      sum += v;
    }
    if (r.mrope_section.size() != 3 || sum != r.rotary_dim / 2) {
      d.fail("mrope_section", "must hold 3 sizes (t, h, w) summing to rotary_dim/2 = ", r.rotary_dim / 2, ", got ",
             show(d.json().at("mrope_section")));
    }
  } else if (d.has("mrope_interleaved") && r.mrope_interleaved) {
    d.fail("mrope_interleaved", "needs mrope_section");
  }
  return r;
}

}  // namespace posenc::hf::detail
