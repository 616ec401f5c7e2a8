// RoPE tables (rope_cos_sin, rope_cos_sin_range) and rotation (rope_apply,
// rope_angle_grad) against plain long-double references, plus the properties
// the math promises.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "check.h"
#include "rope_check.h"
#include "posenc/kernels/rope.h"

namespace posenc::kernels {
namespace {

using test::expect_error;
using test::spec_of;
using test::max_abs_diff;

// ---------------------------------------------------------------------------
// Plain references

// omega_j = base^(-2j/R), in long double and rounded once.
std::vector<double> spectrum(int64_t rotary, double base = 10000.0) {
  std::vector<double> w(static_cast<size_t>(rotary / 2));
  for (size_t j = 0; j < w.size(); ++j) w[j] = static_cast<double>(powl(base, -2.0L * j / rotary));
  return w;
}

// Channel indices of pair j.
std::pair<int64_t, int64_t> pair_of(RopeLayout layout, int64_t rotary, int64_t j) {
  return layout == RopeLayout::kHalf ? std::pair{j, j + rotary / 2} : std::pair{2 * j, 2 * j + 1};
}

// One row rotated by theta_j = p * omega_j (long double), cos and sin times a.
std::vector<long double> reference_row(const std::vector<long double>& x, RopeLayout layout, int64_t rotary,
                                       const std::vector<double>& omega, int64_t p, bool inverse, long double a) {
  std::vector<long double> y = x;
  for (int64_t j = 0; j < rotary / 2; ++j) {
    const long double theta = static_cast<long double>(p) * omega[j];
    const long double c = a * cosl(theta);
    const long double s = (inverse ? -a : a) * sinl(theta);
    const auto [ia, ib] = pair_of(layout, rotary, j);
    y[ia] = x[ia] * c - x[ib] * s;
    y[ib] = x[ib] * c + x[ia] * s;
  }
  return y;
}

// ---------------------------------------------------------------------------
// Dtypes: the table type C and the tolerance of each output element.

template <class T>
struct Dtype;
template <>
struct Dtype<float> {
  using C = float;
  static constexpr const char* kName = "float32";
  static float from(long double v) { return static_cast<float>(v); }
  static double value(float v) { return v; }
  // Table entries rounded to float (2^-25 each) plus two products and a sum in
  // float32 (2^-24 relative each) for |x| < 1: under 5e-7.
  static double tolerance(long double /*ref*/) { return 5e-7; }
};
template <>
struct Dtype<double> {
  using C = double;
  static constexpr const char* kName = "float64";
  static double from(long double v) { return static_cast<double>(v); }
  static double value(double v) { return v; }
  // A few double ulps from the table and the rotation; the reference's own
  // long-double angle (64-bit significand) adds |p*omega| * 2^-64, covered by
  // keeping |p*omega| < 2^14 in the float64 cases.
  static double tolerance(long double /*ref*/) { return 4e-15; }
};
template <>
struct Dtype<bfloat16> {
  using C = float;
  static constexpr const char* kName = "bfloat16";
  static bfloat16 from(long double v) { return to_bfloat16(static_cast<float>(v)); }
  static double value(bfloat16 v) { return to_float(v); }
  // Rounded once to bfloat16: half an ulp, at most 2^-8 relative, on top of the float32 math.
  static double tolerance(long double ref) { return 0x1p-8 * std::abs(static_cast<double>(ref)) + 1e-6; }
};
template <>
struct Dtype<float16> {
  using C = float;
  static constexpr const char* kName = "float16";
  static float16 from(long double v) { return to_float16(static_cast<float>(v)); }
  static double value(float16 v) { return to_float(v); }
  // Rounded once to float16: half an ulp, at most 2^-11 relative (subnormal steps 2^-24 sit under the 1e-6).
  static double tolerance(long double ref) { return 0x1p-11 * std::abs(static_cast<double>(ref)) + 1e-6; }
};

template <class T>
bool same_bits(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

// ---------------------------------------------------------------------------
// The table of cases: real head shapes, partial rotary, both layouts, odd
// lengths, batch with shared or per-batch tables, padded (non-contiguous) views.

struct Case {
  int64_t head_dim, rotary;
  RopeLayout layout;
  int64_t batch, heads, seq, cos_batch;
  int64_t pad_t, pad_h;  // extra elements after each row / each head: stride_t > D, stride_h > seq * stride_t
  int64_t start;         // position of t = 0 (batch row b adds 7 * b when cos_batch > 1)
  double attention = 1.0;
  bool inverse = false;
};

std::string describe(const Case& c) {
  return "D=" + std::to_string(c.head_dim) + " R=" + std::to_string(c.rotary) +
         " layout=" + std::string(rope_layout_name(c.layout)) + " B=" + std::to_string(c.batch) +
         " H=" + std::to_string(c.heads) + " T=" + std::to_string(c.seq) + " cos_batch=" + std::to_string(c.cos_batch) +
         " pad_t=" + std::to_string(c.pad_t) + " pad_h=" + std::to_string(c.pad_h) +
         " start=" + std::to_string(c.start) + " a=" + std::to_string(c.attention) + (c.inverse ? " inverse" : "");
}

const std::vector<Case> kCases = {
    {128, 128, RopeLayout::kHalf, 1, 4, 257, 1, 0, 0, 0},                   // Llama, odd length across tiles
    {128, 128, RopeLayout::kInterleaved, 2, 3, 65, 2, 8, 0, 1000},          // per-batch tables, padded rows
    {64, 64, RopeLayout::kHalf, 2, 5, 33, 1, 0, 64, 5},                     // padded heads, table shared by the batch
    {64, 32, RopeLayout::kHalf, 1, 3, 100, 1, 3, 5, 0},                     // partial (rotary_pct 0.5)
    {256, 64, RopeLayout::kInterleaved, 2, 2, 17, 2, 0, 0, 12},             // GPT-J: head 256, rotary 64
    {80, 32, RopeLayout::kHalf, 1, 6, 31, 1, 0, 0, 3},                      // Phi-2: head 80, rotary 32
    {96, 96, RopeLayout::kHalf, 1, 3, 40, 1, 0, 0, 0, 1.25},                // Phi-3: R/2 = 48, attention factor
    {256, 256, RopeLayout::kInterleaved, 1, 2, 9, 1, 0, 0, 0},              // R/2 = 128: several 16-bit chunks
    {128, 128, RopeLayout::kHalf, 2, 32, 1, 2, 0, 0, 4000},                 // decode step
    {128, 128, RopeLayout::kInterleaved, 1, 5, 70, 1, 0, 0, 0, 1.0, true},  // inverse
    {2, 2, RopeLayout::kHalf, 1, 1, 3, 1, 1, 1, 0},                         // smallest
};

template <class T>
struct Strided {
  int64_t batch, heads, seq, head_dim, stride_b, stride_h, stride_t;
  std::vector<T> data;
  Strided(const Case& c, int64_t pad_t, int64_t pad_h)
      : batch(c.batch), heads(c.heads), seq(c.seq), head_dim(c.head_dim), stride_t(c.head_dim + pad_t) {
    stride_h = c.seq * stride_t + pad_h;
    stride_b = c.heads * stride_h;
    data.resize(static_cast<size_t>(c.batch * stride_b));
  }
  int64_t at(int64_t b, int64_t h, int64_t t, int64_t d) const {
    return b * stride_b + h * stride_h + t * stride_t + d;
  }
  RopeView<T> view() { return {data.data(), batch, heads, seq, stride_b, stride_h, stride_t}; }
  RopeView<const T> cview() const { return {data.data(), batch, heads, seq, stride_b, stride_h, stride_t}; }
};

int64_t position_of(const Case& c, int64_t cb, int64_t t) { return c.start + t + 7 * cb; }

template <class T>
void check_case(const Case& c, bool in_place) {
  using C = typename Dtype<T>::C;
  const std::string what = describe(c) + " dtype=" + Dtype<T>::kName + (in_place ? " in place" : " out of place");
  std::mt19937 rng(static_cast<unsigned>(c.head_dim * 131 + c.seq));
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);

  // Input with random values everywhere, padding included (it must survive).
  Strided<T> in(c, c.pad_t, c.pad_h);
  for (auto& v : in.data) v = Dtype<T>::from(uniform(rng));
  const std::vector<T> original = in.data;

  const std::vector<double> omega = spectrum(c.rotary);
  std::vector<int64_t> pos;
  for (int64_t cb = 0; cb < c.cos_batch; ++cb) {
    for (int64_t t = 0; t < c.seq; ++t) pos.push_back(position_of(c, cb, t));
  }
  RopeTableSpec spec;
  spec.omega = omega;
  spec.attention_factor = c.attention;
  const int64_t half = c.rotary / 2;
  std::vector<C> cos(pos.size() * half), sin(pos.size() * half);
  rope_cos_sin<C>(spec, pos.data(), nullptr, static_cast<int64_t>(pos.size()), cos.data(), sin.data());

  const RopeApplyParams params{c.head_dim, c.rotary, c.layout, c.inverse};
  Strided<T> out(c, 0, 0);  // out of place: a contiguous output with other strides
  const T sentinel = Dtype<T>::from(12345.0L);
  for (auto& v : out.data) v = sentinel;
  if (in_place) {
    rope_apply<T, C>(params, in.cview(), in.view(), cos.data(), sin.data(), c.cos_batch);
  } else {
    rope_apply<T, C>(params, in.cview(), out.view(), cos.data(), sin.data(), c.cos_batch);
  }
  const Strided<T>& result = in_place ? in : out;

  double worst = 0.0;  // largest error / tolerance
  int64_t bad_untouched = 0;
  std::vector<bool> rotated(in.data.size(), false);  // in place: the only elements allowed to change
  for (int64_t b = 0; b < c.batch; ++b) {
    const int64_t cb = c.cos_batch == 1 ? 0 : b;
    for (int64_t h = 0; h < c.heads; ++h) {
      for (int64_t t = 0; t < c.seq; ++t) {
        std::vector<long double> x(static_cast<size_t>(c.head_dim));
        for (int64_t d = 0; d < c.head_dim; ++d) x[d] = Dtype<T>::value(original[in.at(b, h, t, d)]);
        const auto y = reference_row(x, c.layout, c.rotary, omega, position_of(c, cb, t), c.inverse, c.attention);
        for (int64_t d = 0; d < c.rotary; ++d) {
          const double got = Dtype<T>::value(result.data[result.at(b, h, t, d)]);
          worst = std::max(worst, std::abs(got - static_cast<double>(y[d])) / Dtype<T>::tolerance(y[d]));
          rotated[in.at(b, h, t, d)] = in_place;
        }
        // Channels R..D-1 pass through bit for bit.
        for (int64_t d = c.rotary; d < c.head_dim; ++d) {
          bad_untouched += !same_bits(result.data[result.at(b, h, t, d)], original[in.at(b, h, t, d)]);
        }
      }
    }
  }
  EXPECT_LE(worst, 1.0) << what;
  EXPECT_EQ(bad_untouched, 0) << what;
  // The padding of an in-place view, and the whole input out of place, stay as they were.
  int64_t changed = 0;
  for (size_t k = 0; k < in.data.size(); ++k) changed += !rotated[k] && !same_bits(in.data[k], original[k]);
  EXPECT_EQ(changed, 0) << what;
}

template <class T>
void check_all_cases() {
  for (const Case& c : kCases) {
    check_case<T>(c, true);
    check_case<T>(c, false);
  }
}

TEST(RopeApply, Float32MatchesReference) { check_all_cases<float>(); }
TEST(RopeApply, Float64MatchesReference) { check_all_cases<double>(); }
TEST(RopeApply, Bfloat16MatchesReference) { check_all_cases<bfloat16>(); }
TEST(RopeApply, Float16MatchesReference) { check_all_cases<float16>(); }

TEST(RopeApply, SixteenBitRoundingMatchesTheScalarRule) {
  // The vector conversions (hardware bf16 rounding with its NaN / subnormal
  // fallback, F16C) against half_types.h's scalar rule. With sin = 0 and
  // cos = 1 + 2^-8 (bfloat16) or 1 + 2^-11 (float16) every output is one
  // float32 product that 16 bits cannot hold, and a power of two lands exactly
  // on a tie (round to even: down).
  const int64_t D = 128;
  std::vector<float> values = {NAN,   -NAN,  INFINITY, -INFINITY, 1e-40f, -3e-39f, 0.0f,  -0.0f, 65504.0f,
                               6e-8f, 1e-5f, 1.0f,     -2.0f,     0.5f,   0.25f,   -8.0f, 3.0f,  1.0f + 0x1p-7f};
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uniform(-4.0f, 4.0f);
  while (static_cast<int64_t>(values.size()) < D) values.push_back(uniform(rng));
  const std::vector<float> sin(D / 2, 0.0f);
  const float cb = 1.0f + 0x1p-8f, ch = 1.0f + 0x1p-11f;
  const std::vector<float> cos_b(D / 2, cb), cos_h(D / 2, ch);
  for (auto layout : {RopeLayout::kHalf, RopeLayout::kInterleaved}) {
    std::vector<bfloat16> xb(D);
    std::vector<float16> xh(D);
    for (int64_t k = 0; k < D; ++k) {
      xb[k] = to_bfloat16(values[k]);
      xh[k] = to_float16(values[k]);
    }
    std::vector<bfloat16> expected_b(D);
    std::vector<float16> expected_h(D);
    for (int64_t j = 0; j < D / 2; ++j) {
      const auto [a, b] = pair_of(layout, D, j);
      expected_b[a] = to_bfloat16(to_float(xb[a]) * cb - to_float(xb[b]) * 0.0f);
      expected_b[b] = to_bfloat16(to_float(xb[b]) * cb + to_float(xb[a]) * 0.0f);
      expected_h[a] = to_float16(to_float(xh[a]) * ch - to_float(xh[b]) * 0.0f);
      expected_h[b] = to_float16(to_float(xh[b]) * ch + to_float(xh[a]) * 0.0f);
    }
    EXPECT_EQ(expected_b[11].bits, to_bfloat16(1.0f).bits);  // channel 11 holds 1.0: its tie went down
    const RopeApplyParams params{D, D, layout, false};
    rope_apply<bfloat16, float>(params, {xb.data(), 1, 1, 1, D, D, D}, {xb.data(), 1, 1, 1, D, D, D}, cos_b.data(),
                                sin.data(), 1);
    rope_apply<float16, float>(params, {xh.data(), 1, 1, 1, D, D, D}, {xh.data(), 1, 1, 1, D, D, D}, cos_h.data(),
                               sin.data(), 1);
    for (int64_t k = 0; k < D; ++k) {
      EXPECT_EQ(xb[k].bits, expected_b[k].bits) << "bfloat16 channel " << k << " " << rope_layout_name(layout);
      // Which NaN an operation returns depends on operand order; only bfloat16 canonicalizes it.
      if (std::isnan(to_float(expected_h[k]))) {
        EXPECT_TRUE(std::isnan(to_float(xh[k]))) << "float16 channel " << k << " " << rope_layout_name(layout);
      } else {
        EXPECT_EQ(xh[k].bits, expected_h[k].bits) << "float16 channel " << k << " " << rope_layout_name(layout);
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Tables

TEST(RopeTable, MatchesReferenceAndAttentionFactor) {
  const auto omega = spectrum(128, 500000.0);
  RopeTableSpec spec;
  spec.omega = omega;
  spec.attention_factor = 0.75;
  // Runs of consecutive positions (recurrence) mixed with scattered ones.
  std::vector<int64_t> pos;
  for (int64_t p = 0; p < 200; ++p) pos.push_back(p);
  for (int64_t p = 5000; p < 5131; ++p) pos.push_back(p);
  for (int64_t k = 0; k < 77; ++k) pos.push_back((k * 7919) % 16000 - 3000);
  const int64_t rows = static_cast<int64_t>(pos.size()), half = 64;
  std::vector<double> cd(rows * half), sd(rows * half);
  std::vector<float> cf(rows * half), sf(rows * half);
  rope_cos_sin<double>(spec, pos.data(), nullptr, rows, cd.data(), sd.data());
  rope_cos_sin<float>(spec, pos.data(), nullptr, rows, cf.data(), sf.data());
  std::vector<long double> ce, se;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < half; ++j) {
      const long double theta = static_cast<long double>(pos[r]) * omega[j];
      ce.push_back(0.75L * cosl(theta));
      se.push_back(0.75L * sinl(theta));
    }
  }
  // float64: a few double ulps (|p*omega| < 2^14, so the long-double reference is exact to 2^-50).
  EXPECT_LE(max_abs_diff(cd, ce), 2e-15);
  EXPECT_LE(max_abs_diff(sd, se), 2e-15);
  // float32: rounded once from a value within 1e-15: half a float ulp of |v| < 1.
  EXPECT_LE(max_abs_diff(cf, ce), 0x1p-25 + 1e-15);
  EXPECT_LE(max_abs_diff(sf, se), 0x1p-25 + 1e-15);
}

TEST(RopeTable, Float32ExactNearTwoToThe24) {
  const auto omega = spectrum(128);
  RopeTableSpec spec;
  spec.omega = omega;
  const int64_t start = (int64_t{1} << 24) - 1500, count = 3000, half = 64;
  std::vector<float> c(count * half), s(count * half);
  rope_cos_sin_range<float>(spec, start, count, c.data(), s.data());
  std::vector<long double> ce, se;
  for (int64_t r = 0; r < count; ++r) {
    for (int64_t j = 0; j < half; ++j) {
      const long double theta = static_cast<long double>(start + r) * omega[j];
      ce.push_back(cosl(theta));
      se.push_back(sinl(theta));
    }
  }
  // Half a float ulp; the reference's long-double angle is within 2^25 * 2^-64 = 2e-12.
  EXPECT_LE(max_abs_diff(c, ce), 0x1p-25 + 3e-12);
  EXPECT_LE(max_abs_diff(s, se), 0x1p-25 + 3e-12);
}

TEST(RopeTable, RecurrenceEqualsPerEntry) {
  // The range (blocks of 64 from exact anchors) against the same positions
  // given in descending order, which never form a run: every entry exact.
  const auto omega = spectrum(64);
  RopeTableSpec spec;
  spec.omega = omega;
  spec.attention_factor = 1.1;
  for (int64_t start : {int64_t{-300}, int64_t{0}, int64_t{123456789}}) {
    const int64_t count = 517, half = 32;
    std::vector<double> c(count * half), s(count * half), c2(count * half), s2(count * half);
    rope_cos_sin_range<double>(spec, start, count, c.data(), s.data());
    std::vector<int64_t> descending(count);
    for (int64_t r = 0; r < count; ++r) descending[r] = start + count - 1 - r;
    rope_cos_sin<double>(spec, descending.data(), nullptr, count, c2.data(), s2.data());
    std::vector<double> c2r, s2r;
    for (int64_t r = count - 1; r >= 0; --r) {
      c2r.insert(c2r.end(), c2.begin() + r * half, c2.begin() + (r + 1) * half);
      s2r.insert(s2r.end(), s2.begin() + r * half, s2.begin() + (r + 1) * half);
    }
    // Anchor, step and one complex product: a few double ulps, no drift.
    EXPECT_LE(max_abs_diff(c, c2r), 1e-15) << start;
    EXPECT_LE(max_abs_diff(s, s2r), 1e-15) << start;
    // And the list path finds runs too: ascending positions as a list equal the range.
    std::vector<int64_t> ascending(count);
    for (int64_t r = 0; r < count; ++r) ascending[r] = start + r;
    rope_cos_sin<double>(spec, ascending.data(), nullptr, count, c2.data(), s2.data());
    EXPECT_EQ(max_abs_diff(c, c2), 0.0) << start;
  }
}

TEST(RopeTable, Fp32IsTheCommonFloatFormula) {
  // HF: inv_freq in float32, t in float32, outer product in float32, then cos/sin, times the factor in float32.
  const auto omega = spectrum(64);
  RopeTableSpec spec;
  spec.omega = omega;
  spec.precision = Precision::kFp32;
  spec.attention_factor = 0.9;
  const int64_t start = (int64_t{1} << 24) - 100, count = 150, half = 32;
  std::vector<float> c(count * half), s(count * half);
  rope_cos_sin_range<float>(spec, start, count, c.data(), s.data());
  std::vector<double> ce, se, exact_c;
  for (int64_t r = 0; r < count; ++r) {
    for (int64_t j = 0; j < half; ++j) {
      const float angle = static_cast<float>(start + r) * static_cast<float>(omega[j]);
      ce.push_back(std::cos(angle) * 0.9f);
      se.push_back(std::sin(angle) * 0.9f);
      exact_c.push_back(0.9 * static_cast<double>(cosl(static_cast<long double>(start + r) * omega[j])));
    }
  }
  // 1 float ulp: libm's float cos/sin against ours of the same float angle.
  EXPECT_LE(max_abs_diff(c, ce), 1.2e-7);
  EXPECT_LE(max_abs_diff(s, se), 1.2e-7);
  // ... and that formula is far from the exact angles at 2^24.
  EXPECT_GT(max_abs_diff(c, exact_c), 0.1);
}

TEST(RopeTable, AxialFollowsEachFrequencysAxis) {
  // 3 axes (t, h, w), M-RoPE-like interleaved assignment plus a block split.
  const auto omega = spectrum(48);
  std::vector<int32_t> axis_of(24);
  for (int j = 0; j < 24; ++j) axis_of[j] = j < 8 ? j % 3 : (j < 16 ? 1 : 2);
  RopeTableSpec spec;
  spec.omega = omega;
  spec.axis_of = axis_of;
  spec.n_axes = 3;
  const int64_t rows = 300;
  std::vector<int64_t> pos(rows * 3);
  for (int64_t r = 0; r < rows; ++r) {
    pos[r * 3] = r;           // t: a run (must not take the single-axis recurrence)
    pos[r * 3 + 1] = r / 17;  // h
    pos[r * 3 + 2] = r % 17;  // w
  }
  std::vector<double> c(rows * 24), s(rows * 24);
  rope_cos_sin<double>(spec, pos.data(), nullptr, rows, c.data(), s.data());
  std::vector<long double> ce, se;
  for (int64_t r = 0; r < rows; ++r) {
    for (int j = 0; j < 24; ++j) {
      const long double theta = static_cast<long double>(pos[r * 3 + axis_of[j]]) * omega[j];
      ce.push_back(cosl(theta));
      se.push_back(sinl(theta));
    }
  }
  EXPECT_LE(max_abs_diff(c, ce), 2e-15);  // a few double ulps
  EXPECT_LE(max_abs_diff(s, se), 2e-15);
}

TEST(RopeTable, XposFactors) {
  // zeta_j = (2j/R + 0.4) / 1.4; queries scale zeta^((p - center)/scale_base).
  const int64_t R = 32, half = 16;
  const auto omega = spectrum(R);
  std::vector<double> zeta(half);
  for (int64_t j = 0; j < half; ++j) zeta[j] = (2.0 * j / R + 0.4) / 1.4;
  for (double power : {1.0 / 512, -1.0 / 512}) {
    RopeTableSpec spec;
    spec.omega = omega;
    spec.xpos_zeta = zeta;
    spec.xpos_power = power;
    spec.xpos_center = 100.0;
    spec.attention_factor = 1.5;
    const int64_t rows = 200, start = -20;
    std::vector<double> c(rows * half), s(rows * half);
    rope_cos_sin_range<double>(spec, start, rows, c.data(), s.data());
    std::vector<long double> ce, se;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < half; ++j) {
        const long double p = start + r;
        const long double scale = 1.5L * powl(static_cast<long double>(zeta[j]), (p - 100.0L) * power);
        ce.push_back(scale * cosl(p * omega[j]));
        se.push_back(scale * sinl(p * omega[j]));
      }
    }
    // exp(power * ln zeta) in double: a few ulps of values up to ~2.
    EXPECT_LE(max_abs_diff(c, ce), 4e-15) << power;
    EXPECT_LE(max_abs_diff(s, se), 4e-15) << power;
  }
}

TEST(RopeTable, HugeAnglesStayFinite) {
  // |p * omega| >= 2^50 takes libm in long double: still a rotation.
  const std::vector<double> omega = {1.0, 0.5, 1e-3};
  RopeTableSpec spec;
  spec.omega = omega;
  const std::vector<int64_t> pos = {int64_t{1} << 52, (int64_t{1} << 60) + 3, -(int64_t{1} << 55)};
  std::vector<double> c(9), s(9);
  rope_cos_sin<double>(spec, pos.data(), nullptr, 3, c.data(), s.data());
  for (int k = 0; k < 9; ++k) EXPECT_NEAR(c[k] * c[k] + s[k] * s[k], 1.0, 1e-15);  // one rounding each
  // 2^60 + 3 has no double: the position goes to long double whole.
  EXPECT_EQ(c[3], static_cast<double>(cosl(0x1p60L + 3)));
}

// ---------------------------------------------------------------------------
// Properties of the rotation

// Rotates one row (1 head, 1 position) of length D = R in place.
template <class T, class C>
void rotate_one(std::vector<T>& x, RopeLayout layout, const C* cos, const C* sin, bool inverse = false) {
  const int64_t D = static_cast<int64_t>(x.size());
  rope_apply<T, C>({D, D, layout, inverse}, {x.data(), 1, 1, 1, D, D, D}, {x.data(), 1, 1, 1, D, D, D}, cos, sin, 1);
}

template <class C>
void table_at(const std::vector<double>& omega, const std::vector<int64_t>& pos, std::vector<C>& cos,
              std::vector<C>& sin, Precision precision = Precision::kExact) {
  RopeTableSpec spec;
  spec.omega = omega;
  spec.precision = precision;
  cos.resize(pos.size() * omega.size());
  sin.resize(cos.size());
  rope_cos_sin<C>(spec, pos.data(), nullptr, static_cast<int64_t>(pos.size()), cos.data(), sin.data());
}

TEST(RopeProperties, KeepsNormsAndInverseUndoes) {
  std::mt19937 rng(3);
  std::normal_distribution<double> normal;
  const auto omega = spectrum(64);
  std::vector<double> cd, sd;
  std::vector<float> cf, sf;
  table_at(omega, {987654}, cd, sd);
  table_at(omega, {987654}, cf, sf);
  for (auto layout : {RopeLayout::kHalf, RopeLayout::kInterleaved}) {
    std::vector<double> x(64);
    for (auto& v : x) v = normal(rng);
    std::vector<double> y = x;
    rotate_one(y, layout, cd.data(), sd.data());
    for (int64_t j = 0; j < 32; ++j) {
      const auto [a, b] = pair_of(layout, 64, j);
      // Every pair keeps its length: a few double ulps of values ~ 1..10.
      EXPECT_NEAR(y[a] * y[a] + y[b] * y[b], x[a] * x[a] + x[b] * x[b], 1e-13);
    }
    rotate_one(y, layout, cd.data(), sd.data(), true);
    EXPECT_LE(max_abs_diff(y, x), 1e-14);  // two rotations, a few double ulps

    std::vector<float> xf(x.begin(), x.end()), yf = xf;
    rotate_one(yf, layout, cf.data(), sf.data());
    rotate_one(yf, layout, cf.data(), sf.data(), true);
    EXPECT_LE(max_abs_diff(yf, xf), 2e-6);  // two float32 rotations of values up to ~3: a few ulps
  }
}

// q.k after rotation at (i, j), scores from float32 outputs.
double score(const std::vector<double>& omega, const std::vector<float>& q, const std::vector<float>& k, int64_t i,
             int64_t j, Precision precision) {
  std::vector<float> c, s, qr = q, kr = k;
  table_at(omega, {i, j}, c, s, precision);
  const size_t half = omega.size();
  rotate_one(qr, RopeLayout::kHalf, c.data(), s.data());
  rotate_one(kr, RopeLayout::kHalf, c.data() + half, s.data() + half);
  double dot = 0.0;
  for (size_t d = 0; d < q.size(); ++d) dot += static_cast<double>(qr[d]) * kr[d];
  return dot;
}

TEST(RopeProperties, ScoreDependsOnlyOnOffsetNearTwoToThe24) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  const auto omega = spectrum(128);
  std::vector<float> q(128), k(128);
  for (auto& v : q) v = uniform(rng);
  for (auto& v : k) v = uniform(rng);
  const int64_t shift = (int64_t{1} << 24) - 1000;
  double exact_worst = 0.0, fp32_worst = 0.0;
  for (auto [i, j] : {std::pair<int64_t, int64_t>{100, 37}, {5, 905}, {0, 0}, {640, 641}, {999, 1}}) {
    exact_worst = std::max(exact_worst, std::abs(score(omega, q, k, i, j, Precision::kExact) -
                                                 score(omega, q, k, i + shift, j + shift, Precision::kExact)));
    fp32_worst = std::max(fp32_worst, std::abs(score(omega, q, k, i, j, Precision::kFp32) -
                                               score(omega, q, k, i + shift, j + shift, Precision::kFp32)));
  }
  // 128 products of float32 components each within 5e-7 of exact, |q|, |k| < 1 per component.
  EXPECT_LE(exact_worst, 1.3e-4);
  // The float32 formula loses whole radians of angle at 2^24: the score moves visibly.
  EXPECT_GT(fp32_worst, 0.1);
  EXPECT_GT(fp32_worst, 1000 * exact_worst);
}

TEST(RopeProperties, RerotationEqualsRotatingToTheNewPosition) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  const auto omega = spectrum(64);
  const std::vector<int64_t> from = {10, 1000000, 3000}, to = {47, 1000037, 2000};
  for (auto layout : {RopeLayout::kHalf, RopeLayout::kInterleaved}) {
    for (size_t r = 0; r < from.size(); ++r) {
      std::vector<double> x(64);
      for (auto& v : x) v = uniform(rng);
      std::vector<double> c_from, s_from, c_to, s_to;
      table_at(omega, {from[r]}, c_from, s_from);
      table_at(omega, {to[r]}, c_to, s_to);
      // theta = to * omega - from * omega
      RopeTableSpec spec;
      spec.omega = omega;
      spec.omega_from = omega;
      std::vector<double> c(32), s(32);
      rope_cos_sin<double>(spec, &to[r], &from[r], 1, c.data(), s.data());
      std::vector<double> moved = x, direct = x;
      rotate_one(moved, layout, c_from.data(), s_from.data());
      rotate_one(moved, layout, c.data(), s.data());
      rotate_one(direct, layout, c_to.data(), s_to.data());
      EXPECT_LE(max_abs_diff(moved, direct), 1e-14) << from[r] << " -> " << to[r];  // two rotations vs one
      // The re-rotation table is the table of the offset: the products cancel exactly.
      std::vector<double> c_delta, s_delta;
      table_at(omega, {to[r] - from[r]}, c_delta, s_delta);
      EXPECT_LE(max_abs_diff(c, c_delta), 4e-16);  // a double ulp or two
      EXPECT_LE(max_abs_diff(s, s_delta), 4e-16);
    }
  }
}

