// Multi-axis RoPE frequencies against plain references: axial blocks (each
// axis its own RoPE of width dims[a]), M-RoPE as Qwen2-VL's
// apply_multimodal_rotary_pos_emb and Qwen3-VL's apply_interleaved_mrope
// assign channels to t/h/w, and xPos's zeta as torchscale writes it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "check.h"
#include "posenc/kernels/rope_axes.h"

namespace posenc::kernels {
namespace {

using test::expect_error;
using LD = long double;

// Long double on both sides, each rounded once to double: at most one double
// ulp apart (<= 2.2e-16 relative).
constexpr double kRelTolerance = 4e-16;

// 1 / base^(2i/d), i < d/2 (HF's default inverse frequencies).
std::vector<LD> ref_spectrum(int64_t dim, LD base) {
  std::vector<LD> out;
  for (int64_t k = 0; k < dim; k += 2) out.push_back(1.0L / powl(base, static_cast<LD>(k) / dim));
  return out;
}

void expect_close(const std::vector<double>& got, const std::vector<LD>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_LE(std::fabs((static_cast<LD>(got[i]) - want[i]) / want[i]), kRelTolerance) << what << " i=" << i;
  }
}

std::vector<int32_t> repeat(std::initializer_list<std::pair<int32_t, int>> runs) {
  std::vector<int32_t> out;
  for (auto [axis, n] : runs) out.insert(out.end(), static_cast<size_t>(n), axis);
  return out;
}

RopeScaling linear(double factor) {
  RopeScaling s;
  s.type = RopeType::kLinear;
  s.factor = factor;
  return s;
}

RopeScaling yarn(double factor) {
  RopeScaling s;
  s.type = RopeType::kYarn;
  s.factor = factor;
  s.original_max_position_embeddings = 4096;
  return s;
}

// ---------------------------------------------------------------------------
// Axial

TEST(RopeAxial, TwoAxesSplitTheChannelsInOrder) {
  const std::vector<int64_t> dims = {32, 32};
  const RopeAxisFrequencies f = rope_axial_frequencies(dims, 10000.0, {});
  std::vector<LD> want = ref_spectrum(32, 10000.0L);
  const std::vector<LD> second = ref_spectrum(32, 10000.0L);
  want.insert(want.end(), second.begin(), second.end());
  expect_close(f.omega, want, "2 axes");
  EXPECT_EQ(f.axis_of, repeat({{0, 16}, {1, 16}}));
  EXPECT_EQ(f.attention_factor, 1.0);
}

TEST(RopeAxial, UnevenAxesWithTheirOwnScaling) {
  // Video: time 16 channels, height and width 24 each; a longer clip scales time only.
  const std::vector<int64_t> dims = {16, 24, 24};
  const std::vector<RopeScaling> scaling = {linear(4.0), RopeScaling{}, linear(2.0)};
  const RopeAxisFrequencies f = rope_axial_frequencies(dims, 100.0, scaling);
  std::vector<LD> want;
  for (LD v : ref_spectrum(16, 100.0L)) want.push_back(v / 4);
  for (LD v : ref_spectrum(24, 100.0L)) want.push_back(v);
  for (LD v : ref_spectrum(24, 100.0L)) want.push_back(v / 2);
  expect_close(f.omega, want, "3 axes");
  EXPECT_EQ(f.axis_of, repeat({{0, 8}, {1, 12}, {2, 12}}));
}

TEST(RopeAxial, OneScalingIsSharedByEveryAxis) {
  const std::vector<int64_t> dims = {8, 16};
  const std::vector<RopeScaling> shared = {linear(3.0)};
  const RopeAxisFrequencies f = rope_axial_frequencies(dims, 10000.0, shared);
  std::vector<LD> want;
  for (LD v : ref_spectrum(8, 10000.0L)) want.push_back(v / 3);
  for (LD v : ref_spectrum(16, 10000.0L)) want.push_back(v / 3);
  expect_close(f.omega, want, "shared");
  // YaRN on both axes: equal attention factors, carried through.
  const std::vector<RopeScaling> shared_yarn = {yarn(4.0)};
  EXPECT_DOUBLE_EQ(rope_axial_frequencies(dims, 10000.0, shared_yarn).attention_factor, 0.1 * std::log(4.0) + 1);
}

TEST(RopeAxial, SeqLenSelectsTheRegimePerAxis) {
  RopeScaling dynamic;
  dynamic.type = RopeType::kDynamic;
  dynamic.factor = 2.0;
  dynamic.original_max_position_embeddings = 16;
  const std::vector<int64_t> dims = {8, 8};
  const std::vector<RopeScaling> scaling = {dynamic};
  const std::vector<int64_t> seq_len = {16, 32};  // axis 0 within L0, axis 1 at twice L0
  const RopeAxisFrequencies f = rope_axial_frequencies(dims, 10000.0, scaling, seq_len);
  // Axis 1: HF dynamic NTK base, base * (2*32/16 - 1)^(8/6).
  std::vector<LD> want = ref_spectrum(8, 10000.0L);
  for (LD v : ref_spectrum(8, 10000.0L * powl(3.0L, 8.0L / 6.0L))) want.push_back(v);
  expect_close(f.omega, want, "dynamic per axis");
}

TEST(RopeAxial, DefaultDims) {
  EXPECT_EQ(rope_axial_default_dims(64, 1), (std::vector<int64_t>{64}));
  EXPECT_EQ(rope_axial_default_dims(64, 2), (std::vector<int64_t>{32, 32}));
  EXPECT_EQ(rope_axial_default_dims(96, 3), (std::vector<int64_t>{32, 32, 32}));
  expect_error([] { rope_axial_default_dims(64, 3); },
               "[rope-axial] rotary_dim must be divisible by 6 (an even share per axis), got 64");
  expect_error([] { rope_axial_default_dims(6, 2); },
               "[rope-axial] rotary_dim must be divisible by 4 (an even share per axis), got 6");
  expect_error([] { rope_axial_default_dims(64, 4); }, "[rope-axial] n_axes must be 1, 2 or 3, got 4");
  expect_error([] { rope_axial_default_dims(64, 0, "apply_rope_axial"); },
               "[apply_rope_axial] n_axes must be 1, 2 or 3, got 0");
  expect_error([] { rope_axial_default_dims(0, 2); }, "[rope-axial] rotary_dim must be positive, got 0");
}

TEST(RopeAxial, Errors) {
  const std::vector<int64_t> none;
  const std::vector<int64_t> four = {8, 8, 8, 8};
  const std::vector<int64_t> odd = {8, 7};
  const std::vector<int64_t> zero = {0, 8};
  const std::vector<int64_t> two = {32, 32};
  expect_error([&] { rope_axial_frequencies(none, 10000.0, {}); },
               "[rope-axial] dims_per_axis must have 1 to 3 entries, got 0");
  expect_error([&] { rope_axial_frequencies(four, 10000.0, {}); },
               "[rope-axial] dims_per_axis must have 1 to 3 entries, got 4");
  expect_error([&] { rope_axial_frequencies(odd, 10000.0, {}); },
               "[rope-axial] dims_per_axis[1] must be even and > 0, got 7");
  expect_error([&] { rope_axial_frequencies(zero, 10000.0, {}); },
               "[rope-axial] dims_per_axis[0] must be even and > 0, got 0");
  const std::vector<RopeScaling> three(3);
  expect_error([&] { rope_axial_frequencies(two, 10000.0, three); },
               "[rope-axial] scaling must have 0, 1 or n_axes = 2 entries, got 3");
  const std::vector<int64_t> one_len = {100};
  expect_error([&] { rope_axial_frequencies(two, 10000.0, {}, one_len); },
               "[rope-axial] seq_len must have 0 or n_axes = 2 entries, got 1");
  const std::vector<RopeScaling> mixed = {yarn(4.0), RopeScaling{}};
  expect_error([&] { rope_axial_frequencies(two, 10000.0, mixed); },
               "[rope-axial] the axes' attention factors must agree (they scale the same cos/sin), got "
               "1.1386294361119891 for axis 0 and 1 for axis 1");
  const std::vector<RopeScaling> bad = {linear(0.0)};
  expect_error([&] { rope_axial_frequencies(two, 10000.0, bad); },
               "[rope-axial] factor must be finite and > 0, got 0");
  expect_error([&] { rope_axial_frequencies(two, -1.0, {}); }, "[rope-axial] base must be finite and > 0, got -1");
  const std::vector<int64_t> bad_len = {100, 0};
  expect_error([&] { rope_axial_frequencies(two, 10000.0, {}, bad_len); },
               "[rope-axial] seq_len must be positive, got 0");

  const std::vector<int64_t> short_sum = {32, 28};
  expect_error([&] { validate_axial_dims(short_sum, 64); },
               "[rope-axial] dims_per_axis must sum to rotary_dim = 64, got 60 (32+28)");
  const std::vector<int64_t> over = {16, 16, 16};
  expect_error([&] { validate_axial_dims(over, 32, "apply_rope_axial"); },
               "[apply_rope_axial] dims_per_axis must sum to rotary_dim = 32, got 48 (16+16+16)");
  expect_error([&] { validate_axial_dims(odd, 15); }, "[rope-axial] dims_per_axis[1] must be even and > 0, got 7");
  EXPECT_NO_THROW(validate_axial_dims(two, 64));
}

// ---------------------------------------------------------------------------
// M-RoPE

// Qwen2-VL: cos has D = 2*(R/2) channels (the half layout repeats the
// frequencies); it is split into chunks of mrope_section * 2 sizes and chunk
// i takes the positions of axis i % 3. Channel c carries frequency c mod R/2.
std::vector<int32_t> qwen2_vl_axes(int64_t rotary_dim, const std::vector<int64_t>& section) {
  std::vector<int64_t> doubled = section;
  doubled.insert(doubled.end(), section.begin(), section.end());
  std::vector<int32_t> by_channel;
  for (size_t chunk = 0; chunk < doubled.size(); ++chunk) {
    by_channel.insert(by_channel.end(), static_cast<size_t>(doubled[chunk]), static_cast<int32_t>(chunk % 3));
  }
  EXPECT_EQ(static_cast<int64_t>(by_channel.size()), rotary_dim);
  std::vector<int32_t> axes(static_cast<size_t>(rotary_dim / 2), -1);
  for (int64_t c = 0; c < rotary_dim; ++c) {
    int32_t& a = axes[static_cast<size_t>(c % (rotary_dim / 2))];
    if (a == -1) a = by_channel[static_cast<size_t>(c)];
    EXPECT_EQ(a, by_channel[static_cast<size_t>(c)]) << "both copies of a frequency follow one axis, c=" << c;
  }
  return axes;
}

// Qwen3-VL apply_interleaved_mrope: start from t everywhere, then for
// (dim, offset) in ((1, 1), (2, 2)): freqs_t[..., offset:3*section[dim]:3] = freqs[dim].
std::vector<int32_t> qwen3_vl_axes(int64_t rotary_dim, const std::vector<int64_t>& section) {
  std::vector<int32_t> axes(static_cast<size_t>(rotary_dim / 2), 0);
  for (int32_t dim = 1; dim <= 2; ++dim) {
    const int64_t length = section[static_cast<size_t>(dim)] * 3;
    for (int64_t idx = dim; idx < std::min<int64_t>(length, rotary_dim / 2); idx += 3) {
      axes[static_cast<size_t>(idx)] = dim;
    }
  }
  return axes;
}

TEST(Mrope, ContiguousSectionsMatchQwen2VL) {
  for (const auto& [rotary_dim, section] : {std::pair{int64_t{128}, std::vector<int64_t>{16, 24, 24}},
                                            std::pair{int64_t{64}, std::vector<int64_t>{8, 12, 12}},
                                            std::pair{int64_t{16}, std::vector<int64_t>{0, 5, 3}}}) {
    const RopeAxisFrequencies f = mrope_frequencies(rotary_dim, 1000000.0, RopeScaling{}, section, false);
    EXPECT_EQ(f.axis_of, qwen2_vl_axes(rotary_dim, section)) << rotary_dim;
    expect_close(f.omega, ref_spectrum(rotary_dim, 1000000.0L), "mrope omega");
    EXPECT_EQ(f.attention_factor, 1.0);
  }
  const std::vector<int64_t> qwen2 = {16, 24, 24};
  EXPECT_EQ(mrope_frequencies(128, 1000000.0, RopeScaling{}, qwen2, false).axis_of,
            repeat({{0, 16}, {1, 24}, {2, 24}}));
}

TEST(Mrope, InterleavedMatchesQwen3VL) {
  for (const auto& [rotary_dim, section] : {std::pair{int64_t{128}, std::vector<int64_t>{24, 20, 20}},
                                            std::pair{int64_t{128}, std::vector<int64_t>{16, 24, 24}},
                                            std::pair{int64_t{64}, std::vector<int64_t>{12, 10, 10}},
                                            std::pair{int64_t{12}, std::vector<int64_t>{2, 2, 2}}}) {
    const RopeAxisFrequencies f = mrope_frequencies(rotary_dim, 5000000.0, RopeScaling{}, section, true);
    EXPECT_EQ(f.axis_of, qwen3_vl_axes(rotary_dim, section)) << rotary_dim;
    expect_close(f.omega, ref_spectrum(rotary_dim, 5000000.0L), "interleaved omega");
  }
  // Qwen3-VL [24, 20, 20]: T H W T H W ... for 60 slots, then T T T T.
  const std::vector<int64_t> qwen3 = {24, 20, 20};
  const std::vector<int32_t> axes = mrope_frequencies(128, 5000000.0, RopeScaling{}, qwen3, true).axis_of;
  for (int j = 0; j < 60; ++j) EXPECT_EQ(axes[static_cast<size_t>(j)], j % 3) << j;
  for (int j = 60; j < 64; ++j) EXPECT_EQ(axes[static_cast<size_t>(j)], 0) << j;
}

TEST(Mrope, ScalingAppliesToTheWholeSpectrum) {
  const std::vector<int64_t> section = {16, 24, 24};
  const RopeAxisFrequencies f = mrope_frequencies(128, 10000.0, yarn(4.0), section, false, 8192);
  const RopeFrequencies plain = rope_frequencies(128, 10000.0, yarn(4.0), 8192);
  EXPECT_EQ(f.omega, plain.inv_freq);
  EXPECT_EQ(f.attention_factor, plain.attention_factor);
}

TEST(Mrope, Errors) {
  const std::vector<int64_t> two = {32, 32};
  const std::vector<int64_t> short_sum = {16, 24, 20};
  const std::vector<int64_t> negative = {40, -4, 28};
  const std::vector<int64_t> ok = {16, 24, 24};
  expect_error([&] { mrope_frequencies(128, 10000.0, RopeScaling{}, two, false); },
               "[mrope] mrope_section must have 3 entries (t, h, w), got 2");
  expect_error([&] { mrope_frequencies(128, 10000.0, RopeScaling{}, short_sum, false); },
               "[mrope] mrope_section must sum to rotary_dim/2 = 64, got 60 (16+24+20)");
  expect_error([&] { mrope_frequencies(128, 10000.0, RopeScaling{}, short_sum, true); },
               "[mrope] mrope_section must sum to rotary_dim/2 = 64, got 60 (16+24+20)");
  expect_error([&] { mrope_frequencies(128, 10000.0, RopeScaling{}, negative, false); },
               "[mrope] mrope_section[1] must be >= 0, got -4");
  expect_error([&] { mrope_frequencies(127, 10000.0, RopeScaling{}, ok, false); }, "[mrope] dim must be even, got 127");
  expect_error([&] { mrope_frequencies(128, 10000.0, linear(-1.0), ok, false); },
               "[mrope] factor must be finite and > 0, got -1");
  expect_error([&] { mrope_frequencies(128, 10000.0, RopeScaling{}, ok, false, 0); },
               "[mrope] seq_len must be positive, got 0");
}

// ---------------------------------------------------------------------------
// xPos

TEST(Xpos, ZetaMatchesTorchscale) {
  // torchscale XPOS: (arange(0, R, 2) + 0.4 * R) / (1.4 * R).
  for (int64_t rotary_dim : {2, 8, 64, 128}) {
    const std::vector<double> zeta = xpos_zeta(rotary_dim);
    std::vector<LD> want;
    for (int64_t k = 0; k < rotary_dim; k += 2) want.push_back((k + 0.4L * rotary_dim) / (1.4L * rotary_dim));
    // gamma is the double nearest 0.4 on our side (an extra 5e-17 relative).
    ASSERT_EQ(zeta.size(), want.size());
    for (size_t j = 0; j < zeta.size(); ++j) {
      EXPECT_NEAR(zeta[j], static_cast<double>(want[j]), 2 * kRelTolerance) << rotary_dim << " j=" << j;
      EXPECT_GT(zeta[j], 0.0);
      EXPECT_LT(zeta[j], 1.0);  // a decay: zeta^(i-j) shrinks with distance
    }
  }
  // Another gamma: (2j/R + g) / (1 + g).
  const std::vector<double> z = xpos_zeta(4, 1.0);
  EXPECT_DOUBLE_EQ(z[0], 0.5);
  EXPECT_DOUBLE_EQ(z[1], 0.75);
}

TEST(Xpos, Errors) {
  expect_error([] { xpos_zeta(7); }, "[xpos] rotary_dim must be even, got 7");
  expect_error([] { xpos_zeta(0); }, "[xpos] rotary_dim must be positive, got 0");
  expect_error([] { xpos_zeta(8, 0.0); }, "[xpos] gamma must be finite and > 0, got 0");
  expect_error([] { xpos_zeta(8, NAN); }, "[xpos] gamma must be finite and > 0, got nan");
}

}  // namespace
}  // namespace posenc::kernels
