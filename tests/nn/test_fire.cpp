// FireBias (posenc/nn/fire_bias.h) and its op: the dense bias against the
// paper's formula written plainly, first derivatives of every parameter
// against central differences (a float64 gradcheck), the fused attention
// (FIRE computed per tile) against the composed path and against attention
// with the plain dense bias (outputs and gradients of q, k, v and every
// parameter; causal, Tq != Tk, key padding), the authors' initialisation,
// interpolation and monotonicity properties, and the refusals word for word.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>
#include <torch/autograd.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "posenc/nn/attention_ops.h"
#include "posenc/nn/fire_bias.h"
#include "reference.h"

namespace posenc::nn::test {
namespace {

const auto kF64 = at::TensorOptions().dtype(at::kDouble);
constexpr double kInf = std::numeric_limits<double>::infinity();

// b_h(i, j) = f(log(c (i' - j) + 1) / log(c max(L, i') + 1)), i' = i + k_len - q_len, keys after i': `after`.
at::Tensor plain_bias(const FireTerm& t, int64_t q_len, int64_t k_len, double after) {
  const at::Tensor w1 = t.w1.to(at::kDouble), b1 = t.b1.to(at::kDouble), w2 = t.w2.to(at::kDouble);
  const at::Tensor b2 = t.b2.to(at::kDouble);
  const double c = t.c.item<double>(), L = t.threshold.item<double>();
  const int64_t heads = w2.size(0), hidden = w1.size(0);
  at::Tensor out = at::empty({heads, q_len, k_len}, kF64);
  auto o = out.accessor<double, 3>();
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < q_len; ++i) {
      const int64_t query = i + k_len - q_len;
      for (int64_t j = 0; j < k_len; ++j) {
        if (j > query) {
          o[h][i][j] = after;
          continue;
        }
        const double x = std::log(c * static_cast<double>(query - j) + 1) /
                         std::log(c * std::max(L, static_cast<double>(query)) + 1);
        double b = b2[h].item<double>();
        for (int64_t k = 0; k < hidden; ++k) {
          b += w2[h][k].item<double>() * std::max(0.0, w1[k].item<double>() * x + b1[k].item<double>());
        }
        o[h][i][j] = b;
      }
    }
  }
  return out;
}

FireTerm random_term(int64_t heads, int64_t hidden, double c, double L, at::ScalarType dtype = at::kDouble) {
  const auto o = at::TensorOptions().dtype(dtype);
  return {at::rand({hidden}, o) * 2 - 1, at::rand({hidden}, o) * 2 - 1, (at::rand({heads, hidden}, o) - 0.5) / 3,
          (at::rand({heads}, o) - 0.5) / 3, at::scalar_tensor(c, o), at::scalar_tensor(L, o)};
}

TEST(FireBias, OpMatchesThePaper) {
  at::manual_seed(1);
  for (auto [q_len, k_len] : {std::pair<int64_t, int64_t>{6, 6}, {3, 9}, {7, 4}, {1, 1}, {40, 300}}) {
    SCOPED_TRACE("q=" + std::to_string(q_len) + " k=" + std::to_string(k_len));
    const FireTerm t = random_term(3, 8, 0.3, 10.5);
    const at::Tensor got = ops::fire_bias(t, q_len, k_len);
    ASSERT_EQ(got.scalar_type(), at::kDouble);
    // 1e-13: log1p and the hidden-unit sums in double against log and the plain loop.
    EXPECT_TRUE(at::allclose(got, plain_bias(t, q_len, k_len, 0.0), 0, 1e-13));
    // float32 in, float32 out: within float32 rounding of the same formula.
    FireTerm f = t;
    for (at::Tensor* x : {&f.w1, &f.b1, &f.w2, &f.b2, &f.c, &f.threshold}) *x = x->to(at::kFloat);
    const at::Tensor got32 = ops::fire_bias(f, q_len, k_len);
    ASSERT_EQ(got32.scalar_type(), at::kFloat);
    EXPECT_TRUE(at::allclose(got32.to(at::kDouble), plain_bias(f, q_len, k_len, 0.0), 0, 2e-6));
  }
  EXPECT_EQ(ops::fire_bias(random_term(2, 3, 0.1, 512), 0, 5).sizes(), (at::IntArrayRef{2, 0, 5}));
}

