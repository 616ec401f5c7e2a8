// RoPE frequencies and scalings against plain long-double transcriptions of
// Hugging Face transformers' modeling_rope_utils.py (_compute_*_parameters),
// written here without sharing code with src/kernels/rope_scaling.cpp, plus
// the properties each scaling promises (the messages: test_rope_scaling_errors.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <numbers>
#include <optional>
#include <string>
#include <vector>

#include "check.h"
#include "posenc/kernels/rope_scaling.h"

namespace posenc::kernels {
namespace {

using test::expect_error;
using LD = long double;

// Both sides evaluate in long double and round once to double; their long
// double results differ by a few long double ulps (~1e-19 relative), which can
// flip the final rounding by one double ulp (<= 2.2e-16 relative).
constexpr double kRelTolerance = 4e-16;

constexpr LD kPi = 3.141592653589793238462643383279502884L;

std::string describe(int64_t dim, double base, const RopeScaling& s, std::optional<int64_t> seq_len) {
  std::string out = "type=" + std::string(rope_type_name(s.type)) + " dim=" + std::to_string(dim) +
                    " base=" + std::to_string(base);
  if (s.factor) out += " factor=" + std::to_string(*s.factor);
  if (s.original_max_position_embeddings) out += " L0=" + std::to_string(*s.original_max_position_embeddings);
  if (s.max_position_embeddings) out += " max=" + std::to_string(*s.max_position_embeddings);
  if (seq_len) out += " seq_len=" + std::to_string(*seq_len);
  return out;
}

// Largest |a - b| / |b| over the vectors.
double max_rel_diff(const std::vector<double>& a, const std::vector<LD>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0.0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    worst = std::max(worst, static_cast<double>(std::fabs((static_cast<LD>(a[i]) - b[i]) / b[i])));
  }
  return worst;
}

// ---------------------------------------------------------------------------
// References: the HF code line by line, torch.arange(0, dim, 2) as 2i.

struct Ref {
  std::vector<LD> inv_freq;
  LD attention_factor = 1.0L;
};

// _compute_default_rope_parameters: 1 / base^(arange(0, d, 2) / d).
std::vector<LD> ref_default(int64_t dim, LD base) {
  std::vector<LD> inv;
  for (int64_t k = 0; k < dim; k += 2) inv.push_back(1.0L / powl(base, static_cast<LD>(k) / dim));
  return inv;
}

// _compute_linear_scaling_rope_parameters: inv_freq /= factor.
std::vector<LD> ref_linear(int64_t dim, LD base, LD factor) {
  std::vector<LD> inv = ref_default(dim, base);
  for (LD& v : inv) v /= factor;
  return inv;
}

// _compute_ntk_parameters (older HF): base = base * factor ** (dim / (dim - 2)).
std::vector<LD> ref_ntk(int64_t dim, LD base, LD factor) {
  return ref_default(dim, base * powl(factor, static_cast<LD>(dim) / (dim - 2)));
}

// _compute_dynamic_ntk_parameters, with max_position_embeddings = L0.
std::vector<LD> ref_dynamic(int64_t dim, LD base, LD factor, int64_t original, std::optional<int64_t> seq_len) {
  const LD len = seq_len && *seq_len > original ? *seq_len : original;
  const LD new_base = base * powl((factor * len / original) - (factor - 1), static_cast<LD>(dim) / (dim - 2));
  return ref_default(dim, new_base);
}

LD get_mscale(LD scale, LD mscale = 1.0L) {
  if (scale <= 1) return 1.0L;
  return 0.1L * mscale * logl(scale) + 1.0L;
}

// _compute_yarn_parameters (transformers v5: factor from the config, else max/original).
Ref ref_yarn(int64_t dim, LD base, const RopeScaling& s) {
  const LD original = *s.original_max_position_embeddings;
  const LD factor = s.factor ? static_cast<LD>(*s.factor) : *s.max_position_embeddings / original;
  Ref r;
  if (s.attention_factor) {
    r.attention_factor = *s.attention_factor;
  } else if (s.mscale && *s.mscale != 0 && s.mscale_all_dim && *s.mscale_all_dim != 0) {
    r.attention_factor = get_mscale(factor, *s.mscale) / get_mscale(factor, *s.mscale_all_dim);
  } else {
    r.attention_factor = get_mscale(factor);
  }
  const LD beta_fast = s.beta_fast ? *s.beta_fast : 32;
  const LD beta_slow = s.beta_slow ? *s.beta_slow : 1;
  auto find_correction_dim = [&](LD num_rotations) {
    return (dim * logl(original / (num_rotations * 2 * kPi))) / (2 * logl(base));
  };
  LD low = find_correction_dim(beta_fast);
  LD high = find_correction_dim(beta_slow);
  if (s.truncate.value_or(true)) {
    low = floorl(low);
    high = ceill(high);
  }
  low = std::max(low, 0.0L);
  high = std::min(high, static_cast<LD>(dim - 1));
  if (low == high) high += 0.001L;
  for (int64_t k = 0, i = 0; k < dim; k += 2, ++i) {
    const LD pos_freqs = powl(base, static_cast<LD>(k) / dim);
    const LD inv_freq_extrapolation = 1.0L / pos_freqs;
    const LD inv_freq_interpolation = 1.0L / (factor * pos_freqs);
    LD linear_func = (i - low) / (high - low);
    const LD ramp = std::min(std::max(linear_func, 0.0L), 1.0L);
    const LD extrapolation_factor = 1 - ramp;
    r.inv_freq.push_back(inv_freq_interpolation * (1 - extrapolation_factor) +
                         inv_freq_extrapolation * extrapolation_factor);
  }
  return r;
}

// _compute_longrope_parameters (transformers >= 4.48).
Ref ref_longrope(int64_t dim, LD base, const RopeScaling& s, std::optional<int64_t> seq_len) {
  const int64_t original = *s.original_max_position_embeddings;
  Ref r;
  if (s.attention_factor) {
    r.attention_factor = *s.attention_factor;
  } else {
    const LD factor = s.factor ? static_cast<LD>(*s.factor) : static_cast<LD>(*s.max_position_embeddings) / original;
    r.attention_factor = factor <= 1 ? 1.0L : sqrtl(1 + logl(factor) / logl(static_cast<LD>(original)));
  }
  const std::vector<double>& ext = seq_len && *seq_len > original ? s.long_factor : s.short_factor;
  for (int64_t k = 0, i = 0; k < dim; k += 2, ++i) {
    r.inv_freq.push_back(1.0L / (ext[i] * powl(base, static_cast<LD>(k) / dim)));
  }
  return r;
}

// _compute_llama3_parameters.
std::vector<LD> ref_llama3(int64_t dim, LD base, LD factor, LD low_freq_factor, LD high_freq_factor,
                           LD old_context_len) {
  const std::vector<LD> inv_freq = ref_default(dim, base);
  const LD low_freq_wavelen = old_context_len / low_freq_factor;
  const LD high_freq_wavelen = old_context_len / high_freq_factor;
  std::vector<LD> out;
  for (LD inv : inv_freq) {
    const LD wavelen = 2 * kPi / inv;
    LD llama = wavelen > low_freq_wavelen ? inv / factor : inv;
    const LD smooth_factor = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
    const LD smoothed = (1 - smooth_factor) * llama / factor + smooth_factor * llama;
    const bool is_medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
    out.push_back(is_medium ? smoothed : llama);
  }
  return out;
}

RopeScaling make(RopeType type) {
  RopeScaling s;
  s.type = type;
  return s;
}

// Deterministic, varied longrope factors in [1, 60].
std::vector<double> longrope_factors(int64_t dim, double seed) {
  std::vector<double> f;
  for (int64_t i = 0; i < dim / 2; ++i) f.push_back(1.0 + std::fmod(seed * (i + 1) * (i + 3), 59.0));
  return f;
}

const int64_t kDims[] = {2, 8, 64, 96, 128, 256};
const double kBases[] = {100.0, 10000.0, 500000.0, 1000000.0};

// ---------------------------------------------------------------------------
// Parsing

TEST(RopeScaling, TypeNamesRoundTrip) {
  for (RopeType t : {RopeType::kDefault, RopeType::kLinear, RopeType::kNtk, RopeType::kDynamic, RopeType::kYarn,
                     RopeType::kLongrope, RopeType::kLlama3, RopeType::kProportional}) {
    EXPECT_EQ(parse_rope_type(rope_type_name(t)), t);
  }
  EXPECT_EQ(rope_type_name(RopeType::kLongrope), "longrope");
  expect_error([] { parse_rope_type("su"); },
               "[rope] rope_type must be one of default, linear, ntk, dynamic, yarn, longrope, llama3, proportional, got 'su'");
  expect_error([] { parse_rope_type("Linear", "mrope"); },
               "[mrope] rope_type must be one of default, linear, ntk, dynamic, yarn, longrope, llama3, proportional, got 'Linear'");
}

// ---------------------------------------------------------------------------
// Each type against its reference

TEST(RopeScaling, DefaultMatchesReference) {
  for (int64_t dim : kDims) {
    for (double base : kBases) {
      const RopeFrequencies f = rope_frequencies(dim, base, make(RopeType::kDefault));
      EXPECT_LE(max_rel_diff(f.inv_freq, ref_default(dim, base)), kRelTolerance) << dim << " " << base;
      EXPECT_EQ(f.attention_factor, 1.0);
      EXPECT_EQ(f.inv_freq[0], 1.0);  // base^0, exactly
    }
  }
}

TEST(RopeScaling, LinearMatchesReference) {
  for (int64_t dim : kDims) {
    for (double base : kBases) {
      for (double factor : {0.5, 1.0, 2.0, 8.0, 32.0}) {
        RopeScaling s = make(RopeType::kLinear);
        s.factor = factor;
        const RopeFrequencies f = rope_frequencies(dim, base, s);
        EXPECT_LE(max_rel_diff(f.inv_freq, ref_linear(dim, base, factor)), kRelTolerance)
            << describe(dim, base, s, {});
        EXPECT_EQ(f.attention_factor, 1.0);
      }
    }
  }
}

// _compute_proportional_rope_parameters (Gemma 4): rope_angles = int(p * D // 2)
// pairs at 1 / base^(arange(0, 2 * rope_angles, 2) / D), zeros after, all / factor.
TEST(RopeScaling, ProportionalMatchesReference) {
  for (int64_t dim : {8, 64, 256, 512}) {
    for (double p : {0.25, 0.4, 0.5, 0.75, 1.0}) {
      for (double factor : {1.0, 2.0, 8.0}) {
        RopeScaling s = make(RopeType::kProportional);
        s.partial_rotary_factor = p;
        s.factor = factor;
        const double base = 1e6;
        const RopeFrequencies f = rope_frequencies(dim, base, s);
        const auto angles = static_cast<int64_t>(std::floor(p * static_cast<double>(dim) / 2.0));
        ASSERT_EQ(static_cast<int64_t>(f.inv_freq.size()), dim / 2);
        std::vector<LD> ref = ref_linear(dim, base, factor);
        ref.resize(static_cast<size_t>(angles));
        std::vector<double> turning(f.inv_freq.begin(), f.inv_freq.begin() + angles);
        EXPECT_LE(max_rel_diff(turning, ref), kRelTolerance) << dim << " p=" << p << " factor=" << factor;
        for (int64_t i = angles; i < dim / 2; ++i) EXPECT_EQ(f.inv_freq[static_cast<size_t>(i)], 0.0) << i;
        EXPECT_EQ(f.attention_factor, 1.0);
      }
    }
  }
  // Gemma 4 as released: head 512, p = 0.25 -> 64 turning pairs, the exponent over 512.
  RopeScaling s = make(RopeType::kProportional);
  s.partial_rotary_factor = 0.25;
  const RopeFrequencies f = rope_frequencies(512, 1e6, s);
  EXPECT_EQ(f.inv_freq[0], 1.0);
  EXPECT_NE(f.inv_freq[63], 0.0);
  EXPECT_EQ(f.inv_freq[64], 0.0);
  // Without partial_rotary_factor it is linear scaling, bit for bit.
  RopeScaling all = make(RopeType::kProportional);
  all.factor = 4.0;
  RopeScaling linear = make(RopeType::kLinear);
  linear.factor = 4.0;
  EXPECT_EQ(rope_frequencies(128, 1e4, all).inv_freq, rope_frequencies(128, 1e4, linear).inv_freq);
}

TEST(RopeScaling, UnscaledMeansDefaultWithNoKey) {
  EXPECT_TRUE(is_unscaled(RopeScaling{}));
  RopeScaling typed = make(RopeType::kLinear);
  EXPECT_FALSE(is_unscaled(typed));
  RopeScaling keyed;  // default type with a stray key: not unscaled (validate refuses it)
  keyed.partial_rotary_factor = 0.5;
  EXPECT_FALSE(is_unscaled(keyed));
  keyed = RopeScaling{};
  keyed.short_factor = {1.0};
  EXPECT_FALSE(is_unscaled(keyed));
}

TEST(RopeScaling, ProportionalValidation) {
  for (double p : {0.0, -0.5, 1.5, std::nan("")}) {
    RopeScaling s = make(RopeType::kProportional);
    s.partial_rotary_factor = p;
    EXPECT_THROW(validate(s, 64, 1e4), std::invalid_argument) << p;
  }
  RopeScaling s = make(RopeType::kProportional);
  s.partial_rotary_factor = 1.5;
  expect_error([&] { validate(s, 64, 1e4); }, "[rope] partial_rotary_factor must be in (0, 1], got 1.5");
  RopeScaling linear = make(RopeType::kLinear);
  linear.factor = 2.0;
  linear.partial_rotary_factor = 0.5;
  expect_error([&] { validate(linear, 64, 1e4); },
               "[rope] key 'partial_rotary_factor' is not used by rope_type 'linear'");
}

TEST(RopeScaling, NtkMatchesReference) {
  for (int64_t dim : kDims) {
    if (dim == 2) continue;  // d/(d-2) needs d > 2
    for (double base : kBases) {
      for (double factor : {0.5, 1.0, 2.0, 4.0, 16.0}) {
        RopeScaling s = make(RopeType::kNtk);
        s.factor = factor;
        const RopeFrequencies f = rope_frequencies(dim, base, s);
        EXPECT_LE(max_rel_diff(f.inv_freq, ref_ntk(dim, base, factor)), kRelTolerance) << describe(dim, base, s, {});
        EXPECT_EQ(f.attention_factor, 1.0);
      }
    }
  }
}

TEST(RopeScaling, DynamicMatchesReferenceAcrossRegimes) {
  for (int64_t dim : {8, 64, 128}) {
    for (double base : kBases) {
      for (double factor : {1.0, 2.0, 4.0}) {
        RopeScaling s = make(RopeType::kDynamic);
        s.factor = factor;
        s.original_max_position_embeddings = 4096;
        for (std::optional<int64_t> seq_len : {std::optional<int64_t>{}, std::optional<int64_t>{1},
                                               std::optional<int64_t>{4095}, std::optional<int64_t>{4096},
                                               std::optional<int64_t>{4097}, std::optional<int64_t>{10000},
                                               std::optional<int64_t>{131072}}) {
          const RopeFrequencies f = rope_frequencies(dim, base, s, seq_len);
          EXPECT_LE(max_rel_diff(f.inv_freq, ref_dynamic(dim, base, factor, 4096, seq_len)), kRelTolerance)
              << describe(dim, base, s, seq_len);
          EXPECT_EQ(f.attention_factor, 1.0);
        }
      }
    }
  }
}

TEST(RopeScaling, DynamicRegimeSwitch) {
  RopeScaling s = make(RopeType::kDynamic);
  s.factor = 2.0;
  s.original_max_position_embeddings = 2048;
  const std::vector<double> plain = rope_frequencies(64, 10000.0, make(RopeType::kDefault)).inv_freq;
  // Up to and at L0 the spectrum is the default one, exactly.
  EXPECT_EQ(rope_frequencies(64, 10000.0, s).inv_freq, plain);
  EXPECT_EQ(rope_frequencies(64, 10000.0, s, 100).inv_freq, plain);
  EXPECT_EQ(rope_frequencies(64, 10000.0, s, 2048).inv_freq, plain);
  // Above it every frequency but the first (base^0 = 1) decreases, more so for longer sequences.
  const std::vector<double> above = rope_frequencies(64, 10000.0, s, 2049).inv_freq;
  const std::vector<double> far = rope_frequencies(64, 10000.0, s, 8192).inv_freq;
  EXPECT_EQ(above[0], 1.0);
  for (size_t i = 1; i < plain.size(); ++i) {
    EXPECT_LT(above[i], plain[i]) << i;
    EXPECT_LT(far[i], above[i]) << i;
  }
  // At L = 2*L0 the grown factor is 2*2 - 1 = 3: static NTK with factor 3.
  RopeScaling ntk = make(RopeType::kNtk);
  ntk.factor = 3.0;
  const std::vector<double> at_twice = rope_frequencies(64, 10000.0, s, 4096).inv_freq;
  const std::vector<double> ntk3 = rope_frequencies(64, 10000.0, ntk).inv_freq;
  for (size_t i = 0; i < ntk3.size(); ++i) EXPECT_NEAR(at_twice[i], ntk3[i], kRelTolerance * ntk3[i]) << i;
}

std::vector<RopeScaling> yarn_cases() {
  std::vector<RopeScaling> cases;
  auto add = [&](double factor, int64_t original, auto&& tweak) {
    RopeScaling s = make(RopeType::kYarn);
    s.factor = factor;
    s.original_max_position_embeddings = original;
    tweak(s);
    cases.push_back(s);
  };
  auto none = [](RopeScaling&) {};
  add(4.0, 32768, none);  // Qwen2.5 YaRN
  add(40.0, 4096, [](RopeScaling& s) {  // DeepSeek-V3
    s.mscale = 1.0;
    s.mscale_all_dim = 1.0;
    s.beta_fast = 32.0;
    s.beta_slow = 1.0;
  });
  add(40.0, 4096, [](RopeScaling& s) {  // DeepSeek-V2
    s.mscale = 0.707;
    s.mscale_all_dim = 0.707;
  });
  add(16.0, 4096, [](RopeScaling& s) {
    s.mscale = 1.0;
    s.mscale_all_dim = 0.5;
  });
  add(8.0, 2048, [](RopeScaling& s) { s.mscale = 2.0; });  // mscale alone: HF ignores it
  add(8.0, 2048, [](RopeScaling& s) {                      // a zero counts as unset (Python truthiness)
    s.mscale = 0.0;
    s.mscale_all_dim = 1.0;
  });
  add(2.0, 8192, [](RopeScaling& s) { s.truncate = false; });   // unrounded ramp ends
  add(32.0, 4096, [](RopeScaling& s) { s.truncate = false; });  // gpt-oss
  add(32.0, 4096, [](RopeScaling& s) {
    s.truncate = false;
    s.beta_fast = 16.0;
    s.beta_slow = 2.0;
  });
  add(4.0, 4096, [](RopeScaling& s) { s.attention_factor = 1.25; });
  add(0.5, 4096, none);  // factor < 1: mscale 1
  add(1.0, 4096, [](RopeScaling& s) {
    s.beta_fast = 64.0;
    s.beta_slow = 0.5;
  });
  add(4.0, 64, none);          // short L0: clamps at 0
  add(4.0, 6, none);           // L0 < 2*pi: low == high == 0, HF's +0.001
  add(4.0, 1000000000, none);  // huge L0: clamps at dim-1
  {
    RopeScaling s = make(RopeType::kYarn);  // factor from max/original (v5 fallback)
    s.original_max_position_embeddings = 4096;
    s.max_position_embeddings = 163840;
    cases.push_back(s);
  }
  return cases;
}

TEST(RopeScaling, YarnMatchesReference) {
  for (int64_t dim : kDims) {
    for (double base : kBases) {
      for (const RopeScaling& s : yarn_cases()) {
        const RopeFrequencies f = rope_frequencies(dim, base, s);
        const Ref r = ref_yarn(dim, base, s);
        EXPECT_LE(max_rel_diff(f.inv_freq, r.inv_freq), kRelTolerance) << describe(dim, base, s, {});
        EXPECT_NEAR(f.attention_factor, static_cast<double>(r.attention_factor), kRelTolerance)
            << describe(dim, base, s, {});
      }
    }
  }
}

TEST(RopeScaling, YarnAttentionFactorGoldenValues) {
  RopeScaling s = make(RopeType::kYarn);
  s.original_max_position_embeddings = 32768;
  s.factor = 4.0;
  // The YaRN paper's sqrt(1/t) = 0.1 ln(s) + 1 at s = 4.
  EXPECT_DOUBLE_EQ(rope_frequencies(128, 1000000.0, s).attention_factor, 1.1386294361119891);
  s.factor = 40.0;
  EXPECT_DOUBLE_EQ(rope_frequencies(128, 1000000.0, s).attention_factor, 1.3688879454113936);
  // DeepSeek-V3: mscale == mscale_all_dim, so the two corrections cancel.
  s.mscale = 1.0;
  s.mscale_all_dim = 1.0;
  EXPECT_EQ(rope_frequencies(64, 10000.0, s).attention_factor, 1.0);
  // factor <= 1 never scales.
  RopeScaling small = make(RopeType::kYarn);
  small.original_max_position_embeddings = 4096;
  small.factor = 0.75;
  EXPECT_EQ(rope_frequencies(64, 10000.0, small).attention_factor, 1.0);
}

TEST(RopeScaling, YarnFrequenciesLieBetweenInterpolationAndOriginal) {
  for (const RopeScaling& s : yarn_cases()) {
    if (!s.factor || *s.factor < 1.0) continue;
    const double factor = *s.factor;
    const std::vector<double> plain = rope_frequencies(128, 10000.0, make(RopeType::kDefault)).inv_freq;
    const std::vector<double> yarn = rope_frequencies(128, 10000.0, s).inv_freq;
    for (size_t i = 0; i < plain.size(); ++i) {
      // 1 ulp slack: both ends are rounded from long double too.
      EXPECT_LE(yarn[i], plain[i] * (1 + kRelTolerance)) << describe(128, 10000.0, s, {}) << " i=" << i;
      EXPECT_GE(yarn[i], plain[i] / factor * (1 - kRelTolerance)) << describe(128, 10000.0, s, {}) << " i=" << i;
    }
  }
  // Qwen2.5 shape: the fastest frequencies extrapolate (kept), the slowest interpolate (divided).
  RopeScaling s = make(RopeType::kYarn);
  s.factor = 4.0;
  s.original_max_position_embeddings = 32768;
  const std::vector<double> plain = rope_frequencies(128, 1000000.0, make(RopeType::kDefault)).inv_freq;
  const std::vector<double> yarn = rope_frequencies(128, 1000000.0, s).inv_freq;
  EXPECT_NEAR(yarn[0], plain[0], kRelTolerance * plain[0]);
  EXPECT_NEAR(yarn.back(), plain.back() / 4.0, kRelTolerance * plain.back());
}

TEST(RopeScaling, YarnFactorFallbackAndTruncate) {
  RopeScaling from_max = make(RopeType::kYarn);
  from_max.original_max_position_embeddings = 4096;
  from_max.max_position_embeddings = 16384;
  RopeScaling explicit_factor = make(RopeType::kYarn);
  explicit_factor.original_max_position_embeddings = 4096;
  explicit_factor.factor = 4.0;
  const RopeFrequencies a = rope_frequencies(64, 10000.0, from_max);
  const RopeFrequencies b = rope_frequencies(64, 10000.0, explicit_factor);
  EXPECT_EQ(a.inv_freq, b.inv_freq);
  EXPECT_EQ(a.attention_factor, b.attention_factor);
  // Given factor wins over max/original (transformers v5).
  explicit_factor.max_position_embeddings = 131072;
  EXPECT_EQ(rope_frequencies(64, 10000.0, explicit_factor).inv_freq, b.inv_freq);
  // truncate = false keeps the fractional ramp ends: other frequencies inside the ramp.
  explicit_factor.truncate = false;
  const std::vector<double> untruncated = rope_frequencies(64, 10000.0, explicit_factor).inv_freq;
  EXPECT_NE(untruncated, b.inv_freq);
  explicit_factor.truncate = true;  // the default, spelt out
  EXPECT_EQ(rope_frequencies(64, 10000.0, explicit_factor).inv_freq, b.inv_freq);
}

TEST(RopeScaling, LongropeMatchesReferenceAcrossRegimes) {
  for (int64_t dim : kDims) {
    for (double base : {10000.0, 500000.0}) {
      RopeScaling s = make(RopeType::kLongrope);
      s.short_factor = longrope_factors(dim, 0.37);
      s.long_factor = longrope_factors(dim, 1.93);
      s.original_max_position_embeddings = 4096;
      std::vector<RopeScaling> variants;
      RopeScaling v = s;
      v.max_position_embeddings = 131072;  // Phi-3: s = 32
      variants.push_back(v);
      v = s;
      v.factor = 8.0;
      variants.push_back(v);
      v.max_position_embeddings = 131072;  // factor wins
      variants.push_back(v);
      v = s;
      v.factor = 1.0;  // no scaling of the magnitude
      variants.push_back(v);
      v = s;
      v.attention_factor = 1.3;
      variants.push_back(v);
      for (const RopeScaling& c : variants) {
        for (std::optional<int64_t> seq_len : {std::optional<int64_t>{}, std::optional<int64_t>{1},
                                               std::optional<int64_t>{4096}, std::optional<int64_t>{4097},
                                               std::optional<int64_t>{131072}}) {
          const RopeFrequencies f = rope_frequencies(dim, base, c, seq_len);
          const Ref r = ref_longrope(dim, base, c, seq_len);
          EXPECT_LE(max_rel_diff(f.inv_freq, r.inv_freq), kRelTolerance) << describe(dim, base, c, seq_len);
          EXPECT_NEAR(f.attention_factor, static_cast<double>(r.attention_factor), kRelTolerance)
              << describe(dim, base, c, seq_len);
        }
      }
    }
  }
}

TEST(RopeScaling, LongropeSwitchesFactorsAtTheOriginalLength) {
  RopeScaling s = make(RopeType::kLongrope);
  s.short_factor = std::vector<double>(32, 1.0);
  s.long_factor = std::vector<double>(32, 4.0);
  s.original_max_position_embeddings = 4096;
  s.max_position_embeddings = 131072;
  const std::vector<double> plain = rope_frequencies(64, 10000.0, make(RopeType::kDefault)).inv_freq;
  // Short factors of 1 give the default spectrum; long factors of 4 divide it by 4.
  for (std::optional<int64_t> seq_len : {std::optional<int64_t>{}, std::optional<int64_t>{4096}}) {
    const std::vector<double> f = rope_frequencies(64, 10000.0, s, seq_len).inv_freq;
    for (size_t i = 0; i < plain.size(); ++i) EXPECT_NEAR(f[i], plain[i], kRelTolerance * plain[i]) << i;
  }
  const std::vector<double> f = rope_frequencies(64, 10000.0, s, 4097).inv_freq;
  for (size_t i = 0; i < plain.size(); ++i) EXPECT_NEAR(f[i], plain[i] / 4, kRelTolerance * plain[i]) << i;
  // Phi-3-mini-128k: L0 = 4096, max = 131072, s = 32: sqrt(1 + ln 32 / ln 4096) = sqrt(17/12).
  EXPECT_DOUBLE_EQ(rope_frequencies(64, 10000.0, s).attention_factor, 1.1902380714238083);
  // The attention factor does not depend on the regime.
  EXPECT_EQ(rope_frequencies(64, 10000.0, s, 1).attention_factor,
            rope_frequencies(64, 10000.0, s, 100000).attention_factor);
}

TEST(RopeScaling, Llama3MatchesReference) {
  for (int64_t dim : kDims) {
    for (double base : kBases) {
      for (double factor : {1.0, 8.0, 32.0}) {
        for (auto [low, high] : {std::pair{1.0, 4.0}, std::pair{0.5, 2.0}, std::pair{2.0, 16.0}}) {
          for (int64_t original : {int64_t{8192}, int64_t{1024}}) {
            RopeScaling s = make(RopeType::kLlama3);
            s.factor = factor;
            s.low_freq_factor = low;
            s.high_freq_factor = high;
            s.original_max_position_embeddings = original;
            const RopeFrequencies f = rope_frequencies(dim, base, s);
            EXPECT_LE(max_rel_diff(f.inv_freq, ref_llama3(dim, base, factor, low, high, original)), kRelTolerance)
                << describe(dim, base, s, {}) << " low=" << low << " high=" << high;
            EXPECT_EQ(f.attention_factor, 1.0);
          }
        }
      }
    }
  }
}

TEST(RopeScaling, Llama3KeepsHighAndDividesLowFrequencies) {
  // Llama 3.1: factor 8, bands 1/4, L0 = 8192, base 500000, head dim 128.
  RopeScaling s = make(RopeType::kLlama3);
  s.factor = 8.0;
  s.low_freq_factor = 1.0;
  s.high_freq_factor = 4.0;
  s.original_max_position_embeddings = 8192;
  const std::vector<double> plain = rope_frequencies(128, 500000.0, make(RopeType::kDefault)).inv_freq;
  const std::vector<double> llama = rope_frequencies(128, 500000.0, s).inv_freq;
  int kept = 0, divided = 0, smoothed = 0;
  for (size_t i = 0; i < plain.size(); ++i) {
    const double wavelen = 2 * std::numbers::pi / plain[i];
    if (wavelen < 8192.0 / 4.0) {
      EXPECT_DOUBLE_EQ(llama[i], plain[i]) << i;
      ++kept;
    } else if (wavelen > 8192.0) {
      EXPECT_NEAR(llama[i], plain[i] / 8.0, kRelTolerance * plain[i]) << i;
      ++divided;
    } else {
      EXPECT_LT(llama[i], plain[i]) << i;
      EXPECT_GT(llama[i], plain[i] / 8.0) << i;
      ++smoothed;
    }
  }
  // All three bands are populated at this shape.
  EXPECT_GT(kept, 0);
  EXPECT_GT(divided, 0);
  EXPECT_GT(smoothed, 0);
}

TEST(RopeScaling, LinearIsDefaultOverFactorAndNtkKeepsTheEnds) {
  const std::vector<double> plain = rope_frequencies(128, 10000.0, make(RopeType::kDefault)).inv_freq;
  RopeScaling linear = make(RopeType::kLinear);
  linear.factor = 4.0;
  const std::vector<double> lin = rope_frequencies(128, 10000.0, linear).inv_freq;
  for (size_t i = 0; i < plain.size(); ++i) EXPECT_NEAR(lin[i], plain[i] / 4.0, kRelTolerance * lin[i]) << i;
  // NTK: the highest frequency stays 1; the lowest, base^(-(d-2)/d), is divided by exactly factor.
  RopeScaling ntk = make(RopeType::kNtk);
  ntk.factor = 4.0;
  const std::vector<double> n = rope_frequencies(128, 10000.0, ntk).inv_freq;
  EXPECT_EQ(n[0], 1.0);
  EXPECT_NEAR(n.back(), plain.back() / 4.0, 2 * kRelTolerance * n.back());  // two roundings on each side
  for (size_t i = 1; i < plain.size(); ++i) EXPECT_LT(n[i], plain[i]) << i;
}

}  // namespace
}  // namespace posenc::kernels