TEST(RopeProperties, RerotationBetweenFrequencySets) {
  // Keys cached with omega_from (e.g. longrope short factors) moved to omega_to.
  std::mt19937 rng(9);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  const auto omega_to = spectrum(64, 10000.0);
  const auto omega_from = spectrum(64, 500000.0);
  std::vector<int64_t> pos(40);
  for (size_t t = 0; t < pos.size(); ++t) pos[t] = 70000 + 3 * static_cast<int64_t>(t);
  RopeTableSpec spec;
  spec.omega = omega_to;
  spec.omega_from = omega_from;
  std::vector<double> c(40 * 32), s(40 * 32), cf, sf, ct, st;
  rope_cos_sin<double>(spec, pos.data(), pos.data(), 40, c.data(), s.data());
  table_at(omega_from, pos, cf, sf);
  table_at(omega_to, pos, ct, st);
  for (int64_t t = 0; t < 40; ++t) {
    std::vector<double> x(64);
    for (auto& v : x) v = uniform(rng);
    std::vector<double> moved = x, reference = x;
    rotate_one(moved, RopeLayout::kHalf, cf.data() + t * 32, sf.data() + t * 32);  // cached key
    rotate_one(moved, RopeLayout::kHalf, c.data() + t * 32, s.data() + t * 32);    // re-rotated
    rotate_one(reference, RopeLayout::kHalf, cf.data() + t * 32, sf.data() + t * 32);
    rotate_one(reference, RopeLayout::kHalf, cf.data() + t * 32, sf.data() + t * 32, true);  // unrotate
    rotate_one(reference, RopeLayout::kHalf, ct.data() + t * 32, st.data() + t * 32);        // rotate(omega_to)
    EXPECT_LE(max_abs_diff(moved, reference), 1e-14) << t;  // a few rotations' double rounding
  }
}