// Central differences of sum(bias * w) wrt every element of every parameter, against autograd (float64).
TEST(FireBias, GradcheckEveryParameter) {
  at::manual_seed(2);
  const int64_t q_len = 5, k_len = 9;
  for (double L : {3.5, 40.0}) {  // L below some queries (max picks i') and above all of them
    SCOPED_TRACE("L=" + std::to_string(L));
    FireTerm t = random_term(2, 6, 0.7, L);
    std::vector<at::Tensor*> params{&t.w1, &t.b1, &t.w2, &t.b2, &t.c, &t.threshold};
    for (at::Tensor* p : params) p->requires_grad_(true);
    const at::Tensor w = at::randn({2, q_len, k_len}, kF64);
    (ops::fire_bias(t, q_len, k_len) * w).sum().backward();
    at::NoGradGuard no_grad;
    for (size_t n = 0; n < params.size(); ++n) {
      at::Tensor& p = *params[n];
      const at::Tensor flat = p.view({-1});
      ASSERT_TRUE(p.grad().defined()) << n;
      for (int64_t e = 0; e < flat.numel(); ++e) {
        const double keep = flat[e].item<double>(), step = 1e-6;
        flat[e].fill_(keep + step);
        const double up = (ops::fire_bias(t, q_len, k_len) * w).sum().item<double>();
        flat[e].fill_(keep - step);
        const double down = (ops::fire_bias(t, q_len, k_len) * w).sum().item<double>();
        flat[e].fill_(keep);
        // 1e-7: step^2 truncation and rounding of double sums (no ReLU kink within a step here).
        EXPECT_NEAR(p.grad().view({-1})[e].item<double>(), (up - down) / (2 * step), 1e-7) << n << "," << e;
      }
    }
  }
}

// Attention with the module's term on the fused path (per tile), the composed
// path (dense op), and with the plain dense bias: outputs and gradients.
void fused_equals_composed(at::ScalarType dtype, double tol) {
  at::manual_seed(11);
  const int64_t batch = 2, heads = 3, q_len = 50, k_len = 140, dh = 8;
  const auto o = at::TensorOptions().dtype(dtype);
  FireBias m(FireBiasOptions(heads).hidden(16).init_L(120.5));  // queries at 90..139: both sides of L
  m->to(dtype);
  {
    at::NoGradGuard no_grad;
    m->c().fill_(0.3);  // moved off the init: c and L both matter
  }
  const at::Tensor q0 = at::randn({batch, heads, q_len, dh}, o), k0 = at::randn({batch, heads, k_len, dh}, o);
  const at::Tensor v0 = at::randn({batch, heads, k_len, dh}, o), w = at::randn({batch, heads, q_len, dh}, o);
  at::Tensor padding = at::zeros({batch, k_len}, at::kBool);
  padding.index_put_({1, at::indexing::Slice(0, k_len, 7)}, true);
  struct Result {
    at::Tensor out;
    std::vector<at::Tensor> grads;  // q, k, v, then the module's parameters
  };
  const auto run = [&](int path) {
    const at::Tensor q = q0.clone().requires_grad_(true), k = k0.clone().requires_grad_(true);
    const at::Tensor v = v0.clone().requires_grad_(true);
    for (const at::Tensor& p : m->parameters()) p.mutable_grad() = at::Tensor();
    AttentionTerms terms;
    if (path < 2) {
      m->add_terms(terms, q_len, k_len, dtype);
    } else {
      terms.bias = m->bias(q_len, k_len);  // dense, differentiable: the reference path
      terms.causal = true;
    }
    AttentionCall call;
    call.key_padding_mask = padding;
    const at::Tensor out = std::get<0>(path == 0 ? ops::attention_fused(q, k, v, terms, call)
                                                 : ops::attention_composed(q, k, v, terms, call));
    (out * w).sum().backward();
    Result r{out.detach(), {q.grad(), k.grad(), v.grad()}};
    for (const at::Tensor& p : m->parameters()) r.grads.push_back(p.grad());
    return r;
  };
  const Result fused = run(0), composed = run(1), dense = run(2);
  const std::vector<std::string> names{"q", "k", "v", "w1", "b1", "w2", "b2", "c", "L_multiplier"};
  EXPECT_TRUE(at::allclose(fused.out, composed.out, 0, tol));
  EXPECT_TRUE(at::allclose(fused.out, dense.out, 0, tol));
  for (size_t n = 0; n < names.size(); ++n) {
    SCOPED_TRACE(names[n]);
    ASSERT_TRUE(fused.grads[n].defined() && composed.grads[n].defined() && dense.grads[n].defined());
    const double scale = std::max(1.0, composed.grads[n].abs().max().item<double>());
    EXPECT_LE(max_abs_diff(fused.grads[n], composed.grads[n]), tol * scale);
    EXPECT_LE(max_abs_diff(fused.grads[n], dense.grads[n]), tol * scale);
    EXPECT_GT(fused.grads[n].abs().max().item<double>(), 0.0);
  }
}

