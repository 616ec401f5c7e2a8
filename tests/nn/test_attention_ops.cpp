// The attention op API (posenc/nn/attention_ops.h): AttentionTerms through
// ops::attention, attention_composed and attention_fused against a plain
// float64 loop written here from the formula in the header; the automatic
// path choice (fused, composed for dropout and weights with a gradient),
// dropout, the fused gradient of every term against the composed one. The Python tests
// (tests/python/test_attention*.py) cover every family and error in depth.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/autograd.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <tuple>
#include <vector>

#include "posenc/nn/attention_ops.h"
#include "reference.h"

namespace posenc::nn::test {
namespace {

at::Tensor randn(at::IntArrayRef sizes, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randn(sizes, gen, at::kDouble);
}

// Row r of head h's relative table, [rows, D] shared or [H, rows, D].
at::Tensor row_of(const at::Tensor& table, int64_t h, int64_t r) { return table.dim() == 2 ? table[r] : table[h][r]; }

// float64 loops over (b, h, i, j) from the formula of posenc/nn/attention_ops.h.
std::tuple<at::Tensor, at::Tensor> reference(const at::Tensor& q0, const at::Tensor& k0, const at::Tensor& v0,
                                             const AttentionTerms& t, const AttentionCall& call) {
  const at::Tensor q = q0.to(at::kDouble), k = k0.to(at::kDouble), v = v0.to(at::kDouble);
  const int64_t nb = q.size(0), nh = q.size(1), tq = q.size(2), tk = k.size(2), dh = q.size(3), dv = v.size(3);
  const double scale = call.scale.value_or(1.0 / std::sqrt(static_cast<double>(dh)));
  const int64_t kd = t.max_distance, hg = t.grid_height, wg = t.grid_width;
  const auto d64 = [](const at::Tensor& x) { return x.defined() ? x.to(at::kDouble) : x; };
  const at::Tensor ob = d64(t.offset_bias), gb = d64(t.grid_bias), rk = d64(t.rel_k), rv = d64(t.rel_v);
  const at::Tensor u = d64(t.content_shift), w = d64(t.relative_shift), gh = d64(t.grid_h), gw = d64(t.grid_w);
  const at::Tensor bias = t.bias.defined() ? d64(t.bias).expand({nb, nh, tq, tk}) : at::Tensor();
  at::Tensor out = at::zeros({nb, nh, tq, dv}, at::kDouble), probs = at::zeros({nb, nh, tq, tk}, at::kDouble);
  for (int64_t b = 0; b < nb; ++b) {
    for (int64_t h = 0; h < nh; ++h) {
      for (int64_t i = 0; i < tq; ++i) {
        const int64_t ip = i + tk - tq;
        std::vector<double> s(tk, -std::numeric_limits<double>::infinity());
        for (int64_t j = 0; j < tk; ++j) {
          const bool hidden = ((call.causal || t.causal) && j > ip) ||
                              (call.key_padding_mask && call.key_padding_mask->index({b, j}).item<bool>());
          if (hidden) continue;
          const int64_t d = j - ip, r = std::clamp(d, -kd, kd) + kd;
          const at::Tensor qi = q[b][h][i];
          double x = (u.defined() ? qi + u[h] : qi).dot(k[b][h][j]).item<double>();
          if (rk.defined()) x += (w.defined() ? qi + w[h] : qi).dot(row_of(rk, h, r)).item<double>();
          if (gh.defined()) {
            const int64_t dy = j / wg - i / wg + hg - 1, dx = j % wg - i % wg + wg - 1;
            x += qi.dot(row_of(gh, h, dy) + row_of(gw, h, dx)).item<double>();
          }
          x *= scale;
          if (ob.defined()) x += ob[h][d + tk - 1].item<double>();
          if (gb.defined()) x += gb[h][j / wg - i / wg + hg - 1][j % wg - i % wg + wg - 1].item<double>();
          if (bias.defined()) x += bias[b][h][i][j].item<double>();
          s[j] = x;
        }
        const double top = tk > 0 ? *std::max_element(s.begin(), s.end()) : 0.0;
        if (!std::isfinite(top)) continue;  // every key hidden: p = 0, out = 0
        double sum = 0;
        for (double& x : s) sum += (x = std::exp(x - top));
        for (int64_t j = 0; j < tk; ++j) {
          const double p = s[j] / sum;
          probs[b][h][i][j] = p;
          at::Tensor value = v[b][h][j];
          if (rv.defined()) value = value + row_of(rv, h, std::clamp(j - ip, -kd, kd) + kd);
          out[b][h][i] += p * value;
        }
      }
    }
  }
  return {out, probs};
}

struct Inputs {
  at::Tensor q, k, v;
  AttentionTerms terms;
  AttentionCall call;
};

// B=2, H=3, Tq=4, Tk=7, Dh=6, Dv=5: every 1D term, causal and padding (batch 1 pads every key).
Inputs one_dimensional() {
  Inputs in;
  in.q = randn({2, 3, 4, 6}, 1);
  in.k = randn({2, 3, 7, 6}, 2);
  in.v = randn({2, 3, 7, 5}, 3);
  in.terms.offset_bias = randn({3, 4 + 7 - 1}, 4);
  in.terms.bias = randn({3, 4, 7}, 5);
  in.terms.rel_k = randn({3, 5, 6}, 6);
  in.terms.rel_v = randn({5, 5}, 7);
  in.terms.max_distance = 2;
  in.terms.content_shift = randn({3, 6}, 8);
  in.terms.relative_shift = randn({3, 6}, 9);
  in.terms.causal = true;  // asked by a term, not by the call
  at::Tensor mask = at::zeros({2, 7}, at::kBool);
  mask.index_put_({0, 3}, true);
  mask.index_put_({1}, true);
  in.call.key_padding_mask = mask;
  return in;
}

// B=1, H=2, a 2 x 3 grid: 2D tables and grid bias with a dense bias and a scale.
Inputs two_dimensional() {
  Inputs in;
  in.q = randn({1, 2, 6, 4}, 11);
  in.k = randn({1, 2, 6, 4}, 12);
  in.v = randn({1, 2, 6, 3}, 13);
  in.terms.grid_h = randn({3, 4}, 14);
  in.terms.grid_w = randn({2, 5, 4}, 15);
  in.terms.grid_bias = randn({2, 3, 5}, 16);
  in.terms.grid_height = 2;
  in.terms.grid_width = 3;
  in.terms.bias = randn({1, 1, 6, 6}, 17);
  in.call.scale = 0.7;
  return in;
}

void expect_paths_match_reference(Inputs in, at::ScalarType dtype, double tolerance) {
  in.q = in.q.to(dtype), in.k = in.k.to(dtype), in.v = in.v.to(dtype);
  in.call.return_weights = true;
  const auto [expected_out, expected_probs] = reference(in.q, in.k, in.v, in.terms, in.call);
  using Path = std::tuple<at::Tensor, at::Tensor> (*)(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                                      const AttentionTerms&, const AttentionCall&);
  for (Path path : {&ops::attention, &ops::attention_composed, &ops::attention_fused}) {
    const auto [out, probs] = path(in.q, in.k, in.v, in.terms, in.call);
    EXPECT_EQ(out.scalar_type(), dtype);
    EXPECT_LE(max_abs_diff(out, expected_out), tolerance);
    EXPECT_LE(max_abs_diff(probs, expected_probs), tolerance);
  }
}

// float64: only the summation order differs (logits of a few units), 1e-12 is far above it.
TEST(AttentionOps, OneDimensionalTermsOnEveryPathFloat64) {
  expect_paths_match_reference(one_dimensional(), at::kDouble, 1e-12);
}
TEST(AttentionOps, TwoDimensionalTermsOnEveryPathFloat64) {
  expect_paths_match_reference(two_dimensional(), at::kDouble, 1e-12);
}
// float32 math on float32 inputs (the reference sees the same values): logit errors ~Dh * 2^-24
// times values of a few units; 1e-5 is ~10x the measured error.
TEST(AttentionOps, OneDimensionalTermsOnEveryPathFloat32) {
  Inputs in = one_dimensional();
  for (at::Tensor* t : {&in.terms.offset_bias, &in.terms.bias, &in.terms.rel_k, &in.terms.rel_v,
                        &in.terms.content_shift, &in.terms.relative_shift}) {
    *t = t->to(at::kFloat);
  }
  expect_paths_match_reference(in, at::kFloat, 1e-5);
}

TEST(AttentionOps, FullyMaskedRowsAreZero) {
  Inputs in = one_dimensional();
  for (bool fused : {false, true}) {
    const auto [out, weights] = fused ? ops::attention_fused(in.q, in.k, in.v, in.terms, in.call)
                                      : ops::attention_composed(in.q, in.k, in.v, in.terms, in.call);
    EXPECT_FALSE(weights.defined());  // not asked
    EXPECT_TRUE(out[1].eq(0).all().item<bool>());
    EXPECT_TRUE(out.isfinite().all().item<bool>());
  }
}

TEST(AttentionOps, AutoPathIsFusedWithAGradient) {
  Inputs in = one_dimensional();
  const at::Tensor fused = std::get<0>(ops::attention_fused(in.q, in.k, in.v, in.terms, in.call));
  const at::Tensor composed = std::get<0>(ops::attention_composed(in.q, in.k, in.v, in.terms, in.call));
  ASSERT_FALSE(at::equal(fused, composed));  // the paths round differently, so the choice is visible

  const at::Tensor plain = std::get<0>(ops::attention(in.q, in.k, in.v, in.terms, in.call));
  EXPECT_FALSE(plain.requires_grad());
  EXPECT_TRUE(at::equal(plain, fused));

  in.terms.rel_k = in.terms.rel_k.clone().requires_grad_();  // a term's parameter, as in training
  const at::Tensor trained = std::get<0>(ops::attention(in.q, in.k, in.v, in.terms, in.call));
  ASSERT_TRUE(trained.grad_fn() != nullptr);
  EXPECT_TRUE(at::equal(trained, fused));
  trained.sum().backward();
  EXPECT_TRUE(in.terms.rel_k.grad().defined() && in.terms.rel_k.grad().isfinite().all().item<bool>());

  // Weights that need a gradient: the composed path (the fused weights carry none).
  in.call.return_weights = true;
  const auto [out, weights] = ops::attention(in.q, in.k, in.v, in.terms, in.call);
  EXPECT_TRUE(weights.requires_grad());
  EXPECT_TRUE(at::equal(out, composed));
  EXPECT_FALSE(std::get<1>(ops::attention_fused(in.q, in.k, in.v, in.terms, in.call)).requires_grad());
}

// Every differentiable input of `in` made a leaf that requires grad; returns them.
std::vector<at::Tensor*> make_leaves(Inputs& in) {
  std::vector<at::Tensor*> leaves;
  for (at::Tensor* t : {&in.q, &in.k, &in.v, &in.terms.offset_bias, &in.terms.grid_bias, &in.terms.bias,
                        &in.terms.rel_k, &in.terms.rel_v, &in.terms.content_shift, &in.terms.relative_shift,
                        &in.terms.grid_h, &in.terms.grid_w}) {
    if (!t->defined()) continue;
    *t = t->detach().clone().requires_grad_();
    leaves.push_back(t);
  }
  return leaves;
}

void expect_fused_gradients_match_composed(Inputs in) {
  const std::vector<at::Tensor*> leaves = make_leaves(in);
  const at::Tensor grad_out = randn({in.q.size(0), in.q.size(1), in.q.size(2), in.v.size(3)}, 99);
  std::vector<at::Tensor> inputs;
  for (at::Tensor* t : leaves) inputs.push_back(*t);
  const at::Tensor composed = std::get<0>(ops::attention_composed(in.q, in.k, in.v, in.terms, in.call));
  const at::Tensor fused = std::get<0>(ops::attention_fused(in.q, in.k, in.v, in.terms, in.call));
  const auto expected = torch::autograd::grad({composed}, inputs, {grad_out});
  const auto got = torch::autograd::grad({fused}, inputs, {grad_out});
  ASSERT_EQ(expected.size(), got.size());
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE(i);
    ASSERT_EQ(got[i].sizes(), expected[i].sizes());
    EXPECT_GT(expected[i].abs().sum().item<double>(), 0);  // every term reaches the loss
    EXPECT_LE(max_abs_diff(got[i], expected[i]), 1e-12);
  }
}

// float64: the two paths differ only in summation order.
TEST(AttentionOps, FusedGradientOfEveryOneDimensionalTermIsTheComposedOne) {
  expect_fused_gradients_match_composed(one_dimensional());
}
TEST(AttentionOps, FusedGradientOfEveryTwoDimensionalTermIsTheComposedOne) {
  expect_fused_gradients_match_composed(two_dimensional());
}

TEST(AttentionOps, FusedBackwardRefusesCreateGraph) {
  Inputs in = one_dimensional();
  in.q = in.q.clone().requires_grad_();
  const at::Tensor out = std::get<0>(ops::attention_fused(in.q, in.k, in.v, in.terms, in.call));
  expect_value_error(
      [&] { torch::autograd::grad({out.sum()}, {in.q}, {}, /*retain_graph=*/true, /*create_graph=*/true); },
      "[attention] the fused backward has no backward of its own (create_graph); use path='composed' for higher "
      "derivatives");
}

TEST(AttentionOps, DropoutTakesTheComposedPathAndScalesTheKeptWeights) {
  Inputs in = one_dimensional();
  in.call.return_weights = true;
  const at::Tensor p = std::get<1>(ops::attention(in.q, in.k, in.v, in.terms, in.call));
  in.call.dropout = 0.5;
  at::manual_seed(0);
  const at::Tensor dropped = std::get<1>(ops::attention(in.q, in.k, in.v, in.terms, in.call));
  // Each weight is dropped (0) or kept and scaled by 1/(1 - 0.5); some of both among the non-zero ones.
  const at::Tensor kept = dropped.ne(0);
  // 1e-14: p comes from the fused path, the dropped weights from the composed one (float64 rounding apart)
  EXPECT_LE(max_abs_diff(dropped.masked_select(kept), 2 * p.masked_select(kept)), 1e-14);
  const int64_t live = p.ne(0).sum().item<int64_t>(), survivors = kept.sum().item<int64_t>();
  EXPECT_GT(survivors, 0);
  EXPECT_LT(survivors, live);
}

TEST(AttentionOps, SixteenBitActivationsTakeFloat32Terms) {
  // Modules write their terms in the compute dtype (float32) for bfloat16 activations.
  Inputs in = one_dimensional();
  for (at::Tensor* t : {&in.terms.offset_bias, &in.terms.bias, &in.terms.rel_k, &in.terms.rel_v,
                        &in.terms.content_shift, &in.terms.relative_shift}) {
    *t = t->to(at::kFloat);
  }
  in.q = in.q.to(at::kBFloat16), in.k = in.k.to(at::kBFloat16), in.v = in.v.to(at::kBFloat16);
  const at::Tensor expected = std::get<0>(reference(in.q, in.k, in.v, in.terms, in.call));
  for (bool fused : {false, true}) {
    const at::Tensor out = std::get<0>(fused ? ops::attention_fused(in.q, in.k, in.v, in.terms, in.call)
                                             : ops::attention_composed(in.q, in.k, in.v, in.terms, in.call));
    ASSERT_EQ(out.scalar_type(), at::kBFloat16);
    // one rounding to bfloat16's 8-bit significand (2^-8 relative, doubled for ties) after float32 math
    const at::Tensor err = (out.to(at::kDouble) - expected).abs();
    EXPECT_TRUE(err.le(std::ldexp(1.0, -8) * expected.abs() + 1e-5).all().item<bool>());
  }
}

TEST(AttentionOps, ErrorsNameTheTerm) {
  Inputs in = one_dimensional();
  in.terms.offset_bias = randn({3, 9}, 1);
  for (bool fused : {false, true}) {
    expect_value_error(
        [&] {
          fused ? ops::attention_fused(in.q, in.k, in.v, in.terms, in.call)
                : ops::attention_composed(in.q, in.k, in.v, in.terms, in.call);
        },
        "[attention] offset_bias must be [H, Tq + Tk - 1] = [3, 10], got [3, 9]");
  }
  in = one_dimensional();
  in.call.dropout = 1.0;
  expect_value_error([&] { ops::attention(in.q, in.k, in.v, in.terms, in.call); },
                     "[attention] dropout must be in [0, 1), got 1");
  in = two_dimensional();
  in.terms.grid_width = 2;
  expect_value_error([&] { ops::attention(in.q, in.k, in.v, in.terms, in.call); },
                     "[attention] 2D terms need q_len = k_len = height*width = 4, got q_len 6 and k_len 6");
}

}  // namespace
}  // namespace posenc::nn::test