// ---------------------------------------------------------------------------
// Gradient with respect to the angles

struct GradCase {
  RopeLayout layout;
  int64_t head_dim, rotary, batch, heads, seq, cos_batch;
  bool inverse;
  double attention;
};

TEST(RopeAngleGrad, MatchesCentralDifferences) {
  const std::vector<GradCase> cases = {
      {RopeLayout::kHalf, 16, 16, 2, 3, 5, 1, false, 1.0},
      {RopeLayout::kInterleaved, 12, 8, 2, 2, 4, 2, true, 1.3},
      {RopeLayout::kHalf, 10, 6, 1, 4, 3, 1, true, 0.8},
  };
  std::mt19937 rng(21);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  for (const GradCase& g : cases) {
    const int64_t D = g.head_dim, half = g.rotary / 2;
    const int64_t n = g.batch * g.heads * g.seq * D;
    std::vector<double> x(n), dy(n), theta(g.cos_batch * g.seq * half);
    for (auto& v : x) v = uniform(rng);
    for (auto& v : dy) v = uniform(rng);
    for (auto& v : theta) v = 3.0 * uniform(rng);
    const RopeApplyParams params{D, g.rotary, g.layout, g.inverse};
    const RopeView<const double> xv{x.data(), g.batch, g.heads, g.seq, g.heads * g.seq * D, g.seq * D, D};
    const RopeView<const double> gv{dy.data(), g.batch, g.heads, g.seq, g.heads * g.seq * D, g.seq * D, D};
    // L(theta) = sum(dy * rotate(x, theta)) with the table a*cos(theta), a*sin(theta).
    auto loss = [&](const std::vector<double>& th) {
      std::vector<double> c(th.size()), s(th.size()), y(n);
      for (size_t k = 0; k < th.size(); ++k) {
        c[k] = g.attention * std::cos(th[k]);
        s[k] = g.attention * std::sin(th[k]);
      }
      rope_apply<double, double>(params, xv, {y.data(), g.batch, g.heads, g.seq, g.heads * g.seq * D, g.seq * D, D},
                                 c.data(), s.data(), g.cos_batch);
      long double sum = 0;
      for (int64_t k = 0; k < n; ++k) sum += static_cast<long double>(y[k]) * dy[k];
      return static_cast<double>(sum);
    };
    std::vector<double> c(theta.size()), s(theta.size()), grad(theta.size());
    for (size_t k = 0; k < theta.size(); ++k) {
      c[k] = g.attention * std::cos(theta[k]);
      s[k] = g.attention * std::sin(theta[k]);
    }
    rope_angle_grad<double, double>(params, xv, gv, c.data(), s.data(), g.cos_batch, grad.data());
    for (size_t k = 0; k < theta.size(); ++k) {
      const double h = 1e-5;
      auto plus = theta, minus = theta;
      plus[k] += h;
      minus[k] -= h;
      const double numeric = (loss(plus) - loss(minus)) / (2 * h);
      // Central difference: O(h^2) = 1e-10 truncation plus rounding of L (~1e-15 / h).
      EXPECT_NEAR(grad[k], numeric, 1e-8) << "entry " << k << " layout " << rope_layout_name(g.layout);
    }
    // The float32 / 16-bit kernels agree with the float64 one (float32 math over a few heads).
    std::vector<float> xf(x.begin(), x.end()), gf(dy.begin(), dy.end()), cf(c.begin(), c.end()), sf(s.begin(), s.end()),
        grad_f(theta.size());
    rope_angle_grad<float, float>(params, {xf.data(), g.batch, g.heads, g.seq, g.heads * g.seq * D, g.seq * D, D},
                                  {gf.data(), g.batch, g.heads, g.seq, g.heads * g.seq * D, g.seq * D, D}, cf.data(),
                                  sf.data(), g.cos_batch, grad_f.data());
    EXPECT_LE(max_abs_diff(grad_f, grad), 2e-5);  // ~20 float32 products of values up to ~2
  }
}

TEST(RopeAngleGrad, DeterministicAcrossThreadCounts) {
  const int64_t B = 2, H = 16, T = 300, D = 64, n = B * H * T * D;
  std::mt19937 rng(4);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<bfloat16> x(n), g(n);
  for (auto& v : x) v = to_bfloat16(uniform(rng));
  for (auto& v : g) v = to_bfloat16(uniform(rng));
  std::vector<float> c, s;
  std::vector<int64_t> pos(T);
  for (int64_t t = 0; t < T; ++t) pos[t] = t;
  table_at(spectrum(D), pos, c, s);
  const RopeApplyParams params{D, D, RopeLayout::kInterleaved, false};
  const RopeView<const bfloat16> xv{x.data(), B, H, T, H * T * D, T * D, D}, gv{g.data(), B, H, T, H * T * D, T * D, D};
  std::vector<float> one(T * D / 2), two(T * D / 2);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  rope_angle_grad<bfloat16, float>(params, xv, gv, c.data(), s.data(), 1, one.data());
  omp_set_num_threads(std::max(2, threads));
  rope_angle_grad<bfloat16, float>(params, xv, gv, c.data(), s.data(), 1, two.data());
  omp_set_num_threads(threads);
  EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace posenc::kernels