// float64: the same sums in another order; float32: ~1e-6 relative over a few hundred terms per sum.
TEST(FireBias, FusedAttentionEqualsComposedDouble) { fused_equals_composed(at::kDouble, 1e-11); }
TEST(FireBias, FusedAttentionEqualsComposedFloat) { fused_equals_composed(at::kFloat, 3e-5); }

TEST(FireBias, InitialisationFollowsTheAuthors) {
  at::manual_seed(3);
  FireBias m(FireBiasOptions(4));
  EXPECT_EQ(m->options().hidden(), 32);
  EXPECT_TRUE(m->options().causal());
  std::vector<std::string> names;
  for (const auto& p : m->named_parameters()) names.push_back(p.key());
  EXPECT_EQ(names, (std::vector<std::string>{"w1", "b1", "w2", "b2", "c", "L_multiplier"}));
  EXPECT_EQ(m->w2().sizes(), (at::IntArrayRef{4, 32}));
  EXPECT_FLOAT_EQ(m->c().item<float>(), 0.1f);
  EXPECT_FLOAT_EQ(m->threshold().item<float>(), 512.0f);
  // torch.nn.Linear's draws: U(-1, 1) for 1 -> 32, U(-1/sqrt(32), 1/sqrt(32)) for 32 -> H.
  EXPECT_LE(m->w1().abs().max().item<double>(), 1.0);
  EXPECT_GT(m->w1().abs().max().item<double>(), 0.5);
  EXPECT_LE(m->w2().abs().max().item<double>(), 1 / std::sqrt(32.0));
  EXPECT_LE(m->b2().abs().max().item<double>(), 1 / std::sqrt(32.0));
  // A negative multiplier or c still gives L, c > 0 (the authors' absolute values).
  {
    at::NoGradGuard no_grad;
    m->L_multiplier().fill_(-0.5);
    m->c().fill_(-0.2);
  }
  EXPECT_FLOAT_EQ(m->threshold().item<float>(), 256.0f);
  EXPECT_FLOAT_EQ(m->effective_c().item<float>(), 0.2f);
}

// The authors' init draws f at random, so the bias is not monotone in |i - j| at init. What holds for
// any parameters: every row is f composed with an increasing map of i' - j onto [0, 1] (-inf after the
// query), the diagonal is f(0) on every row, and from i' >= L on the first key is f(1) on every row.
// So f non-increasing on [0, 1] (w1 >= 0, w2 <= 0) makes every row non-increasing in |i - j|.
TEST(FireBias, InterpolationAndMonotoneRows) {
  at::manual_seed(4);
  const int64_t q_len = 30, k_len = 30;
  FireBias m(FireBiasOptions(3).hidden(8).init_L(10.0));
  m->to(at::kDouble);
  at::Tensor b = m->bias(q_len, k_len).detach();
  const at::Tensor diag = b.diagonal(0, 1, 2);  // [H, T]
  EXPECT_TRUE(at::allclose(diag, diag.select(1, 0).unsqueeze(1).expand_as(diag), 0, 1e-14));
  const at::Tensor first = b.select(2, 0).narrow(1, 10, q_len - 10);  // queries i' >= L = 10
  EXPECT_TRUE(at::allclose(first, first.select(1, 0).unsqueeze(1).expand_as(first), 0, 1e-14));
  EXPECT_TRUE(at::isinf(b).equal(at::ones({q_len, k_len}, at::kBool).triu(1).expand_as(b)));
  {
    at::NoGradGuard no_grad;
    m->w1().abs_();
    m->w2().abs_().neg_();
  }
  b = m->bias(q_len, k_len).detach();
  // Along a row, key j - 1 is farther than key j: never above it.
  const at::Tensor farther = b.narrow(2, 0, k_len - 1), nearer = b.narrow(2, 1, k_len - 1);
  EXPECT_TRUE(at::logical_or(farther <= nearer, at::isinf(nearer)).all().item<bool>());
}

