// KerpleBias (posenc/nn/kerple_bias.h) and its op: the dense bias against the
// paper's formulas written plainly, the fused attention (offset rows, no
// (Tq, Tk) tensor) against the composed one and against attention with that
// plain bias, values and gradients of r1 and r2; the registry's names. The
// op's gradcheck is in tests/python/test_kerple.py.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>
#include <torch/autograd.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "posenc/nn/attention_ops.h"
#include "posenc/nn/encoding_registry.h"
#include "posenc/nn/kerple_bias.h"
#include "reference.h"

namespace posenc::nn::test {
namespace {

const auto kF64 = at::TensorOptions().dtype(at::kDouble);
constexpr double kInf = std::numeric_limits<double>::infinity();
using kernels::KerpleKind;

// The paper's bias of query i (at key position i + k_len - q_len) and key j, head h, in a plain loop.
at::Tensor plain_bias(KerpleKind kind, const at::Tensor& r1, const at::Tensor& r2, int64_t q_len, int64_t k_len,
                      bool causal) {
  const int64_t heads = r1.size(0);
  at::Tensor out = at::empty({heads, q_len, k_len}, kF64);
  auto o = out.accessor<double, 3>();
  for (int64_t h = 0; h < heads; ++h) {
    const double a = r1[h].item<double>(), b = r2[h].item<double>();
    for (int64_t i = 0; i < q_len; ++i) {
      for (int64_t j = 0; j < k_len; ++j) {
        const int64_t query = i + k_len - q_len;
        const double dist = std::abs(static_cast<double>(j - query));
        o[h][i][j] = causal && j > query ? -kInf
                     : kind == KerpleKind::kLog ? -a * std::log(1.0 + b * dist)
                                                : (dist == 0 ? 0.0 : -a * std::pow(dist, b));
      }
    }
  }
  return out;
}

KerpleBias module(KerpleKind kind, bool causal, int64_t heads = 3) {
  KerpleBias m(KerpleBiasOptions(heads).kind(kind).causal(causal));
  m->to(at::kDouble);
  return m;
}

TEST(KerpleBias, DenseBiasMatchesThePaper) {
  for (KerpleKind kind : {KerpleKind::kLog, KerpleKind::kPower}) {
    for (bool causal : {false, true}) {
      for (auto [q_len, k_len] : {std::pair<int64_t, int64_t>{6, 6}, {2, 7}, {1, 4}}) {
        SCOPED_TRACE(std::string(kernels::kerple_kind_name(kind)) + (causal ? " causal" : "") + " q=" +
                     std::to_string(q_len) + " k=" + std::to_string(k_len));
        at::manual_seed(7);
        KerpleBias m = module(kind, causal);
        const at::Tensor want = plain_bias(kind, m->r1().detach(), m->r2().detach(), q_len, k_len, causal);
        const at::Tensor got = m->bias(q_len, k_len);
        // 2 ulp: log1p / pow against log / pow of the same doubles.
        EXPECT_TRUE(at::allclose(got, want, 0, 4e-16)) << (got - want).abs().nan_to_num(0).max().item<double>();
        EXPECT_TRUE(at::equal(at::isinf(got), at::isinf(want)));
      }
    }
  }
  KerpleBias m = module(KerpleKind::kLog, false);
  EXPECT_EQ(m->bias(0, 5).sizes(), (at::IntArrayRef{3, 0, 5}));
}

TEST(KerpleBias, InitialisationFollowsTheAuthors) {
  at::manual_seed(3);
  KerpleBias log(KerpleBiasOptions(64));
  // r1 = 2 U(0, 1), r2 = U(0, 1), then kept >= eps.
  EXPECT_GE(log->r1().min().item<float>(), 0.01f);  // float32 parameters
  EXPECT_LE(log->r1().max().item<double>(), 2.0);
  EXPECT_GT(log->r1().max().item<double>(), 1.0);  // drawn over (0, 2), not (0, 1)
  EXPECT_GE(log->r2().min().item<float>(), 0.01f);
  EXPECT_LE(log->r2().max().item<double>(), 1.0);
  KerpleBias fixed(KerpleBiasOptions(2).kind(KerpleKind::kPower).r1(0.5).r2(2.0));
  EXPECT_TRUE(at::equal(fixed->r1(), at::full({2}, 0.5)));
  EXPECT_TRUE(at::equal(fixed->r2(), at::full({2}, 2.0)));
  // The projection undoes a step out of range, and leaves an in-range parameter's version alone.
  {
    at::NoGradGuard no_grad;
    fixed->r1()[0].fill_(-1.0);
    fixed->r2()[1].fill_(3.0);
  }
  fixed->project();
  EXPECT_EQ(fixed->r1()[0].item<float>(), 0.01f);
  EXPECT_EQ(fixed->r2()[1].item<float>(), 2.0f);
  const auto version = fixed->r1()._version();
  fixed->project();
  EXPECT_EQ(fixed->r1()._version(), version);
}

// Attention with the module's terms (offset rows) on the fused and the composed
// path, and with the plain dense bias: outputs and gradients of q, r1, r2.
TEST(KerpleBias, FusedAttentionEqualsComposedAndThePlainBias) {
  for (KerpleKind kind : {KerpleKind::kLog, KerpleKind::kPower}) {
    for (bool causal : {false, true}) {
      SCOPED_TRACE(std::string(kernels::kerple_kind_name(kind)) + (causal ? " causal" : ""));
      at::manual_seed(11);
      const int64_t heads = 3, q_len = 5, k_len = 9, dh = 4;
      KerpleBias m = module(kind, causal, heads);
      const at::Tensor q0 = at::randn({2, heads, q_len, dh}, kF64), k = at::randn({2, heads, k_len, dh}, kF64);
      const at::Tensor v = at::randn({2, heads, k_len, dh}, kF64), w = at::randn({2, heads, q_len, dh}, kF64);
      struct Result {
        at::Tensor out, gq, g1, g2;
      };
      auto run = [&](int path) {
        const at::Tensor q = q0.clone().requires_grad_(true);
        for (const at::Tensor& p : m->parameters()) p.mutable_grad() = at::Tensor();
        AttentionTerms terms;
        at::Tensor r1 = m->r1(), r2 = m->r2();
        if (path < 2) {
          m->add_terms(terms, q_len, k_len, at::kDouble);
        } else {
          // Independent: the plain dense bias, with r1, r2 as leaves copied from the module.
          r1 = m->r1().detach().clone().requires_grad_(true), r2 = m->r2().detach().clone().requires_grad_(true);
          terms.bias = plain_bias(kind, r1.detach(), r2.detach(), q_len, k_len, false);
          terms.causal = causal;
        }
        AttentionCall call;
        call.causal = causal;
        const at::Tensor out = std::get<0>(path == 0 ? ops::attention_fused(q, k, v, terms, call)
                                                     : ops::attention_composed(q, k, v, terms, call));
        (out * w).sum().backward();
        return Result{out.detach(), q.grad(), m->r1().grad(), m->r2().grad()};
      };
      const Result fused = run(0), composed = run(1), plain = run(2);
      // 1e-12: the same sums in another order (streaming softmax vs one softmax), float64.
      EXPECT_TRUE(at::allclose(fused.out, composed.out, 0, 1e-12));
      EXPECT_TRUE(at::allclose(fused.out, plain.out, 0, 1e-12));
      EXPECT_TRUE(at::allclose(fused.gq, composed.gq, 0, 1e-12));
      EXPECT_TRUE(at::allclose(fused.gq, plain.gq, 0, 1e-12));
      ASSERT_TRUE(fused.g1.defined() && fused.g2.defined());
      EXPECT_TRUE(at::allclose(fused.g1, composed.g1, 0, 1e-12));
      EXPECT_TRUE(at::allclose(fused.g2, composed.g2, 0, 1e-12));
      EXPECT_GT(fused.g1.abs().max().item<double>(), 0.0);
    }
  }
}

TEST(KerpleBias, RegistryBuildsItAndCombinesIt) {
  EncodingConfig c;
  c.dim = 12, c.num_heads = 3, c.causal = true;
  for (const std::string name : {"kerple", "kerple-power", "learned+kerple", "rope+kerple-power"}) {
    SCOPED_TRACE(name);
    const AttentionEncodings e = make_attention_encodings(parse_encoding(name), c);
    const auto bias = std::dynamic_pointer_cast<KerpleBiasImpl>(e.bias.ptr());
    ASSERT_TRUE(bias);
    EXPECT_EQ(bias->num_heads(), 3);
    EXPECT_TRUE(bias->options().causal());
    EXPECT_EQ(bias->options().kind(), name.find("power") == std::string::npos ? KerpleKind::kLog : KerpleKind::kPower);
  }
  expect_value_error([] { parse_encoding("alibi+kerple"); },
                     "[encoding] 'alibi+kerple' has two logit bias encodings (alibi, kerple); use at most one per "
                     "point");
}

TEST(KerpleBias, Errors) {
  expect_value_error([] { KerpleBias(KerpleBiasOptions(2).r1(0.0)); }, "[KerpleBias] r1 must be > 0, got 0");
  expect_value_error([] { KerpleBias(KerpleBiasOptions(2).r2(-1.0)); }, "[KerpleBias] r2 must be > 0, got -1");
  expect_value_error([] { KerpleBias(KerpleBiasOptions(2).kind(KerpleKind::kPower).r2(3.0)); },
                     "[KerpleBias] r2 must be in (0, 2], got 3");
  expect_value_error([] { KerpleBias(KerpleBiasOptions(0)); }, "[KerpleBias] num_heads must be >= 1, got 0");
  expect_value_error([] { KerpleBias(KerpleBiasOptions(1).eps(0.0)); }, "[KerpleBias] eps must be in (0, 1], got 0");
  expect_value_error([] { KerpleBias(KerpleBiasOptions(1).causal(true))->bias(4, 3); },
                     "[KerpleBias] causal attention needs every query to see a key: q_len must be <= k_len, got 4 "
                     "and 3");
  expect_value_error([] { ops::kerple_offset_bias(at::zeros({2}), at::ones({2}), 2, 2); },
                     "[kerple_offset_bias] r1 must be > 0, got 0 (head 0)");
  expect_value_error([] { ops::kerple_offset_bias(at::ones({2}), at::ones({3}), 2, 2); },
                     "[kerple_offset_bias] r2 must have r1's shape (2), got (3)");
}

}  // namespace
}  // namespace posenc::nn::test
