// DynamicPositionBias and ContinuousPositionBias2d (posenc/nn/dpb_bias.h) and
// their ops: the dense biases against float64 transcriptions of the sources
// (x-transformers' DynamicPositionBias.forward, Swin V2's WindowAttention cpb
// path) in at:: ops, gradients of every parameter against central differences,
// the fused attention (offset rows / grid, no (Tq, Tk) tensor) against the
// composed one and against attention with the plain dense bias, the
// properties (a function of the offset alone; log distance odd, monotone), and
// the refusals word for word. torch.autograd.gradcheck itself: tests/python/test_dpb.py.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>
#include <torch/autograd.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "posenc/nn/attention_ops.h"
#include "posenc/nn/dpb_bias.h"
#include "posenc/nn/multihead_attention.h"
#include "reference.h"

namespace posenc::nn::test {
namespace {

const auto kF64 = at::TensorOptions().dtype(at::kDouble);

// ---------------------------------------------------------------------------
// Transcriptions

// x-transformers' DynamicPositionBias on the (i, j) pairs: pos = i' - j (i' = i + k_len - q_len),
// sign(pos) log(|pos| + 1) with log_distance, then mlp = [Linear(1, dim) (+ LayerNorm) + SiLU,
// (depth-1) x (Linear(dim, dim) (+ LayerNorm) + SiLU), Linear(dim, heads)], 'i j h -> h i j'.
at::Tensor xtransformers(DynamicPositionBias& m, int64_t q_len, int64_t k_len) {
  const auto& o = m->options();
  auto p = m->named_parameters();
  const at::Tensor i = at::arange(q_len, kF64).unsqueeze(1) + (k_len - q_len), j = at::arange(k_len, kF64);
  at::Tensor pos = (i - j).unsqueeze(-1);  // (q, k, 1)
  if (o.log_distance()) pos = at::sign(pos) * at::log(pos.abs() + 1);
  at::Tensor x = pos;
  for (int64_t l = 0; l < o.depth(); ++l) {
    x = l == 0 ? at::linear(x, p["in_weight"].to(at::kDouble), p["in_bias"].to(at::kDouble))
               : at::linear(x, p["hidden_weight"][l - 1].to(at::kDouble), p["hidden_bias"][l - 1].to(at::kDouble));
    if (o.norm()) {
      x = at::layer_norm(x, {o.hidden()}, p["norm_weight"][l].to(at::kDouble), p["norm_bias"][l].to(at::kDouble), 1e-5);
    }
    x = at::silu(x);
  }
  x = at::linear(x, p["out_weight"].to(at::kDouble), p["out_bias"].to(at::kDouble));
  return x.permute({2, 0, 1});
}

// Swin V2's WindowAttention: relative_coords_table over (dh, dw) in -(W-1) .. W-1, / (window - 1), * 8,
// sign * log2(|.| + 1) / log2(8); cpb_mlp = Linear(2, 512) -> ReLU -> Linear(512, heads, bias=False);
// gathered by relative_position_index from coords[i] - coords[j]; 16 * sigmoid. Windows >= 2.
at::Tensor swin_v2(ContinuousPositionBias2d& m) {
  const auto& o = m->options();
  auto p = m->named_parameters();
  const int64_t wh = o.height(), ww = o.width();
  const int64_t nh = o.pretrained_height() > 0 ? o.pretrained_height() : wh;
  const int64_t nw = o.pretrained_width() > 0 ? o.pretrained_width() : ww;
  const at::Tensor ch = at::arange(-(wh - 1), wh, kF64), cw = at::arange(-(ww - 1), ww, kF64);
  auto grid = at::meshgrid({ch, cw}, "ij");
  at::Tensor table = at::stack({grid[0] / (nh - 1), grid[1] / (nw - 1)}, -1) * 8;  // (2wh-1, 2ww-1, 2)
  table = at::sign(table) * at::log2(table.abs() + 1.0) / std::log2(8.0);
  at::Tensor t = at::linear(table, p["fc1_weight"].to(at::kDouble), p["fc1_bias"].to(at::kDouble));
  t = at::linear(at::relu(t), p["fc2_weight"].to(at::kDouble)).view({-1, o.num_heads()});
  auto coords = at::meshgrid({at::arange(wh), at::arange(ww)}, "ij");
  const at::Tensor flat = at::stack({coords[0].flatten(), coords[1].flatten()});  // (2, N)
  at::Tensor rel = flat.unsqueeze(2) - flat.unsqueeze(1);                         // (2, N, N)
  const at::Tensor index = (rel[0] + (wh - 1)) * (2 * ww - 1) + (rel[1] + (ww - 1));
  const int64_t n = wh * ww;
  return 16 * at::sigmoid(t.index_select(0, index.flatten()).view({n, n, -1}).permute({2, 0, 1}));
}

DynamicPositionBias dpb(int64_t heads, int64_t hidden, int64_t depth, bool log_distance, bool norm,
                        bool causal = false) {
  DynamicPositionBias m(
      DynamicPositionBiasOptions(heads, hidden).depth(depth).log_distance(log_distance).norm(norm).causal(causal));
  m->to(at::kDouble);
  if (norm) {  // away from LayerNorm's gamma 1, beta 0, so that both matter
    at::NoGradGuard no_grad;
    for (auto& p : m->named_parameters()) {
      if (p.key().rfind("norm_", 0) == 0) p.value().add_(at::randn_like(p.value()) * 0.3);
    }
  }
  return m;
}

struct DpbCase {
  int64_t heads, hidden, depth;
  bool log_distance, norm;
};
const std::vector<DpbCase> kDpbCases{
    {3, 8, 2, false, false}, {2, 6, 1, true, false}, {4, 5, 3, true, true}, {1, 16, 2, false, true}};

std::string name_of(const DpbCase& c) {
  return "heads=" + std::to_string(c.heads) + " hidden=" + std::to_string(c.hidden) +
         " depth=" + std::to_string(c.depth) + (c.log_distance ? " log" : "") + (c.norm ? " norm" : "");
}

// Central differences of sum(f() * w) wrt every element of every tensor in `inputs` (float64
// leaves, perturbed in place) against autograd's gradient: a gradcheck written out.
void expect_gradients_match_differences(const std::vector<at::Tensor>& inputs, const std::function<at::Tensor()>& f) {
  const at::Tensor out0 = f();
  const at::Tensor w = at::sin(at::arange(out0.numel(), kF64) * 0.7 + 0.3).view(out0.sizes());
  for (const at::Tensor& t : inputs) t.mutable_grad() = at::Tensor();
  (out0 * w).sum().backward();
  for (size_t n = 0; n < inputs.size(); ++n) {
    const at::Tensor& t = inputs[n];
    ASSERT_TRUE(t.grad().defined()) << "input " << n;
    const at::Tensor g = t.grad().contiguous();
    const at::Tensor flat = t.detach().view({-1});  // a view: writes reach the leaf
    for (int64_t e = 0; e < t.numel(); ++e) {
      const double saved = flat[e].item<double>(), eps = 1e-6;
      flat[e].fill_(saved + eps);
      const double up = (f().detach() * w).sum().item<double>();
      flat[e].fill_(saved - eps);
      const double down = (f().detach() * w).sum().item<double>();
      flat[e].fill_(saved);
      const double want = (up - down) / (2 * eps);
      // 1e-6 relative: eps^2 truncation plus double roundoff / eps, as gradcheck's defaults.
      EXPECT_NEAR(g.view({-1})[e].item<double>(), want, 1e-6 * std::max(1.0, std::abs(want)))
          << "input " << n << " element " << e;
    }
  }
}

// ---------------------------------------------------------------------------
// DPB

TEST(DynamicPositionBias, DenseBiasMatchesXTransformers) {
  for (const DpbCase& c : kDpbCases) {
    for (auto [q_len, k_len] : {std::pair<int64_t, int64_t>{6, 6}, {2, 7}, {5, 3}, {1, 1}}) {
      SCOPED_TRACE(name_of(c) + " q=" + std::to_string(q_len) + " k=" + std::to_string(k_len));
      at::manual_seed(5);
      DynamicPositionBias m = dpb(c.heads, c.hidden, c.depth, c.log_distance, c.norm);
      const at::Tensor want = xtransformers(m, q_len, k_len);
      const at::Tensor got = m->bias(q_len, k_len);
      ASSERT_EQ(got.sizes(), want.sizes());
      // 1e-13: the same float64 products and sums in another order (the kernel's loops vs BLAS).
      EXPECT_LT(max_abs_diff(got, want), 1e-13);
      // float32 parameters: formed in double from them and rounded once.
      m->to(at::kFloat);
      const at::Tensor want32 = xtransformers(m, q_len, k_len);
      const at::Tensor got32 = m->bias(q_len, k_len);
      EXPECT_EQ(got32.scalar_type(), at::kFloat);
      EXPECT_LT(max_abs_diff(got32, want32), 4e-7 * std::max(1.0, want32.abs().max().item<double>()));
    }
  }
  DynamicPositionBias m = dpb(3, 4, 2, false, false);
  EXPECT_EQ(m->bias(0, 5).sizes(), (at::IntArrayRef{3, 0, 5}));
  EXPECT_EQ(m->offset_rows(4, 0).sizes(), (at::IntArrayRef{3, 0}));
}

TEST(DynamicPositionBias, GradientsOfEveryParameterMatchDifferences) {
  for (const DpbCase& c : kDpbCases) {
    SCOPED_TRACE(name_of(c));
    at::manual_seed(9);
    DynamicPositionBias m = dpb(c.heads, std::min<int64_t>(c.hidden, 5), c.depth, c.log_distance, c.norm);
    expect_gradients_match_differences(m->parameters(), [&] { return m->offset_rows(4, 6); });
  }
  // Non-contiguous tensors into the op: out_weight as the transpose of a [hidden, heads] leaf.
  at::manual_seed(2);
  DynamicPositionBias m = dpb(3, 4, 2, true, true);
  auto p = m->named_parameters();
  const at::Tensor out_t = p["out_weight"].detach().t().contiguous().requires_grad_(true);
  const at::Tensor wide_bias = at::stack({p["in_bias"].detach(), p["in_bias"].detach()}, 1).requires_grad_(true);
  expect_gradients_match_differences({out_t, wide_bias}, [&] {
    return ops::dpb_offset_bias({p["in_weight"], wide_bias.select(1, 0), p["hidden_weight"], p["hidden_bias"],
                                 p["norm_weight"], p["norm_bias"], out_t.t(), p["out_bias"]},
                                3, 5, true);
  });
  // Empty: no column, zero gradients.
  const at::Tensor rows = m->offset_rows(0, 4);
  for (const at::Tensor& t : m->parameters()) t.mutable_grad() = at::Tensor();
  rows.sum().backward();
  for (const at::Tensor& t : m->parameters()) {
    if (t.grad().defined()) {
      EXPECT_EQ(t.grad().abs().sum().item<double>(), 0.0);
    }
  }
}

// Attention with the module's terms (offset rows) on the fused and the composed path, and with the plain
// dense bias (x-transformers' transcription): outputs and gradients of q and of every parameter.
TEST(DynamicPositionBias, FusedAttentionEqualsComposedAndThePlainBias) {
  for (bool causal : {false, true}) {
    for (auto [q_len, k_len] : {std::pair<int64_t, int64_t>{5, 9}, {7, 7}}) {
      SCOPED_TRACE(std::string(causal ? "causal" : "") + " q=" + std::to_string(q_len) + " k=" + std::to_string(k_len));
      at::manual_seed(11);
      const int64_t heads = 3, dh = 4;
      DynamicPositionBias m = dpb(heads, 6, 2, true, true, causal);
      const at::Tensor q0 = at::randn({2, heads, q_len, dh}, kF64), k = at::randn({2, heads, k_len, dh}, kF64);
      const at::Tensor v = at::randn({2, heads, k_len, dh}, kF64), w = at::randn({2, heads, q_len, dh}, kF64);
      struct Result {
        at::Tensor out, gq;
        std::vector<at::Tensor> gp;
      };
      auto run = [&](int path) {
        const at::Tensor q = q0.clone().requires_grad_(true);
        for (const at::Tensor& p : m->parameters()) p.mutable_grad() = at::Tensor();
        AttentionTerms terms;
        if (path < 2) {
          m->add_terms(terms, q_len, k_len, at::kDouble);
          EXPECT_TRUE(terms.offset_bias.defined() && !terms.bias.defined());  // rows, no (Tq, Tk) tensor
          EXPECT_EQ(terms.offset_bias.sizes(), (at::IntArrayRef{heads, q_len + k_len - 1}));
          EXPECT_EQ(terms.causal, causal);
        } else {
          terms.bias = xtransformers(m, q_len, k_len);  // differentiable wrt the parameters, through at:: ops
          terms.causal = causal;
        }
        AttentionCall call;
        call.causal = causal;
        const at::Tensor out = std::get<0>(path == 0 ? ops::attention_fused(q, k, v, terms, call)
                                                     : ops::attention_composed(q, k, v, terms, call));
        (out * w).sum().backward();
        Result r{out.detach(), q.grad(), {}};
        for (const at::Tensor& p : m->parameters()) r.gp.push_back(p.grad());
        return r;
      };
      const Result fused = run(0), composed = run(1), plain = run(2);
      // 1e-12: the same sums in another order (streaming softmax vs one softmax), float64.
      EXPECT_LT(max_abs_diff(fused.out, composed.out), 1e-12);
      EXPECT_LT(max_abs_diff(fused.out, plain.out), 1e-12);
      EXPECT_LT(max_abs_diff(fused.gq, plain.gq), 1e-12);
      for (size_t n = 0; n < fused.gp.size(); ++n) {
        ASSERT_TRUE(fused.gp[n].defined() && plain.gp[n].defined()) << "parameter " << n;
        EXPECT_LT(max_abs_diff(fused.gp[n], composed.gp[n]), 1e-12) << "parameter " << n;
        EXPECT_LT(max_abs_diff(fused.gp[n], plain.gp[n]), 1e-12) << "parameter " << n;
      }
      EXPECT_GT(fused.gp.back().abs().max().item<double>(), 0.0);
    }
  }
}

TEST(DynamicPositionBias, CausalMasksKeysAfterTheQuery) {
  at::manual_seed(4);
  DynamicPositionBias m = dpb(2, 4, 2, false, false, /*causal=*/true);
  const at::Tensor b = m->bias(3, 5), rows = m->offset_rows(3, 5);
  for (int64_t h = 0; h < 2; ++h) {
    for (int64_t i = 0; i < 3; ++i) {
      for (int64_t j = 0; j < 5; ++j) {
        const int64_t d = j - (i + 2);  // key after the query when d > 0
        const double got = b[h][i][j].item<double>();
        if (d > 0) {
          EXPECT_EQ(got, -std::numeric_limits<double>::infinity()) << i << "," << j;
        } else {
          EXPECT_EQ(got, rows[h][d + 4].item<double>()) << i << "," << j;
        }
      }
    }
  }
}

TEST(DynamicPositionBias, BiasDependsOnlyOnTheOffset) {
  at::manual_seed(6);
  for (bool log_distance : {false, true}) {
    DynamicPositionBias m = dpb(2, 5, 2, log_distance, true);
    // Every pair with the same i' - j has the same bias, across lengths (queries last).
    const at::Tensor ref = m->bias(9, 9);
    for (auto [q_len, k_len] : {std::pair<int64_t, int64_t>{3, 9}, {9, 4}, {6, 6}}) {
      const at::Tensor b = m->bias(q_len, k_len);
      for (int64_t i = 0; i < q_len; ++i) {
        for (int64_t j = 0; j < k_len; ++j) {
          const int64_t r = i + k_len - q_len - j;  // i' - j
          // In the 9 x 9 reference, the pair (8, 8 - r) or (8 + r, 8) has the same i' - j.
          const at::Tensor want = r >= 0 ? ref.select(1, 8).select(1, 8 - r) : ref.select(1, 8 + r).select(1, 8);
          EXPECT_TRUE(at::equal(b.select(1, i).select(1, j), want)) << q_len << "x" << k_len << " " << i << "," << j;
        }
      }
    }
  }
}

// With in_weight (1, -1), in_bias 0, out_weight (1, -1), out_bias 0 the MLP is the identity on its input
// (SiLU(u) - SiLU(-u) = u), so the rows show phi(i' - j) itself: odd, monotone, sign(r) log(1 + |r|).
TEST(DynamicPositionBias, LogDistanceIsOddAndMonotone) {
  for (bool log_distance : {false, true}) {
    DynamicPositionBias m(DynamicPositionBiasOptions(1, 2).depth(1).log_distance(log_distance));
    m->to(at::kDouble);
    {
      at::NoGradGuard no_grad;
      auto p = m->named_parameters();
      p["in_weight"].copy_(at::tensor({1.0, -1.0}, kF64).view({2, 1}));
      p["in_bias"].zero_();
      p["out_weight"].copy_(at::tensor({1.0, -1.0}, kF64).view({1, 2}));
      p["out_bias"].zero_();
    }
    const int64_t n = 200;
    const at::Tensor rows = m->offset_rows(n, n)[0];  // column c: r = i' - j = n - 1 - c
    for (int64_t r = -(n - 1); r <= n - 1; ++r) {
      const double phi = rows[n - 1 - r].item<double>();
      const double want = log_distance ? (r > 0   ? 1
                                          : r < 0 ? -1
                                                  : 0) *
                                             std::log1p(std::abs(static_cast<double>(r)))
                                       : static_cast<double>(r);
      // 4 ulp of |r|: SiLU(u) - SiLU(-u) = u in double.
      EXPECT_NEAR(phi, want, 4 * std::numeric_limits<double>::epsilon() * std::max(1.0, std::abs(want))) << r;
      EXPECT_NEAR(rows[n - 1 + r].item<double>(), -phi, 1e-14 * std::max(1.0, std::abs(want))) << r;  // odd
      if (r > -(n - 1)) {
        EXPECT_GT(phi, rows[n - r].item<double>()) << r;  // increasing in r
      }
    }
  }
}

TEST(DynamicPositionBias, ParametersAndInitialisationFollowXTransformers) {
  at::manual_seed(1);
  DynamicPositionBias m(DynamicPositionBiasOptions(8, 64).depth(3).norm(true));
  auto p = m->named_parameters();
  EXPECT_EQ(p["in_weight"].sizes(), (at::IntArrayRef{64, 1}));
  EXPECT_EQ(p["hidden_weight"].sizes(), (at::IntArrayRef{2, 64, 64}));
  EXPECT_EQ(p["hidden_bias"].sizes(), (at::IntArrayRef{2, 64}));
  EXPECT_EQ(p["norm_weight"].sizes(), (at::IntArrayRef{3, 64}));
  EXPECT_EQ(p["out_weight"].sizes(), (at::IntArrayRef{8, 64}));
  EXPECT_EQ(p["out_bias"].sizes(), (at::IntArrayRef{8}));
  // nn.Linear's U(-1/sqrt(fan_in), 1/sqrt(fan_in)): fan_in 1 for the first layer, 64 after.
  EXPECT_LE(p["in_weight"].abs().max().item<double>(), 1.0);
  EXPECT_GT(p["in_weight"].abs().max().item<double>(), 0.5);
  EXPECT_LE(p["hidden_weight"].abs().max().item<double>(), 0.125);
  EXPECT_GT(p["hidden_weight"].abs().max().item<double>(), 0.1);
  EXPECT_LE(p["out_bias"].abs().max().item<double>(), 0.125);
  EXPECT_TRUE(at::equal(p["norm_weight"], at::ones({3, 64})));
  EXPECT_TRUE(at::equal(p["norm_bias"], at::zeros({3, 64})));
  DynamicPositionBias plain(DynamicPositionBiasOptions(2, 4));
  EXPECT_FALSE(plain->named_parameters().contains("norm_weight"));
  EXPECT_EQ(plain->options().depth(), 2);
}

TEST(DynamicPositionBias, Errors) {
  expect_value_error([] { DynamicPositionBias(DynamicPositionBiasOptions(0, 4)); },
                     "[DynamicPositionBias] num_heads must be >= 1, got 0");
  expect_value_error([] { DynamicPositionBias(DynamicPositionBiasOptions(2, 0)); },
                     "[DynamicPositionBias] hidden must be >= 1, got 0");
  expect_value_error([] { DynamicPositionBias(DynamicPositionBiasOptions(2, 4).depth(0)); },
                     "[DynamicPositionBias] depth must be >= 1, got 0");
  expect_value_error([] { DynamicPositionBias(DynamicPositionBiasOptions(1, 4).causal(true))->bias(4, 3); },
                     "[DynamicPositionBias] causal attention needs every query to see a key: q_len must be <= k_len, "
                     "got 4 and 3");
  const at::Tensor w = at::ones({4, 1}), b = at::ones({4}), hw = at::ones({1, 4, 4}), hb = at::ones({1, 4});
  const at::Tensor ow = at::ones({2, 4}), ob = at::ones({2});
  expect_value_error(
      [&] {
        ops::dpb_offset_bias({w, at::ones({3}), hw, hb, {}, {}, ow, ob}, 2, 2);
      },
      "[dpb_offset_bias] in_bias must be [hidden] = (4), got (3)");
  expect_value_error(
      [&] {
        ops::dpb_offset_bias({at::ones({4, 2}), b, hw, hb, {}, {}, ow, ob}, 2, 2);
      },
      "[dpb_offset_bias] in_weight must be [hidden, 1] with hidden >= 1, got (4, 2)");
  expect_value_error(
      [&] {
        ops::dpb_offset_bias({w, b, at::ones({1, 4, 3}), hb, {}, {}, ow, ob}, 2, 2);
      },
      "[dpb_offset_bias] hidden_weight must be [depth-1, hidden, hidden] = (1, 4, 4), got (1, 4, 3)");
  expect_value_error(
      [&] {
        ops::dpb_offset_bias({w, b, hw, hb, at::ones({2, 4}), {}, ow, ob}, 2, 2);
      },
      "[dpb_offset_bias] norm_weight and norm_bias must be given together (LayerNorm) or both be None");
  expect_value_error(
      [&] {
        ops::dpb_offset_bias({w, b, hw, hb, at::ones({1, 4}), at::ones({1, 4}), ow, ob}, 2, 2);
      },
      "[dpb_offset_bias] norm_weight must be [depth, hidden] = (2, 4), got (1, 4)");
  expect_value_error(
      [&] {
        ops::dpb_offset_bias({w, b, hw, hb, {}, {}, at::ones({2, 5}), ob}, 2, 2);
      },
      "[dpb_offset_bias] out_weight must be [num_heads, hidden] = (*, 4) with num_heads >= 1, got (2, 5)");
  expect_value_error(
      [&] {
        ops::dpb_offset_bias({w, b, hw, hb, {}, {}, ow, at::ones({3})}, 2, 2);
      },
      "[dpb_offset_bias] out_bias must be [num_heads] = (2), got (3)");
  expect_value_error(
      [&] {
        ops::dpb_offset_bias({w, b, hw, hb, {}, {}, ow, ob}, -1, 2);
      },
      "[dpb_offset_bias] q_len must be >= 0, got -1");
  expect_error<c10::TypeError>(
      [&] {
        ops::dpb_offset_bias({w, b.to(at::kDouble), hw, hb, {}, {}, ow, ob}, 2, 2);
      },
      "[dpb_offset_bias] in_bias must have in_weight's dtype (float32), got float64");
}

// ---------------------------------------------------------------------------
// CPB

ContinuousPositionBias2d cpb(int64_t heads, int64_t height, int64_t width, int64_t hidden = 512,
                             int64_t pretrained = 0) {
  ContinuousPositionBias2d m(ContinuousPositionBias2dOptions(heads, height, width)
                                 .hidden(hidden)
                                 .pretrained_height(pretrained)
                                 .pretrained_width(pretrained)
                                 .init_std(0.5));  // larger than Swin's 0.02, so the sigmoid is not flat
  m->to(at::kDouble);
  at::NoGradGuard no_grad;
  m->named_parameters()["fc1_bias"].normal_(0.0, 0.3);  // Swin starts it at 0
  return m;
}

TEST(ContinuousPositionBias2d, DenseBiasMatchesSwinV2) {
  for (auto [height, width, hidden, pretrained] :
       {std::tuple<int64_t, int64_t, int64_t, int64_t>{4, 4, 512, 0}, {3, 5, 64, 0}, {2, 3, 16, 8}}) {
    SCOPED_TRACE(std::to_string(height) + "x" + std::to_string(width) + " pretrained " + std::to_string(pretrained));
    at::manual_seed(3);
    ContinuousPositionBias2d m = cpb(3, height, width, hidden, pretrained);
    const int64_t n = height * width;
    const at::Tensor want = swin_v2(m), got = m->bias(n, n);
    // 1e-13 of 16: log2 and the 512-term sums in another order, float64.
    EXPECT_LT(max_abs_diff(got, want), 16e-13);
    EXPECT_GT(want.std().item<double>(), 0.1);  // not a flat bias
    const at::Tensor grid = m->grid();
    EXPECT_EQ(grid.sizes(), (at::IntArrayRef{3, 2 * height - 1, 2 * width - 1}));
  }
  // A 1 x 4 grid: only dy = 0 exists (coordinate 0, where Swin would divide 0 by 0).
  ContinuousPositionBias2d line = cpb(2, 1, 4, 8);
  EXPECT_TRUE(at::isfinite(line->grid()).all().item<bool>());
}

TEST(ContinuousPositionBias2d, GradientsOfEveryParameterMatchDifferences) {
  at::manual_seed(8);
  ContinuousPositionBias2d m = cpb(2, 3, 2, 6);
  expect_gradients_match_differences(m->parameters(), [&] { return m->grid(); });
  ContinuousPositionBias2d p = cpb(2, 2, 2, 4, 5);
  expect_gradients_match_differences(p->parameters(), [&] { return p->grid(); });
}

TEST(ContinuousPositionBias2d, FusedAttentionEqualsComposedAndThePlainBias) {
  at::manual_seed(12);
  const int64_t heads = 2, height = 3, width = 4, n = height * width, dh = 8;
  ContinuousPositionBias2d m = cpb(heads, height, width, 32);
  const at::Tensor q0 = at::randn({2, heads, n, dh}, kF64), k = at::randn({2, heads, n, dh}, kF64);
  const at::Tensor v = at::randn({2, heads, n, dh}, kF64), w = at::randn({2, heads, n, dh}, kF64);
  struct Result {
    at::Tensor out, gq;
    std::vector<at::Tensor> gp;
  };
  auto run = [&](int path) {
    const at::Tensor q = q0.clone().requires_grad_(true);
    for (const at::Tensor& p : m->parameters()) p.mutable_grad() = at::Tensor();
    AttentionTerms terms;
    if (path < 2) {
      m->add_terms(terms, n, n, at::kDouble);
      EXPECT_TRUE(terms.grid_bias.defined() && !terms.bias.defined());
      EXPECT_EQ(terms.grid_height, height);
      EXPECT_EQ(terms.grid_width, width);
    } else {
      terms.bias = swin_v2(m);
    }
    const at::Tensor out =
        std::get<0>(path == 0 ? ops::attention_fused(q, k, v, terms) : ops::attention_composed(q, k, v, terms));
    (out * w).sum().backward();
    Result r{out.detach(), q.grad(), {}};
    for (const at::Tensor& p : m->parameters()) r.gp.push_back(p.grad());
    return r;
  };
  const Result fused = run(0), composed = run(1), plain = run(2);
  // 1e-12: the same sums in another order, float64.
  EXPECT_LT(max_abs_diff(fused.out, composed.out), 1e-12);
  EXPECT_LT(max_abs_diff(fused.out, plain.out), 1e-12);
  EXPECT_LT(max_abs_diff(fused.gq, plain.gq), 1e-12);
  for (size_t i = 0; i < fused.gp.size(); ++i) {
    ASSERT_TRUE(fused.gp[i].defined()) << "parameter " << i;
    EXPECT_LT(max_abs_diff(fused.gp[i], composed.gp[i]), 1e-12) << "parameter " << i;
    EXPECT_LT(max_abs_diff(fused.gp[i], plain.gp[i]), 1e-12) << "parameter " << i;
    EXPECT_GT(fused.gp[i].abs().max().item<double>(), 0.0) << "parameter " << i;
  }
}

TEST(ContinuousPositionBias2d, BiasDependsOnlyOnTheOffsetAndIsInZero16) {
  at::manual_seed(13);
  ContinuousPositionBias2d m = cpb(2, 3, 3, 16);
  const at::Tensor b = m->bias(9, 9);
  EXPECT_GT(b.min().item<double>(), 0.0);
  EXPECT_LT(b.max().item<double>(), 16.0);
  for (int64_t i = 0; i < 9; ++i) {
    for (int64_t j = 0; j < 9; ++j) {
      // Shift both cells by (1, 1) when both stay on the grid: the same (dy, dx), the same bias.
      if (i / 3 < 2 && i % 3 < 2 && j / 3 < 2 && j % 3 < 2) {
        EXPECT_TRUE(at::equal(b.select(1, i).select(1, j), b.select(1, i + 4).select(1, j + 4)));
      }
    }
  }
}

TEST(ContinuousPositionBias2d, InitialisationFollowsSwinV2) {
  at::manual_seed(1);
  ContinuousPositionBias2d m(ContinuousPositionBias2dOptions(6, 8, 8));
  auto p = m->named_parameters();
  EXPECT_EQ(p["fc1_weight"].sizes(), (at::IntArrayRef{512, 2}));
  EXPECT_EQ(p["fc1_bias"].sizes(), (at::IntArrayRef{512}));
  EXPECT_EQ(p["fc2_weight"].sizes(), (at::IntArrayRef{6, 512}));
  EXPECT_EQ(p.size(), 3u);  // fc2 has no bias
  EXPECT_NEAR(p["fc2_weight"].std().item<double>(), 0.02, 0.002);
  EXPECT_TRUE(at::equal(p["fc1_bias"], at::zeros({512})));
  // At Swin's init the bias is 16 sigmoid(~0) ~ 8 everywhere.
  EXPECT_NEAR(m->grid().mean().item<double>(), 8.0, 0.1);
}

TEST(ContinuousPositionBias2d, Errors) {
  expect_value_error([] { ContinuousPositionBias2d(ContinuousPositionBias2dOptions(2, 0, 3)); },
                     "[ContinuousPositionBias2d] height must be >= 1, got 0");
  expect_value_error([] { ContinuousPositionBias2d(ContinuousPositionBias2dOptions(2, 3, 3).hidden(0)); },
                     "[ContinuousPositionBias2d] hidden must be >= 1, got 0");
  expect_value_error([] { ContinuousPositionBias2d(ContinuousPositionBias2dOptions(2, 3, 3).pretrained_height(1)); },
                     "[ContinuousPositionBias2d] pretrained_height must be 0 (the grid's) or >= 2, got 1");
  expect_value_error([] { ContinuousPositionBias2d(ContinuousPositionBias2dOptions(0, 3, 3)); },
                     "[ContinuousPositionBias2d] num_heads must be >= 1, got 0");
  expect_value_error([] { ContinuousPositionBias2d(ContinuousPositionBias2dOptions(2, 3, 3))->bias(9, 8); },
                     "[ContinuousPositionBias2d] q_len and k_len must both be height*width = 9, got 9 and 8");
  expect_value_error(
      [] {
        ops::cpb_grid_bias(at::ones({4, 3}), at::ones({4}), at::ones({2, 4}), 2, 2);
      },
      "[cpb_grid_bias] fc1_weight must be [hidden, 2] with hidden >= 1, got (4, 3)");
  expect_value_error(
      [] {
        ops::cpb_grid_bias(at::ones({4, 2}), at::ones({4}), at::ones({2, 5}), 2, 2);
      },
      "[cpb_grid_bias] fc2_weight must be [num_heads, hidden] = (*, 4) with num_heads >= 1, got (2, 5)");
  expect_value_error(
      [] {
        ops::cpb_grid_bias(at::ones({4, 2}), at::ones({4}), at::ones({2, 4}), 2, 0);
      },
      "[cpb_grid_bias] width must be >= 1, got 0");
}

// The layer collects the terms itself (add_terms): its fused path (offset rows / grid) and its composed
// path give the same output and the same gradients of every bias parameter.
TEST(DynamicPositionBias, MultiheadAttentionFusedEqualsComposedForBoth) {
  for (int family = 0; family < 2; ++family) {
    SCOPED_TRACE(family == 0 ? "dpb causal" : "cpb");
    at::manual_seed(21);
    AttentionBias bias =
        family == 0 ? AttentionBias(dpb(4, 8, 2, true, true, /*causal=*/true)) : AttentionBias(cpb(4, 3, 3, 16));
    std::vector<at::Tensor> outs, grads;
    for (AttentionPath path : {AttentionPath::kFused, AttentionPath::kComposed}) {
      at::manual_seed(22);  // the same projections on both paths
      AttentionEncodings encodings;
      encodings.bias = bias;
      MultiheadAttention layer(MultiheadAttentionOptions(16, 4).causal(family == 0).path(path), encodings);
      layer->to(at::kDouble);
      for (const at::Tensor& p : bias->parameters()) p.mutable_grad() = at::Tensor();
      at::manual_seed(23);
      const at::Tensor x = at::randn({2, 9, 16}, kF64);
      const at::Tensor out = layer->forward(x);
      out.pow(2).sum().backward();
      outs.push_back(out.detach());
      grads.push_back(at::cat([&] {
        std::vector<at::Tensor> g;
        for (const at::Tensor& p : bias->parameters()) g.push_back(p.grad().flatten());
        return g;
      }()));
    }
    // 1e-12: the same sums in another order, float64.
    EXPECT_LT(max_abs_diff(outs[0], outs[1]), 1e-12);
    EXPECT_LT(max_abs_diff(grads[0], grads[1]), 1e-11 * std::max(1.0, grads[1].abs().max().item<double>()));
    EXPECT_GT(grads[0].abs().max().item<double>(), 0.0);
  }
}

}  // namespace
}  // namespace posenc::nn::test
