// RoPE from C++: the typed op API (posenc/nn/ops.h) against a plain long
// double reference, the rotary modules (posenc/nn/rotary_embedding.h) and
// the query temperature (posenc/nn/query_temperature.h):
// shared tables for q and k, the cache that is never stale, learned
// frequencies, xPos, axial and M-RoPE, and exact error messages.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/container/sequential.h>

#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "posenc/nn/ops.h"
#include "posenc/nn/query_temperature.h"
#include "posenc/nn/rotary_embedding.h"
#include "reference.h"

namespace posenc::nn::test {
namespace {

using kernels::RopeLayout;
using kernels::RopeScaling;
using kernels::RopeType;

// x (..., T, D) rotated by theta = p * omega_j (long double, plain loops), float64.
// positions: (T) shared, or (B, T) with x (B, ..., T, D). factor multiplies cos and sin.
at::Tensor reference_rope(const at::Tensor& x, const at::Tensor& positions, const std::vector<long double>& omega,
                          RopeLayout layout, long double factor = 1.0L) {
  const at::Tensor xd = x.to(at::kDouble).contiguous();
  at::Tensor out = xd.clone();
  const int64_t tokens = x.size(-2), dim = x.size(-1), half = static_cast<int64_t>(omega.size());
  const int64_t rows = xd.numel() / dim;
  const int64_t per_batch = x.dim() >= 3 ? rows / x.size(0) : rows;
  const at::Tensor p = positions.to(at::kLong).contiguous();
  const double* in = xd.data_ptr<double>();
  double* o = out.data_ptr<double>();
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = r % tokens;
    const int64_t b = r / per_batch;
    const int64_t pos = p.dim() == 2 ? p[b][t].item<int64_t>() : p[t].item<int64_t>();
    for (int64_t j = 0; j < half; ++j) {
      const int64_t ia = layout == RopeLayout::kHalf ? j : 2 * j;
      const int64_t ib = layout == RopeLayout::kHalf ? j + half : 2 * j + 1;
      const long double angle = static_cast<long double>(pos) * omega[j];
      const long double c = factor * std::cos(angle), s = factor * std::sin(angle);
      const long double a = in[r * dim + ia], bb = in[r * dim + ib];
      o[r * dim + ia] = static_cast<double>(a * c - bb * s);
      o[r * dim + ib] = static_cast<double>(bb * c + a * s);
    }
  }
  return out;
}

std::vector<long double> default_omega(int64_t rotary_dim, long double base = 10000.0L) {
  std::vector<long double> omega;
  for (int64_t j = 0; j < rotary_dim / 2; ++j) omega.push_back(std::pow(base, -2.0L * j / rotary_dim));
  return omega;
}

RopeScaling dynamic_scaling() {
  RopeScaling s;
  s.type = RopeType::kDynamic;
  s.factor = 2.0;
  s.original_max_position_embeddings = 64;
  return s;
}

// 4 float32 ulps of |x| < 8, for float32 math on float32 tables.
constexpr double kFloat32Tolerance = 4e-6;

// ---------------------------------------------------------------------------
// The op API

TEST(NnRope, RopeMatchesTheReferenceInBothLayouts) {
  for (RopeLayout layout : {RopeLayout::kHalf, RopeLayout::kInterleaved}) {
    SCOPED_TRACE(std::string(kernels::rope_layout_name(layout)));
    const at::Tensor x = at::randn({2, 4, 7, 32}, at::kDouble);
    const at::Tensor shared = at::arange(100, 107, at::kLong);
    ops::RopeOptions o;
    o.layout = layout;
    EXPECT_LE(max_abs_diff(ops::rope(x, shared, o), reference_rope(x, shared, default_omega(32), layout)), 1e-12);
    // (B, T) positions and partial rotary: channels R..D-1 untouched
    const at::Tensor per_row = at::arange(14, at::kLong).reshape({2, 7}) * 5;
    o.rotary_dim = 16;
    const at::Tensor out = ops::rope(x, per_row, o);
    const at::Tensor expected = reference_rope(x.narrow(-1, 0, 16), per_row, default_omega(16), layout);
    EXPECT_LE(max_abs_diff(out.narrow(-1, 0, 16), expected), 1e-12);
    EXPECT_TRUE(at::equal(out.narrow(-1, 16, 16), x.narrow(-1, 16, 16)));
  }
}

TEST(NnRope, LowPrecisionInputsAreRoundedOnce) {
  const at::Tensor x = at::randn({1, 3, 9, 16});
  const at::Tensor positions = at::arange(9, at::kLong);
  const at::Tensor exact = reference_rope(x, positions, default_omega(16), RopeLayout::kHalf);
  EXPECT_LE(max_abs_diff(ops::rope(x, positions), exact), kFloat32Tolerance);
  for (const auto& [dtype, bits] : {std::pair{at::kBFloat16, 7}, std::pair{at::kHalf, 10}}) {
    const at::Tensor low = x.to(dtype);
    const at::Tensor out = ops::rope(low, positions);
    EXPECT_EQ(out.scalar_type(), dtype);
    // float32 math, one rounding: within half an ulp of the exact value (plus the float32
    // math's few ulps); a second rounding through a low-precision intermediate shows as a whole ulp
    const at::Tensor exact_low = reference_rope(low, positions, default_omega(16), RopeLayout::kHalf);
    const at::Tensor half_ulp = at::exp2(at::floor(at::log2(exact_low.abs().clamp_min(1e-4))) - bits) * 0.5;
    const at::Tensor excess = (out.to(at::kDouble) - exact_low).abs() - half_ulp - kFloat32Tolerance;
    EXPECT_LE(excess.max().item<double>(), 0.0);
  }
}

TEST(NnRope, InPlaceAndItsRefusalUnderGrad) {
  at::Tensor x = at::randn({2, 5, 8});
  const at::Tensor positions = at::arange(5, at::kLong);
  const at::Tensor expected = ops::rope(x, positions);
  at::Tensor& same = ops::rope_(x, positions);
  EXPECT_EQ(&same, &x);
  EXPECT_TRUE(at::equal(x, expected));
  at::Tensor leaf = at::randn({5, 8}).set_requires_grad(true);
  at::Tensor copy = leaf.clone();
  expect_error<c10::Error>([&] { ops::rope_(copy, positions); },
                           "[rope] inplace=True is not differentiable, but x requires grad: use inplace=False, or "
                           "run under torch.no_grad()");
}

TEST(NnRope, ScalingsTravelTyped) {
  RopeScaling yarn;
  yarn.type = RopeType::kYarn;
  yarn.factor = 4.0;
  yarn.original_max_position_embeddings = 4096;
  const auto [inv_freq, factor] = ops::rope_inv_freq(64, 10000.0, yarn);
  EXPECT_EQ(inv_freq.size(0), 32);
  EXPECT_DOUBLE_EQ(factor, 0.1 * std::log(4.0) + 1.0);  // YaRN's attention factor (Peng et al. 2023)
  // the factor multiplies cos and sin: |rotated pair| = factor * |pair|
  const at::Tensor x = at::randn({3, 64}, at::kDouble);
  ops::RopeOptions o;
  o.scaling = yarn;
  const at::Tensor y = ops::rope(x, at::arange(3, at::kLong), o);
  EXPECT_LE(max_abs_diff(y.norm(2, -1), x.norm(2, -1) * factor), 1e-12);
  RopeScaling bad;
  bad.type = RopeType::kLinear;
  expect_value_error([&] { ops::rope_inv_freq(64, 10000.0, bad); }, "[rope] linear needs factor");
}

TEST(NnRope, RerotateMovesCachedKeys) {
  const at::Tensor k = at::randn({1, 2, 6, 16}, at::kDouble);
  const at::Tensor from = at::arange(1000, 1006, at::kLong);
  const at::Tensor to = at::arange(6, at::kLong);
  const at::Tensor moved = ops::rerotate(ops::rope(k, from), from, to);
  EXPECT_LE(max_abs_diff(moved, ops::rope(k, to)), 1e-12);
  ops::RerotateOptions o;
  o.to_base = 500000.0;
  ops::RopeOptions target;
  target.base = 500000.0;
  EXPECT_LE(max_abs_diff(ops::rerotate(ops::rope(k, from), from, to, o), ops::rope(k, to, target)), 1e-12);
}

// ---------------------------------------------------------------------------
// RotaryEmbedding

TEST(NnRotaryEmbedding, RotatesQueriesAndKeysLikeTheOp) {
  RotaryEmbedding rope(RotaryEmbeddingOptions(32).layout(RopeLayout::kInterleaved));
  const at::Tensor q = at::randn({2, 4, 6, 32});
  const at::Tensor k = at::randn({2, 2, 6, 32});  // GQA: fewer key heads
  const at::Tensor positions = at::arange(10, 16, at::kLong);
  const auto [q2, k2] = rope(q, k, positions);
  ops::RopeOptions o;
  o.layout = RopeLayout::kInterleaved;
  EXPECT_LE(max_abs_diff(q2, ops::rope(q, positions, o)), 1e-6);  // cached table vs direct table, float32
  EXPECT_LE(max_abs_diff(k2, ops::rope(k, positions, o)), 1e-6);
  EXPECT_LE(max_abs_diff(q2, reference_rope(q, positions, default_omega(32), RopeLayout::kInterleaved)),
            kFloat32Tolerance);
  // float64 q and k use the float64 cache
  const auto [q64, k64] = rope(q.to(at::kDouble), k.to(at::kDouble), positions);
  EXPECT_LE(max_abs_diff(q64, reference_rope(q, positions, default_omega(32), RopeLayout::kInterleaved)), 1e-12);
  EXPECT_GT(rope_table_builds(rope->options(), at::kDouble), 0u);
}

TEST(NnRotaryEmbedding, GradientsReachQueriesAndKeys) {
  RotaryEmbedding rope(RotaryEmbeddingOptions(8));
  const at::Tensor q = at::randn({1, 1, 3, 8}, at::kDouble).set_requires_grad(true);
  const at::Tensor k = at::randn({1, 1, 3, 8}, at::kDouble).set_requires_grad(true);
  const auto [q2, k2] = rope(q, k, at::arange(3, at::kLong));
  (q2 * k2).sum().backward();
  // d(q'.k')/dq = R^T k' = R^T R k = k for a pure rotation (attention factor 1), same positions
  EXPECT_LE(max_abs_diff(q.grad(), k.detach()), 1e-12);
  EXPECT_LE(max_abs_diff(k.grad(), q.detach()), 1e-12);
}

TEST(NnRotaryEmbedding, CacheIsRebuiltWhenTheRegimeChangesAndNeverStale) {
  RotaryEmbedding rope(RotaryEmbeddingOptions(16).scaling(dynamic_scaling()));
  const at::Tensor q = at::randn({1, 2, 4, 16});
  ops::RopeOptions direct;
  direct.scaling = dynamic_scaling();
  auto check = [&](const at::Tensor& positions) {
    const auto [q2, k2] = rope(q, q, positions);
    // the frequencies of max position + 1, as the op computes them afresh
    EXPECT_LE(max_abs_diff(q2, ops::rope(q, positions, direct)), 1e-6);
  };
  check(at::arange(4, at::kLong) + 36);  // L = 40 <= 64: default spectrum, 40 rows
  const auto builds = [&] { return rope_table_builds(rope->options(), at::kFloat); };
  const uint64_t first = builds();
  check(at::arange(4, at::kLong));  // same regime, within the table: served as is
  EXPECT_EQ(builds(), first);
  check(at::arange(4, at::kLong) + 200);  // L = 204 > 64: a new base, a rebuild
  const uint64_t second = builds();
  EXPECT_GT(second, first);
  check(at::arange(4, at::kLong));  // back below L0: the default spectrum again, not the grown one
  EXPECT_GT(builds(), second);
  check(at::tensor(std::vector<int64_t>{-3, -2, 0, 5}));  // negative positions: computed directly
}

TEST(NnRotaryEmbedding, FixedSeqLenSelectsTheRegime) {
  RotaryEmbedding rope(RotaryEmbeddingOptions(16).scaling(dynamic_scaling()).seq_len(256));
  const at::Tensor q = at::randn({1, 4, 16});
  ops::RopeOptions direct;
  direct.scaling = dynamic_scaling();
  direct.seq_len = 256;
  for (int64_t start : {0, 300}) {  // inside the cached range, and beyond it
    const at::Tensor positions = at::arange(start, start + 4, at::kLong);
    EXPECT_LE(max_abs_diff(std::get<0>(rope(q, q, positions)), ops::rope(q, positions, direct)), 1e-6);
  }
}

TEST(NnRotaryEmbedding, LearnedFrequenciesAreAParameterWithAGradient) {
  RotaryEmbedding rope(RotaryEmbeddingOptions(16).rotary_dim(8).learned_frequencies(true));
  ASSERT_TRUE(rope->omega().defined());
  EXPECT_EQ(rope->parameters().size(), 1u);
  EXPECT_LE(max_abs_diff(rope->omega(), ops::rope_inv_freq(8).first), 1e-7);  // float32 of base^(-2i/R)
  const at::Tensor q = at::randn({2, 5, 16});
  const at::Tensor positions = at::arange(5, at::kLong);
  const auto [q2, k2] = rope(q, q, positions);
  ops::RopeOptions o;
  o.rotary_dim = 8;
  EXPECT_LE(max_abs_diff(q2, ops::rope(q, positions, o)), 1e-6);
  (q2.narrow(-1, 0, 1) * 3.0 + k2.narrow(-1, 4, 1)).sum().backward();
  ASSERT_TRUE(rope->omega().grad().defined());
  EXPECT_GT(rope->omega().grad().abs().sum().item<double>(), 0.0);
}

TEST(NnRotaryEmbedding, XposScalesQueriesAndKeysInversely) {
  RotaryEmbedding rope(RotaryEmbeddingOptions(16).xpos_scale_base(32.0));
  const at::Tensor q = at::randn({1, 2, 3, 16}, at::kDouble);
  const at::Tensor k = at::randn({1, 2, 3, 16}, at::kDouble);
  const at::Tensor positions = at::arange(3, at::kLong);
  const auto [q2, k2] = rope(q, k, positions);
  ops::XposOptions o;
  o.scale_base = 32.0;
  const auto [q3, k3] = ops::xpos(q, k, positions, o);
  EXPECT_TRUE(at::equal(q2, q3) && at::equal(k2, k3));
  EXPECT_GT(max_abs_diff(q2, ops::rope(q, positions)), 1e-3);  // the zeta powers are there
}

TEST(NnRotaryEmbedding, AxialAndMultimodal) {
  RotaryEmbeddingAxial axial(RotaryEmbeddingAxialOptions(32).dims_per_axis({8, 24}));
  const at::Tensor coords = at::stack({at::arange(6, at::kLong).floor_divide(3), at::arange(6, at::kLong) % 3}, -1);
  const at::Tensor q = at::randn({2, 6, 32}, at::kDouble);
  ops::RopeAxialOptions ao;
  ao.dims_per_axis = {8, 24};
  EXPECT_TRUE(at::equal(std::get<0>(axial(q, q, coords)), ops::rope_axial(q, coords, ao)));

  MultimodalRotaryEmbedding mrope(MultimodalRotaryEmbeddingOptions(32, {4, 6, 6}).interleaved(true));
  const at::Tensor positions3 = at::stack({at::arange(6, at::kLong), coords.select(1, 0), coords.select(1, 1)});
  ops::MRopeOptions mo;
  mo.mrope_section = {4, 6, 6};
  mo.interleaved = true;
  EXPECT_TRUE(at::equal(std::get<1>(mrope(q, q, positions3)), ops::mrope(q, positions3, mo)));
  // text tokens (t = h = w) reduce to plain RoPE
  const at::Tensor text = at::arange(6, at::kLong).expand({3, 6});
  EXPECT_LE(max_abs_diff(std::get<0>(mrope(q, q, text)), ops::rope(q, at::arange(6, at::kLong))), 1e-15);
}

TEST(NnRotaryEmbedding, ModulesPrintTheirOptions) {
  std::ostringstream s;
  s << *RotaryEmbedding(RotaryEmbeddingOptions(64).rotary_dim(32).scaling(dynamic_scaling()));
  EXPECT_EQ(s.str(),
            "posenc::nn::RotaryEmbedding(head_dim=64, rotary_dim=32, base=10000, layout=half, rope_type=dynamic, "
            "precision=exact)");
}

TEST(NnRotaryEmbedding, BadOptionsAndInputsRaiseValueErrors) {
  expect_value_error([] { RotaryEmbedding(RotaryEmbeddingOptions(64).rotary_dim(7)); },
                     "[RotaryEmbedding] rotary_dim must be even, got 7");
  expect_value_error([] { RotaryEmbedding(RotaryEmbeddingOptions(64).rotary_dim(96)); },
                     "[RotaryEmbedding] rotary_dim must be at most head_dim (64), got 96");
  expect_value_error(
      [] { RotaryEmbedding(RotaryEmbeddingOptions(64).learned_frequencies(true).scaling(dynamic_scaling())); },
      "[RotaryEmbedding] learned_frequencies start from base^(-2i/R) and take no scaling, got rope_type 'dynamic'");
  expect_value_error([] { RotaryEmbedding(RotaryEmbeddingOptions(64).learned_frequencies(true).xpos_scale_base(8)); },
                     "[RotaryEmbedding] xPos and learned_frequencies cannot be combined");
  RopeScaling linear;
  linear.type = RopeType::kLinear;
  expect_value_error([&] { RotaryEmbedding(RotaryEmbeddingOptions(64).scaling(linear)); },
                     "[rope] linear needs factor");
  RotaryEmbedding rope(64);
  const at::Tensor q = at::zeros({2, 4, 16, 64});
  expect_value_error([&] { rope(q, at::zeros({2, 4, 16, 32}), at::arange(16, at::kLong)); },
                     "[RotaryEmbedding] k must have head_dim = 64 channels in its last dimension, got shape "
                     "(2, 4, 16, 32)");
  expect_value_error([&] { rope(q, q, at::zeros({3, 16}, at::kLong)); },
                     "[RotaryEmbedding] positions must have shape (T) = (16) or (B, T) = (2, 16), got (3, 16)");
  expect_value_error([] { MultimodalRotaryEmbedding(MultimodalRotaryEmbeddingOptions(64, {8, 8, 8})); },
                     "[MultimodalRotaryEmbedding] mrope_section must sum to rotary_dim/2 = 32, got 24 (8+8+8)");
  expect_value_error([] { RotaryEmbeddingAxial(RotaryEmbeddingAxialOptions(64).dims_per_axis({16, 32})); },
                     "[RotaryEmbeddingAxial] dims_per_axis must sum to rotary_dim = 64, got 48 (16+32)");
  RotaryEmbeddingAxial axial(64);
  expect_value_error([&] { axial(q, q, at::zeros({15, 2}, at::kLong)); },
                     "[RotaryEmbeddingAxial] coords must have shape (T, n_axes) = (16, 2) or (B, T, n_axes) = "
                     "(2, 16, 2), got (15, 2)");
}

// ---------------------------------------------------------------------------
// QueryTemperature

TEST(NnQueryTemperature, ScalesQueriesByTheLogOfTheirPosition) {
  QueryTemperature t(QueryTemperatureOptions().floor_scale(8192).attn_scale(0.1));
  const std::vector<int64_t> p = {0, 1, 8190, 8191, 8192, 16383, 16384, int64_t{1} << 20, int64_t{1} << 40};
  const at::Tensor got = t->scales(at::tensor(p));
  ASSERT_EQ(got.scalar_type(), at::kDouble);
  for (size_t i = 0; i < p.size(); ++i) {
    const long double x = static_cast<long double>(p[i]);
    const long double want = std::log(std::floor((x + 1) / 8192) + 1) * 0.1L + 1;
    EXPECT_NEAR(got[static_cast<int64_t>(i)].item<double>(), static_cast<double>(want), 1e-15) << p[i];
  }
  const at::Tensor q = at::randn({2, 3, 5, 4}, at::kDouble);
  const at::Tensor positions = at::tensor(std::vector<int64_t>{0, 8191, 16383, 40000, 99999});
  EXPECT_TRUE(at::equal(t(q, positions), q * t->scales(positions).unsqueeze(-1)));
  const at::Tensor per_batch = at::stack({positions, positions + 8192});
  EXPECT_TRUE(at::equal(t(q, per_batch)[1], q[1] * t->scales(positions + 8192).unsqueeze(-1)));
  const at::Tensor q32 = q.to(at::kFloat);
  EXPECT_EQ(t(q32, at::arange(5, at::kLong)).scalar_type(), at::kFloat);
  std::ostringstream s;
  s << *t;
  EXPECT_EQ(s.str(), "posenc::nn::QueryTemperature(floor_scale=8192, attn_scale=0.1)");
}

TEST(NnQueryTemperature, BadOptionsAndInputsRaiseValueErrors) {
  expect_value_error([] { QueryTemperature(QueryTemperatureOptions().floor_scale(-1)); },
                     "[QueryTemperature] floor_scale must be > 0, got -1");
  QueryTemperature t;
  const at::Tensor q = at::zeros({2, 3, 5, 4});
  expect_value_error([&] { t(q, at::arange(4, at::kLong)); },
                     "[QueryTemperature] positions must have shape (T) = (5) or (B, T), got (4)");
  expect_value_error([&] { t(q, at::tensor(std::vector<int64_t>{-3, 0, 1, 2, 3})); },
                     "[QueryTemperature] positions must be >= 0, got -3");
}

}  // namespace
}  // namespace posenc::nn::test