TEST(FireBias, Errors) {
  expect_value_error([] { FireBias(FireBiasOptions(2).causal(false)); },
                     "[FireBias] causal must be true: FIRE is defined for decoders (causal attention), got false");
  expect_value_error([] { FireBias(FireBiasOptions(2).hidden(0)); }, "[FireBias] hidden must be >= 1, got 0");
  expect_value_error([] { FireBias(FireBiasOptions(2).init_c(0.0)); }, "[FireBias] init_c must be > 0, got 0");
  expect_value_error([] { FireBias(FireBiasOptions(2).init_L(-1.0)); }, "[FireBias] init_L must be > 0, got -1");
  expect_value_error([] { FireBias(FireBiasOptions(0)); }, "[FireBias] num_heads must be >= 1, got 0");
  expect_value_error([] { FireBias(FireBiasOptions(1))->bias(4, 3); },
                     "[FireBias] causal attention needs every query to see a key: q_len must be <= k_len, got 4 "
                     "and 3");
  FireTerm t = random_term(2, 4, 0.1, 512);
  expect_value_error([&] { ops::fire_bias(t.w1, t.b1, t.w2, t.b2, at::scalar_tensor(-1.0, kF64), t.threshold, 2, 2); },
                     "[fire_bias] c must be > 0, got -1");
  expect_value_error([&] { ops::fire_bias(t.w1, t.b1, t.w2, t.b2, t.c, at::scalar_tensor(0.0, kF64), 2, 2); },
                     "[fire_bias] threshold must be > 0, got 0");
  expect_value_error([&] { ops::fire_bias(t.w1, t.b1, at::zeros({2, 3}, kF64), t.b2, t.c, t.threshold, 2, 2); },
                     "[fire_bias] w2 must be [H, hidden] = [H, 4], got (2, 3)");
  expect_value_error([&] { ops::fire_bias(t.w1, t.b1, t.w2, t.b2, at::ones({1}, kF64), t.threshold, 2, 2); },
                     "[fire_bias] c must be a 0-d tensor, got (1)");
  expect_value_error([&] { ops::fire_bias(t.w1, t.b1, t.w2, t.b2, t.c, t.threshold, -1, 2); },
                     "[fire_bias] q_len and k_len must be >= 0, got -1 and 2");
  // The attention: FIRE needs the causal mask, and one head count.
  const at::Tensor q = at::randn({1, 2, 3, 4}, kF64);
  AttentionTerms terms;
  terms.tiles = {fire_tile(t)};
  expect_value_error([&] { ops::attention_fused(q, q, q, terms); },
                     "[attention] the FIRE term needs causal attention (FIRE is defined for decoders), got causal "
                     "false");
  AttentionCall causal;
  causal.causal = true;
  FireTerm bad = t;
  bad.w2 = at::zeros({3, 4}, kF64);
  terms.tiles = {fire_tile(bad)};
  expect_value_error([&] { ops::attention_composed(q, q, q, terms, causal); },
                     "[attention] fire_w2 must be [H, hidden] = [2, 4], got (3, 4)");
  bad = t;
  bad.c = at::Tensor();
  terms.tiles = {fire_tile(bad)};
  expect_value_error([&] { ops::attention_fused(q, q, q, terms, causal); },
                     "[attention] the FIRE term needs fire_w1, fire_b1, fire_w2, fire_b2, fire_c and "
                     "fire_threshold, got no fire_c");
}

}  // namespace
}  // namespace posenc::nn::test
