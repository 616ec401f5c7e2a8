// RoPE frequencies and the Hugging Face context-extension scalings. Every
// formula is a transcription of transformers' modeling_rope_utils.py
// (_compute_*_parameters), evaluated in long double and rounded once; the
// choices where Hugging Face versions differ are listed in docs/rope.md.
#include "posenc/kernels/rope_scaling.h"

#include <algorithm>
#include <cmath>
#include <span>
#include <string>

#include "posenc/error.h"

namespace posenc::kernels {
namespace {

using Real = long double;

constexpr Real kTwoPi = 6.283185307179586476925286766559005768L;

// The Hugging Face keys, in the order of RopeScaling's fields (the order in
// which an unused key is reported).
enum Key : unsigned {
  kFactor = 1u << 0,
  kOriginalMax = 1u << 1,
  kMaxPositions = 1u << 2,
  kBetaFast = 1u << 3,
  kBetaSlow = 1u << 4,
  kMscale = 1u << 5,
  kMscaleAllDim = 1u << 6,
  kTruncate = 1u << 7,
  kAttentionFactor = 1u << 8,
  kShortFactor = 1u << 9,
  kLongFactor = 1u << 10,
  kLowFreqFactor = 1u << 11,
  kHighFreqFactor = 1u << 12,
  kPartialRotaryFactor = 1u << 13,
};

struct KeyName {
  Key key;
  const char* name;
};

constexpr KeyName kKeys[] = {
    {kFactor, "factor"},
    {kOriginalMax, "original_max_position_embeddings"},
    {kMaxPositions, "max_position_embeddings"},
    {kBetaFast, "beta_fast"},
    {kBetaSlow, "beta_slow"},
    {kMscale, "mscale"},
    {kMscaleAllDim, "mscale_all_dim"},
    {kTruncate, "truncate"},
    {kAttentionFactor, "attention_factor"},
    {kShortFactor, "short_factor"},
    {kLongFactor, "long_factor"},
    {kLowFreqFactor, "low_freq_factor"},
    {kHighFreqFactor, "high_freq_factor"},
    {kPartialRotaryFactor, "partial_rotary_factor"},
};

bool is_set(const RopeScaling& s, Key key) {
  switch (key) {
    case kFactor: return s.factor.has_value();
    case kOriginalMax: return s.original_max_position_embeddings.has_value();
    case kMaxPositions: return s.max_position_embeddings.has_value();
    case kBetaFast: return s.beta_fast.has_value();
    case kBetaSlow: return s.beta_slow.has_value();
    case kMscale: return s.mscale.has_value();
    case kMscaleAllDim: return s.mscale_all_dim.has_value();
    case kTruncate: return s.truncate.has_value();
    case kAttentionFactor: return s.attention_factor.has_value();
    case kShortFactor: return !s.short_factor.empty();
    case kLongFactor: return !s.long_factor.empty();
    case kLowFreqFactor: return s.low_freq_factor.has_value();
    case kHighFreqFactor: return s.high_freq_factor.has_value();
    case kPartialRotaryFactor: return s.partial_rotary_factor.has_value();
  }
  return false;
}

unsigned keys_used_by(RopeType type) {
  switch (type) {
    case RopeType::kDefault: return 0;
    case RopeType::kLinear:
    case RopeType::kNtk: return kFactor;
    case RopeType::kDynamic: return kFactor | kOriginalMax;
    case RopeType::kYarn:
      return kFactor | kOriginalMax | kMaxPositions | kBetaFast | kBetaSlow | kMscale | kMscaleAllDim | kTruncate |
             kAttentionFactor;
    case RopeType::kLongrope:
      return kFactor | kOriginalMax | kMaxPositions | kAttentionFactor | kShortFactor | kLongFactor;
    case RopeType::kLlama3: return kFactor | kOriginalMax | kLowFreqFactor | kHighFreqFactor;
    case RopeType::kProportional: return kFactor | kPartialRotaryFactor;
  }
  return 0;
}

void require_key(bool present, const char* op, RopeType type, const char* what) {
  require(present, op, rope_type_name(type), " needs ", what);
}

void require_finite_positive(const std::optional<double>& v, const char* op, const char* name) {
  if (v) require(std::isfinite(*v) && *v > 0, op, name, " must be finite and > 0, got ", *v);
}

void require_finite_nonnegative(const std::optional<double>& v, const char* op, const char* name) {
  if (v) require(std::isfinite(*v) && *v >= 0, op, name, " must be finite and >= 0, got ", *v);
}

void require_length_positive(const std::optional<int64_t>& v, const char* op, const char* name) {
  if (v) require(*v >= 1, op, name, " must be positive, got ", *v);
}

void require_factor_list(const std::vector<double>& values, int64_t dim, const char* op, const char* name) {
  require(static_cast<int64_t>(values.size()) == dim / 2, op, "longrope ", name, " must have dim/2 = ", dim / 2,
          " values, got ", values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    require(std::isfinite(values[i]) && values[i] > 0, op, "longrope ", name, "[", i,
            "] must be finite and > 0, got ", values[i]);
  }
}

// ---------------------------------------------------------------------------
// The formulas. i runs over [0, d/2); every intermediate is long double.

// base^(-2i/d), the unscaled RoFormer spectrum.
Real default_inv_freq(int64_t i, int64_t dim, Real base) {
  return powl(base, -2.0L * static_cast<Real>(i) / static_cast<Real>(dim));
}

std::vector<double> spectrum(int64_t dim, Real base) {
  std::vector<double> out(static_cast<size_t>(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i) {
    out[static_cast<size_t>(i)] = static_cast<double>(default_inv_freq(i, dim, base));
  }
  return out;
}

// NTK-aware base change: base * factor^(d/(d-2)), so the lowest frequency
// is interpolated by exactly `factor` and the highest is kept.
Real ntk_base(Real base, Real factor, int64_t dim) {
  return base * powl(factor, static_cast<Real>(dim) / static_cast<Real>(dim - 2));
}

// YaRN's get_mscale: 0.1 * m * ln(s) + 1 for s > 1, else 1.
Real yarn_get_mscale(Real scale, Real m) { return scale <= 1 ? 1.0L : 0.1L * m * logl(scale) + 1.0L; }

// The (fractional) rotary index at which a wavelength makes num_rotations
// turns over the original context L0.
Real yarn_correction_dim(Real num_rotations, int64_t dim, Real base, Real original) {
  return static_cast<Real>(dim) * logl(original / (num_rotations * kTwoPi)) / (2.0L * logl(base));
}

RopeFrequencies yarn(int64_t dim, Real base, const RopeScaling& s) {
  const Real original = static_cast<Real>(*s.original_max_position_embeddings);
  // transformers v5: `factor` when given, else max_position_embeddings / L0.
  const Real factor = s.factor ? static_cast<Real>(*s.factor)
                               : static_cast<Real>(*s.max_position_embeddings) / original;
  RopeFrequencies out;
  if (s.attention_factor) {
    out.attention_factor = *s.attention_factor;
  } else if (s.mscale.value_or(0.0) != 0.0 && s.mscale_all_dim.value_or(0.0) != 0.0) {
    // Python truthiness in HF: a zero mscale counts as absent.
    out.attention_factor =
        static_cast<double>(yarn_get_mscale(factor, *s.mscale) / yarn_get_mscale(factor, *s.mscale_all_dim));
  } else {
    out.attention_factor = static_cast<double>(yarn_get_mscale(factor, 1.0L));
  }

  Real low = yarn_correction_dim(s.beta_fast.value_or(32.0), dim, base, original);
  Real high = yarn_correction_dim(s.beta_slow.value_or(1.0), dim, base, original);
  if (s.truncate.value_or(true)) {
    low = floorl(low);
    high = ceill(high);
  }
  low = std::max(low, 0.0L);
  high = std::min(high, static_cast<Real>(dim - 1));
  if (low == high) high += 0.001L;  // HF's guard against a zero-width ramp

  out.inv_freq.resize(static_cast<size_t>(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i) {
    const Real ramp = std::clamp((static_cast<Real>(i) - low) / (high - low), 0.0L, 1.0L);
    const Real extrapolation_factor = 1.0L - ramp;
    const Real pos_freq = powl(base, 2.0L * static_cast<Real>(i) / static_cast<Real>(dim));
    const Real extrapolation = 1.0L / pos_freq;
    const Real interpolation = 1.0L / (factor * pos_freq);
    out.inv_freq[static_cast<size_t>(i)] = static_cast<double>(
        interpolation * (1.0L - extrapolation_factor) + extrapolation * extrapolation_factor);
  }
  return out;
}

RopeFrequencies longrope(int64_t dim, Real base, const RopeScaling& s, std::optional<int64_t> seq_len) {
  const int64_t original = *s.original_max_position_embeddings;
  RopeFrequencies out;
  if (s.attention_factor) {
    out.attention_factor = *s.attention_factor;
  } else {
    const Real factor = s.factor ? static_cast<Real>(*s.factor)
                                 : static_cast<Real>(*s.max_position_embeddings) / static_cast<Real>(original);
    out.attention_factor =
        factor <= 1 ? 1.0 : static_cast<double>(sqrtl(1.0L + logl(factor) / logl(static_cast<Real>(original))));
  }
  const std::vector<double>& ext = seq_len && *seq_len > original ? s.long_factor : s.short_factor;
  out.inv_freq.resize(static_cast<size_t>(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i) {
    const Real pos_freq = powl(base, 2.0L * static_cast<Real>(i) / static_cast<Real>(dim));
    out.inv_freq[static_cast<size_t>(i)] =
        static_cast<double>(1.0L / (static_cast<Real>(ext[static_cast<size_t>(i)]) * pos_freq));
  }
  return out;
}

RopeFrequencies llama3(int64_t dim, Real base, const RopeScaling& s) {
  const Real factor = *s.factor;
  const Real low = *s.low_freq_factor;
  const Real high = *s.high_freq_factor;
  const Real original = static_cast<Real>(*s.original_max_position_embeddings);
  const Real low_freq_wavelen = original / low;
  const Real high_freq_wavelen = original / high;
  RopeFrequencies out;
  out.inv_freq.resize(static_cast<size_t>(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i) {
    const Real inv = default_inv_freq(i, dim, base);
    const Real wavelen = kTwoPi / inv;
    Real scaled;
    // HF's band tests, in its order: long wavelengths first.
    if (wavelen > low_freq_wavelen) {
      scaled = inv / factor;
    } else if (wavelen < high_freq_wavelen) {
      scaled = inv;
    } else {
      const Real smooth = (original / wavelen - low) / (high - low);
      scaled = (1.0L - smooth) * inv / factor + smooth * inv;
    }
    out.inv_freq[static_cast<size_t>(i)] = static_cast<double>(scaled);
  }
  return out;
}

// Gemma 4: the first floor(p*d/2) pairs turn at base^(-2i/d) / factor (the
// exponent over the whole head), the rest have frequency 0. Python's
// `p * d // 2` is floor of the double product over 2, reproduced as such.
RopeFrequencies proportional(int64_t dim, Real base, const RopeScaling& s) {
  const double p = s.partial_rotary_factor.value_or(1.0);
  const auto turning = static_cast<int64_t>(std::floor(p * static_cast<double>(dim) / 2.0));
  const Real factor = s.factor.value_or(1.0);
  RopeFrequencies out;
  out.inv_freq.assign(static_cast<size_t>(dim / 2), 0.0);
  for (int64_t i = 0; i < std::min(turning, dim / 2); ++i) {
    out.inv_freq[static_cast<size_t>(i)] = static_cast<double>(default_inv_freq(i, dim, base) / factor);
  }
  return out;
}

}  // namespace

RopeType parse_rope_type(std::string_view name, const char* op) {
  for (RopeType type : {RopeType::kDefault, RopeType::kLinear, RopeType::kNtk, RopeType::kDynamic, RopeType::kYarn,
                        RopeType::kLongrope, RopeType::kLlama3, RopeType::kProportional}) {
    if (rope_type_name(type) == name) return type;
  }
  fail_argument(op,
                "rope_type must be one of default, linear, ntk, dynamic, yarn, longrope, llama3, proportional, got '",
                name, "'");
}

std::string_view rope_type_name(RopeType type) noexcept {
  switch (type) {
    case RopeType::kDefault: return "default";
    case RopeType::kLinear: return "linear";
    case RopeType::kNtk: return "ntk";
    case RopeType::kDynamic: return "dynamic";
    case RopeType::kYarn: return "yarn";
    case RopeType::kLongrope: return "longrope";
    case RopeType::kLlama3: return "llama3";
    case RopeType::kProportional: return "proportional";
  }
  return "?";
}

bool is_unscaled(const RopeScaling& s) noexcept {
  if (s.type != RopeType::kDefault) return false;
  for (const KeyName& k : kKeys) {
    if (is_set(s, k.key)) return false;
  }
  return true;
}

void validate(const RopeScaling& s, int64_t dim, double base, const char* op) {
  require(dim >= 1, op, "dim must be positive, got ", dim);
  require(dim % 2 == 0, op, "dim must be even, got ", dim);
  require(std::isfinite(base) && base > 0, op, "base must be finite and > 0, got ", base);

  const RopeType type = s.type;
  const unsigned used = keys_used_by(type);
  for (const KeyName& k : kKeys) {
    require(!is_set(s, k.key) || (used & k.key) != 0, op, "key '", k.name, "' is not used by rope_type '",
            rope_type_name(type), "'");
  }

  // Required keys, then ranges, each in the order of the struct's fields.
  switch (type) {
    case RopeType::kDefault: break;
    case RopeType::kLinear:
    case RopeType::kNtk: require_key(s.factor.has_value(), op, type, "factor"); break;
    case RopeType::kDynamic:
      require_key(s.factor.has_value(), op, type, "factor");
      require_key(s.original_max_position_embeddings.has_value(), op, type, "original_max_position_embeddings");
      break;
    case RopeType::kYarn:
      require_key(s.factor || s.max_position_embeddings, op, type, "factor (or max_position_embeddings)");
      require_key(s.original_max_position_embeddings.has_value(), op, type, "original_max_position_embeddings");
      break;
    case RopeType::kLongrope:
      require_key(s.factor || s.max_position_embeddings || s.attention_factor, op, type,
                  "factor, max_position_embeddings or attention_factor");
      require_key(s.original_max_position_embeddings.has_value(), op, type, "original_max_position_embeddings");
      require_key(!s.short_factor.empty(), op, type, "short_factor");
      require_key(!s.long_factor.empty(), op, type, "long_factor");
      break;
    case RopeType::kLlama3:
      require_key(s.factor.has_value(), op, type, "factor");
      require_key(s.original_max_position_embeddings.has_value(), op, type, "original_max_position_embeddings");
      require_key(s.low_freq_factor.has_value(), op, type, "low_freq_factor");
      require_key(s.high_freq_factor.has_value(), op, type, "high_freq_factor");
      break;
    case RopeType::kProportional: break;
  }

  require_finite_positive(s.factor, op, "factor");
  require_length_positive(s.original_max_position_embeddings, op, "original_max_position_embeddings");
  require_length_positive(s.max_position_embeddings, op, "max_position_embeddings");
  require_finite_positive(s.beta_fast, op, "beta_fast");
  require_finite_positive(s.beta_slow, op, "beta_slow");
  require_finite_nonnegative(s.mscale, op, "mscale");
  require_finite_nonnegative(s.mscale_all_dim, op, "mscale_all_dim");
  require_finite_positive(s.attention_factor, op, "attention_factor");
  if (!s.short_factor.empty()) require_factor_list(s.short_factor, dim, op, "short_factor");
  if (!s.long_factor.empty()) require_factor_list(s.long_factor, dim, op, "long_factor");
  require_finite_positive(s.low_freq_factor, op, "low_freq_factor");
  if (s.high_freq_factor) {
    // Equal factors would divide by zero in the smooth band.
    require(std::isfinite(*s.high_freq_factor) && *s.high_freq_factor > *s.low_freq_factor, op,
            "high_freq_factor must be finite and greater than low_freq_factor (", *s.low_freq_factor, "), got ",
            *s.high_freq_factor);
  }
  if (s.partial_rotary_factor) {
    require(std::isfinite(*s.partial_rotary_factor) && *s.partial_rotary_factor > 0 && *s.partial_rotary_factor <= 1,
            op, "partial_rotary_factor must be in (0, 1], got ", *s.partial_rotary_factor);
  }

  // Conditions between keys and the rotary shape.
  if (type == RopeType::kNtk || type == RopeType::kDynamic) {
    // The exponent d/(d-2) of the base change.
    require(dim > 2, op, "dim must be > 2 for rope_type '", rope_type_name(type), "', got ", dim);
  }
  if (type == RopeType::kYarn) {
    const double beta_fast = s.beta_fast.value_or(32.0);
    const double beta_slow = s.beta_slow.value_or(1.0);
    // Equal betas are a released model's choice (HF accepts them): the ramp
    // then has width 0, widened to 0.001 below as HF does. beta_fast < beta_slow
    // would reverse the ramp, which HF only warns about and computes wrong.
    require(beta_fast >= beta_slow, op, "beta_fast must be at least beta_slow (", beta_slow, "), got ", beta_fast);
    // The correction range divides by ln(base).
    require(base > 1, op, "base must be > 1 for rope_type 'yarn', got ", base);
  }
  if (type == RopeType::kLongrope && !s.attention_factor && *s.original_max_position_embeddings == 1) {
    // sqrt(1 + ln(s)/ln(L0)) divides by ln(L0) whenever s > 1.
    const double factor = s.factor ? *s.factor : static_cast<double>(*s.max_position_embeddings);
    require(factor <= 1, op, "original_max_position_embeddings must be > 1 for the longrope attention factor, got 1");
  }
}

RopeFrequencies rope_frequencies(int64_t dim, double base, const RopeScaling& s, std::optional<int64_t> seq_len,
                                 const char* op) {
  validate(s, dim, base, op);
  if (seq_len) require(*seq_len >= 1, op, "seq_len must be positive, got ", *seq_len);

  const Real b = base;
  RopeFrequencies out;
  switch (s.type) {
    case RopeType::kDefault: out.inv_freq = spectrum(dim, b); break;
    case RopeType::kLinear:
      out.inv_freq.resize(static_cast<size_t>(dim / 2));
      for (int64_t i = 0; i < dim / 2; ++i) {
        out.inv_freq[static_cast<size_t>(i)] =
            static_cast<double>(default_inv_freq(i, dim, b) / static_cast<Real>(*s.factor));
      }
      break;
    case RopeType::kNtk: out.inv_freq = spectrum(dim, ntk_base(b, *s.factor, dim)); break;
    case RopeType::kDynamic: {
      const int64_t original = *s.original_max_position_embeddings;
      if (seq_len && *seq_len > original) {
        // HF: factor' = factor * L / L0 - (factor - 1), the NTK base for the current length.
        const Real factor = *s.factor;
        const Real grown = factor * static_cast<Real>(*seq_len) / static_cast<Real>(original) - (factor - 1.0L);
        out.inv_freq = spectrum(dim, ntk_base(b, grown, dim));
      } else {
        out.inv_freq = spectrum(dim, b);  // factor' = 1: the default spectrum, exactly
      }
      break;
    }
    case RopeType::kYarn: out = yarn(dim, b, s); break;
    case RopeType::kLongrope: out = longrope(dim, b, s, seq_len); break;
    case RopeType::kLlama3: out = llama3(dim, b, s); break;
    case RopeType::kProportional: out = proportional(dim, b, s); break;
  }
  return out;
}

}  // namespace posenc::kernels
