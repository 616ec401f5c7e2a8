// CopeBias (posenc/nn/cope_bias.h) and its op: the dense term against the
// paper's listing written here with torch ops in float64 (sigmoid, flip /
// cumsum / flip, clamp, gather), first derivatives of q, k and e against
// central differences (a float64 gradcheck), the fused attention (CoPE per
// query row) against the composed path and against attention with the plain
// term as a dense bias (outputs and gradients of q, k, v and e; causal,
// Tq != Tk, key padding), and the refusals word for word.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>
#include <torch/autograd.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "posenc/nn/attention_ops.h"
#include "posenc/nn/cope_bias.h"
#include "reference.h"

namespace posenc::nn::test {
namespace {

const auto kF64 = at::TensorOptions().dtype(at::kDouble);

// The paper's CoPE listing on (B, H, Tq, Tk) logits: gates of the scaled, masked logits; positions the
// reverse cumulative sum clamped at npos - 1; q . e interpolated. 0 after the query. Differentiable.
at::Tensor plain_term(const at::Tensor& q, const at::Tensor& k, const at::Tensor& e, double scale,
                      const at::Tensor& padding = {}) {
  const int64_t q_len = q.size(2), k_len = k.size(2);
  const at::Tensor i = at::arange(q_len, at::kLong).unsqueeze(1), j = at::arange(k_len, at::kLong).unsqueeze(0);
  at::Tensor hidden = (j - i > k_len - q_len).view({1, 1, q_len, k_len});
  if (padding.defined()) hidden = at::logical_or(hidden, padding.view({padding.size(0), 1, 1, k_len}));
  const at::Tensor gates = at::sigmoid(at::matmul(q, k.transpose(-1, -2)) * scale).masked_fill(hidden, 0.0);
  const at::Tensor pos = gates.flip(-1).cumsum(-1).flip(-1).clamp_max(static_cast<double>(e.size(0) - 1));
  const at::Tensor lo = pos.floor(), hi = pos.ceil(), w = pos - lo;
  const at::Tensor z = at::matmul(q, e.t());
  const at::Tensor out = z.gather(-1, hi.to(at::kLong)) * w + z.gather(-1, lo.to(at::kLong)) * (1 - w);
  return out.masked_fill((j - i > k_len - q_len).view({1, 1, q_len, k_len}), 0.0);
}

TEST(CopeBias, OpMatchesThePaper) {
  at::manual_seed(1);
  for (const int64_t npos : {3, 64}) {  // positions clamped, and not
    const at::Tensor q = at::randn({2, 3, 6, 8}, kF64) * 2, k = at::randn({2, 3, 11, 8}, kF64) * 2;
    const at::Tensor e = at::randn({npos, 8}, kF64);
    at::Tensor padding = at::zeros({2, 11}, at::kBool);
    padding.index_put_({1, at::indexing::Slice(0, 11, 3)}, true);
    for (const bool pad : {false, true}) {
      const at::Tensor got = ops::cope_bias(q, k, e, 0.35, pad ? std::optional<at::Tensor>(padding) : std::nullopt);
      EXPECT_LT(max_abs_diff(got, plain_term(q, k, e, 0.35, pad ? padding : at::Tensor())), 1e-12);
    }
    // float32 math for float32 input: ~1e-6 relative to |q . e| of a few units.
    const at::Tensor got = ops::cope_bias(q.to(at::kFloat), k.to(at::kFloat), e.to(at::kFloat), 0.35);
    EXPECT_LT(max_abs_diff(got.to(at::kDouble), plain_term(q, k, e, 0.35)), 5e-5);
  }
}

// d/dx sum(w * term) for every element of q, k, e against central differences of the op.
TEST(CopeBias, GradcheckEveryInput) {
  at::manual_seed(2);
  for (const int64_t npos : {3, 16}) {
    SCOPED_TRACE("npos=" + std::to_string(npos));
    at::Tensor q = (at::randn({2, 2, 4, 5}, kF64) * 2).requires_grad_(true);
    at::Tensor k = (at::randn({2, 2, 7, 5}, kF64) * 2).requires_grad_(true);
    at::Tensor e = at::randn({npos, 5}, kF64).requires_grad_(true);
    at::Tensor padding = at::zeros({2, 7}, at::kBool);
    padding.index_put_({0, 2}, true);
    const at::Tensor w = at::randn({2, 2, 4, 7}, kF64);
    const auto loss = [&] { return (ops::cope_bias(q, k, e, 0.4, padding) * w).sum(); };
    loss().backward();
    at::NoGradGuard no_grad;
    for (at::Tensor* p : {&q, &k, &e}) {
      const at::Tensor flat = p->view({-1});
      ASSERT_TRUE(p->grad().defined());
      EXPECT_GT(p->grad().abs().max().item<double>(), 1e-3);
      for (int64_t n = 0; n < flat.numel(); ++n) {
        const double keep = flat[n].item<double>(), step = 1e-6;
        flat[n].fill_(keep + step);
        const double up = loss().item<double>();
        flat[n].fill_(keep - step);
        const double down = loss().item<double>();
        flat[n].fill_(keep);
        // 1e-7: step^2 truncation and rounding of double sums (no floor / clamp kink within a step here).
        EXPECT_NEAR(p->grad().view({-1})[n].item<double>(), (up - down) / (2 * step), 1e-7) << n;
      }
    }
  }
}

// Attention with the module's term on the fused path (per query row), the
// composed path (dense op), and with the plain term as a dense bias.
void fused_equals_composed(at::ScalarType dtype, double tol) {
  at::manual_seed(11);
  const int64_t batch = 2, heads = 3, q_len = 50, k_len = 140, dh = 8;
  const auto o = at::TensorOptions().dtype(dtype);
  CopeBias m(CopeBiasOptions(heads, dh).npos_max(40));  // rows longer than 40: some positions clamp
  m->to(dtype);
  {
    at::NoGradGuard no_grad;
    m->e().normal_();  // off the zero init: the term matters
  }
  const at::Tensor q0 = at::randn({batch, heads, q_len, dh}, o), k0 = at::randn({batch, heads, k_len, dh}, o);
  const at::Tensor v0 = at::randn({batch, heads, k_len, dh}, o), w = at::randn({batch, heads, q_len, dh}, o);
  at::Tensor padding = at::zeros({batch, k_len}, at::kBool);
  padding.index_put_({1, at::indexing::Slice(0, k_len, 7)}, true);
  const double scale = 1.0 / std::sqrt(static_cast<double>(dh));
  struct Result {
    at::Tensor out;
    std::vector<at::Tensor> grads;  // q, k, v, e
  };
  const auto run = [&](int path) {
    const at::Tensor q = q0.clone().requires_grad_(true), k = k0.clone().requires_grad_(true);
    const at::Tensor v = v0.clone().requires_grad_(true);
    m->e().mutable_grad() = at::Tensor();
    AttentionTerms terms;
    if (path < 2) {
      m->add_terms(terms, q_len, k_len, dtype);
    } else {
      terms.bias = plain_term(q.to(at::kDouble), k.to(at::kDouble), m->e().to(at::kDouble), scale, padding).to(dtype);
      terms.causal = true;
    }
    AttentionCall call;
    call.key_padding_mask = padding;
    const at::Tensor out = std::get<0>(path == 0 ? ops::attention_fused(q, k, v, terms, call)
                                                 : ops::attention_composed(q, k, v, terms, call));
    (out * w).sum().backward();
    return Result{out.detach(), {q.grad(), k.grad(), v.grad(), m->e().grad()}};
  };
  const Result fused = run(0), composed = run(1), dense = run(2);
  const std::vector<std::string> names{"q", "k", "v", "e"};
  EXPECT_TRUE(at::allclose(fused.out, composed.out, 0, tol));
  EXPECT_TRUE(at::allclose(fused.out, dense.out, 0, tol));
  for (size_t n = 0; n < names.size(); ++n) {
    SCOPED_TRACE(names[n]);
    ASSERT_TRUE(fused.grads[n].defined() && composed.grads[n].defined() && dense.grads[n].defined());
    const double s = std::max(1.0, composed.grads[n].abs().max().item<double>());
    EXPECT_LE(max_abs_diff(fused.grads[n], composed.grads[n]), tol * s);
    EXPECT_LE(max_abs_diff(fused.grads[n], dense.grads[n]), tol * s);
    EXPECT_GT(fused.grads[n].abs().max().item<double>(), 0.0);
  }
}

// float64: the same sums in another order; float32: ~1e-6 relative over a few hundred terms per sum.
TEST(CopeBias, FusedAttentionEqualsComposedDouble) { fused_equals_composed(at::kDouble, 1e-10); }
TEST(CopeBias, FusedAttentionEqualsComposedFloat) { fused_equals_composed(at::kFloat, 5e-5); }

// The public op's cope_e keyword reaches the same term as the module's add_terms.
TEST(CopeBias, InitialisationAndDenseBias) {
  CopeBias m(CopeBiasOptions(2, 4));
  EXPECT_EQ(m->e().sizes(), at::IntArrayRef({64, 4}));  // npos_max 64 by default
  EXPECT_EQ(m->e().abs().max().item<double>(), 0.0);    // the authors' zeros
  at::NoGradGuard no_grad;
  m->e().normal_();
  const at::Tensor q = at::randn({1, 2, 3, 4}), k = at::randn({1, 2, 5, 4});
  const at::Tensor b = m->bias(q, k, 0.5);
  EXPECT_TRUE(std::isinf(b[0][0][0][3].item<double>()));  // after the query: -inf
  EXPECT_LT(max_abs_diff(b[0][0][2].to(at::kDouble),
                         plain_term(q.to(at::kDouble), k.to(at::kDouble), m->e().to(at::kDouble), 0.5)[0][0][2]),
            1e-5);
}

TEST(CopeBias, Errors) {
  expect_value_error([] { CopeBias(CopeBiasOptions(2, 4).causal(false)); },
                     "[CopeBias] causal must be true: CoPE is defined for decoders (causal attention), got false");
  expect_value_error([] { CopeBias(CopeBiasOptions(2, 4).npos_max(0)); }, "[CopeBias] npos_max must be >= 1, got 0");
  expect_value_error([] { CopeBias(CopeBiasOptions(2, 0)); }, "[CopeBias] head_dim must be >= 1, got 0");
  CopeBias m(CopeBiasOptions(2, 4));
  try {
    m->bias(3, 3);
    ADD_FAILURE() << "expected a runtime_error";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()),
              "[CopeBias] the CoPE term depends on q and k, not on the lengths alone: use bias(q, k, scale) or let "
              "the attention compute it (add_terms)");
  }
  const at::Tensor q = at::randn({1, 2, 3, 4}), k = at::randn({1, 2, 5, 4});
  expect_value_error([&] { ops::cope_bias(q, k, at::randn({8, 3}), 0.5); },
                     "[cope_bias] e must be [npos, Dh] with npos >= 1 and Dh = 4, got (8, 3)");
  expect_value_error([&] { ops::cope_bias(k, q, at::randn({8, 4}), 0.5); },
                     "[cope_bias] CoPE is causal and needs q_len <= k_len, got q_len 5 and k_len 3");
  expect_value_error([&] { ops::cope_bias(q, k, at::randn({8, 4}), -1.0); },
                     "[cope_bias] scale must be finite and > 0, got -1");
  AttentionTerms terms;
  terms.tiles = {cope_tile(at::randn({8, 4}))};
  expect_value_error([&] { ops::attention(q, k, k, terms); },
                     "[attention] the CoPE term needs causal attention (CoPE is defined for decoders), got causal "
                     "false");
  terms.causal = true;
  terms.tiles = {cope_tile(at::randn({8, 5}))};
  expect_value_error([&] { ops::attention(q, k, k, terms); },
                     "[attention] cope_e must be [npos, Dh] with npos >= 1 and Dh = 4, got (8, 5)");
}

}  // namespace
}  // namespace posenc::nn::test
