// The logit-bias modules (attention_biases.h) against references written
// here from the papers' code: ALiBi's get_slopes (Press et al.), the Hugging
// Face T5 _relative_position_bucket (float32 logarithm, as in modeling_t5),
// and plain loops for the distances and the query alignment. T5 references
// gather float64 copies of the tables with torch ops, so torch's own autograd
// gives the expected table gradients.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "posenc/nn/attention_biases.h"
#include "reference.h"

namespace posenc::nn::test {
namespace {

const auto kF64 = at::TensorOptions().dtype(at::kDouble);
constexpr double kInf = std::numeric_limits<double>::infinity();

// The paper's get_slopes(n), transcribed.
std::vector<double> paper_slopes(int64_t n) {
  auto power_of_2 = [](int64_t m) {
    const double start = std::pow(2.0, -std::pow(2.0, -(std::log2(static_cast<double>(m)) - 3)));
    std::vector<double> out;
    for (int64_t i = 0; i < m; ++i) out.push_back(start * std::pow(start, static_cast<double>(i)));
    return out;
  };
  const double log2n = std::log2(static_cast<double>(n));
  if (log2n == std::floor(log2n)) return power_of_2(n);
  const int64_t closest = int64_t{1} << static_cast<int64_t>(std::floor(log2n));
  std::vector<double> out = power_of_2(closest);
  const std::vector<double> doubled = paper_slopes(2 * closest);
  for (int64_t i = 0; i < n - closest; ++i) out.push_back(doubled[2 * i]);
  return out;
}

// [H, Tq, Tk] float64: -m_h |i' - j|, i' = i + Tk - Tq; causal: -inf for j > i'.
at::Tensor alibi_reference(int64_t heads, int64_t q_len, int64_t k_len, bool causal) {
  const std::vector<double> m = paper_slopes(heads);
  at::Tensor out = at::empty({heads, q_len, k_len}, kF64);
  auto a = out.accessor<double, 3>();
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < q_len; ++i) {
      for (int64_t j = 0; j < k_len; ++j) {
        const int64_t d = i + k_len - q_len - j;
        a[h][i][j] = causal && d < 0 ? -kInf : -m[h] * static_cast<double>(std::abs(d));
      }
    }
  }
  return out;
}

// Hugging Face T5 _relative_position_bucket for one relative position (key - query).
int64_t hf_bucket(int64_t relative_position, bool bidirectional, int64_t num_buckets, int64_t max_distance) {
  int64_t bucket = 0, n = 0;
  if (bidirectional) {
    num_buckets /= 2;
    if (relative_position > 0) bucket += num_buckets;
    n = std::abs(relative_position);
  } else {
    n = std::max<int64_t>(-relative_position, 0);
  }
  const int64_t max_exact = num_buckets / 2;
  if (n < max_exact) return bucket + n;
  // float32 tensor ops: n.float() / max_exact, log, / math.log(...) (a float32 scalar), * (nb - max_exact)
  const float ratio = static_cast<float>(n) / static_cast<float>(max_exact);
  const float scale = static_cast<float>(std::log(static_cast<double>(max_distance) / static_cast<double>(max_exact)));
  const float large = std::log(ratio) / scale * static_cast<float>(num_buckets - max_exact);
  return bucket + std::min<int64_t>(max_exact + static_cast<int64_t>(large), num_buckets - 1);
}

// table [num_buckets, H] (float64, differentiable) -> [H, Tq, Tk]: table[bucket(j - i'), h].
at::Tensor t5_reference(const at::Tensor& table, int64_t q_len, int64_t k_len, bool bidirectional,
                        int64_t max_distance) {
  at::Tensor buckets = at::empty({q_len, k_len}, at::kLong);
  auto b = buckets.accessor<int64_t, 2>();
  for (int64_t i = 0; i < q_len; ++i) {
    for (int64_t j = 0; j < k_len; ++j) {
      b[i][j] = hf_bucket(j - (i + k_len - q_len), bidirectional, table.size(0), max_distance);
    }
  }
  return table.index_select(0, buckets.flatten()).view({q_len, k_len, table.size(1)}).permute({2, 0, 1});
}

at::Tensor leaf(const at::Tensor& t) { return t.detach().to(at::kDouble).clone().requires_grad_(true); }

TEST(BiasModules, AlibiSlopesAreThePapers) {
  // get_slopes(8) = 2^-1 .. 2^-8; get_slopes(6) = get_slopes(4) + get_slopes(8)[0::2][:2].
  const std::vector<double> eight = {0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125, 0.00390625};
  const std::vector<double> six = {0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125};
  EXPECT_EQ(paper_slopes(8), eight);
  EXPECT_EQ(paper_slopes(6), six);
  for (int64_t n : {1, 6, 8, 12, 16}) {
    SCOPED_TRACE(n);
    AlibiBias alibi(n);
    ASSERT_EQ(alibi->slopes().numel(), n);
    EXPECT_EQ(alibi->slopes().scalar_type(), at::kFloat);
    const std::vector<double> m = paper_slopes(n);
    for (int64_t h = 0; h < n; ++h) EXPECT_EQ(alibi->slopes()[h].item<float>(), static_cast<float>(m[h]));
  }
}

TEST(BiasModules, AlibiBiasPutsTheQueriesOnTheLastKeys) {
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "bidirectional");
    AlibiBias alibi(AlibiBiasOptions(6).causal(causal));
    alibi->to(at::kDouble);
    for (const auto& [q_len, k_len] : {std::pair<int64_t, int64_t>{3, 7}, {5, 5}, {1, 9}, {0, 4}}) {
      const at::Tensor bias = alibi->bias(q_len, k_len);
      ASSERT_EQ(bias.sizes(), at::IntArrayRef({6, q_len, k_len}));
      EXPECT_EQ(bias.scalar_type(), at::kDouble);
      // float64: m_h |d| formed once from the same slopes.
      EXPECT_TRUE(at::allclose(bias, alibi_reference(6, q_len, k_len, causal), 0.0, 1e-15, /*equal_nan=*/false));
      EXPECT_TRUE(at::equal(at::isinf(bias), at::isinf(alibi_reference(6, q_len, k_len, causal))));
    }
  }
  // float32 by default: the double product rounded once.
  const at::Tensor bias = AlibiBias(12)->bias(4, 10);
  EXPECT_EQ(bias.scalar_type(), at::kFloat);
  expect_rounded_once(bias, alibi_reference(12, 4, 10, false), 0.0);
}

TEST(BiasModules, ForwardAddsTheBiasInEveryDtype) {
  // 12 heads: irrational slopes (2^-0.5, ...), and a T5 table of arbitrary values,
  // so that rounding the bias to a 16-bit dtype before the sum would show.
  AlibiBias alibi(AlibiBiasOptions(12).causal(true));
  T5Bias t5(T5BiasOptions(12).init_std(4.0));
  const std::vector<std::pair<AttentionBias, at::Tensor>> cases = {
      {alibi, alibi_reference(12, 24, 32, true)}, {t5, t5_reference(t5->table().to(at::kDouble), 24, 32, true, 128)}};
  for (auto [module, bias] : cases) {
    for (at::ScalarType dtype : {at::kFloat, at::kDouble, at::kBFloat16, at::kHalf}) {
      SCOPED_TRACE(module->name() + " " + c10::toString(dtype));
      const at::Tensor logits = at::randn({4, 12, 24, 32}).to(dtype);
      const at::Tensor out = module->forward(logits);
      EXPECT_EQ(out.scalar_type(), dtype);
      const at::Tensor exact = logits.to(at::kDouble) + bias;
      const at::Tensor finite = at::isfinite(exact);
      EXPECT_TRUE(at::equal(finite, at::isfinite(out)));
      // |bias| < 32, |sum| < 32: the bias rounded to float32 (1e-6) and the float32 sum
      // (1e-6) before the one rounding.
      expect_rounded_once(out.masked_select(finite), exact.masked_select(finite), 2e-6);
    }
  }
  // Non-contiguous logits (a transposed view).
  AlibiBias plain(4);
  const at::Tensor logits = at::randn({3, 2, 4, 3}, kF64).permute({1, 2, 0, 3});
  EXPECT_LE(max_abs_diff(plain(logits), logits + alibi_reference(4, 3, 3, false)), 1e-15);
}

TEST(BiasModules, T5MatchesHuggingFaceBucketsAndGradients) {
  struct Case {
    bool bidirectional;
    int64_t num_buckets, max_distance, q_len, k_len;
  };
  // Offsets -199..4 reach past max_distance; the causal decoder; small tables.
  for (const Case& c : std::vector<Case>{{true, 32, 128, 5, 200}, {false, 32, 128, 6, 150}, {true, 16, 20, 30, 30},
                                         {false, 8, 9, 12, 12}}) {
    SCOPED_TRACE("bidirectional=" + std::to_string(c.bidirectional) + " num_buckets=" + std::to_string(c.num_buckets));
    T5Bias t5(T5BiasOptions(3).num_buckets(c.num_buckets).max_distance(c.max_distance).bidirectional(c.bidirectional));
    t5->to(at::kDouble);
    const at::Tensor bias = t5->bias(c.q_len, c.k_len);
    const at::Tensor table = leaf(t5->table());
    const at::Tensor expected = t5_reference(table, c.q_len, c.k_len, c.bidirectional, c.max_distance);
    EXPECT_TRUE(at::equal(bias, expected.detach()));  // a gather: exact
    const at::Tensor g = at::randn_like(bias);
    (bias * g).sum().backward();
    (expected * g).sum().backward();
    // float64 sums of up to Tq*Tk values of size ~1, in different orders.
    EXPECT_LE(max_abs_diff(t5->table().grad(), table.grad()), 1e-11);
  }
  // float32 module: the table's own values, and forward adds them.
  T5Bias t5(T5BiasOptions(2).init_std(1.0));
  const at::Tensor expected = t5_reference(t5->table().to(at::kDouble), 4, 6, true, 128);
  EXPECT_TRUE(at::equal(t5->bias(4, 6).to(at::kDouble), expected));
  const at::Tensor logits = at::randn({3, 2, 4, 6}, kF64);
  EXPECT_LE(max_abs_diff(t5(logits), logits + expected), 1e-15);  // float64 logits: a float64 sum
}

TEST(BiasModules, AlibiOnAGrid) {
  const int64_t height = 4, width = 5;
  for (kernels::GridDistance distance : {kernels::GridDistance::kEuclidean, kernels::GridDistance::kManhattan}) {
    AlibiBias2d alibi(AlibiBias2dOptions(3, height, width).distance(distance));
    alibi->to(at::kDouble);
    const std::vector<double> m = paper_slopes(3);
    at::Tensor expected = at::empty({3, 20, 20}, kF64);
    auto a = expected.accessor<double, 3>();
    for (int64_t h = 0; h < 3; ++h) {
      for (int64_t p = 0; p < 20; ++p) {
        for (int64_t r = 0; r < 20; ++r) {
          const double dy = static_cast<double>(p / width - r / width), dx = static_cast<double>(p % width - r % width);
          const double dist = distance == kernels::GridDistance::kEuclidean ? std::sqrt(dy * dy + dx * dx)
                                                                             : std::abs(dy) + std::abs(dx);
          a[h][p][r] = -m[h] * dist;
        }
      }
    }
    // float64 sqrt and product, each correctly rounded: within an ulp or two.
    EXPECT_LE(max_abs_diff(alibi->bias(20, 20), expected), 1e-15);
  }
}

TEST(BiasModules, T5OnAGridWithGradients) {
  const int64_t height = 3, width = 4, cells = 12;
  T5Bias2d t5(T5Bias2dOptions(2, height, width).num_buckets(8).max_distance(5).init_std(1.0));
  t5->to(at::kDouble);
  const at::Tensor th = leaf(t5->table_h()), tw = leaf(t5->table_w());
  at::Tensor rows = at::empty({cells, cells}, at::kLong), cols = at::empty({cells, cells}, at::kLong);
  auto ra = rows.accessor<int64_t, 2>();
  auto ca = cols.accessor<int64_t, 2>();
  for (int64_t p = 0; p < cells; ++p) {
    for (int64_t r = 0; r < cells; ++r) {
      ra[p][r] = hf_bucket(r / width - p / width, true, 8, 5);  // y' - y
      ca[p][r] = hf_bucket(r % width - p % width, true, 8, 5);  // x' - x
    }
  }
  auto gather = [&](const at::Tensor& table, const at::Tensor& buckets) {
    return table.index_select(0, buckets.flatten()).view({cells, cells, 2}).permute({2, 0, 1});
  };
  const at::Tensor expected = gather(th, rows) + gather(tw, cols);
  const at::Tensor bias = t5->bias(cells, cells);
  EXPECT_LE(max_abs_diff(bias, expected), 1e-15);  // one float64 sum of two table values
  const at::Tensor g = at::randn_like(bias);
  (bias * g).sum().backward();
  (expected * g).sum().backward();
  EXPECT_LE(max_abs_diff(t5->table_h().grad(), th.grad()), 1e-12);  // float64 sums of <= 144 terms
  EXPECT_LE(max_abs_diff(t5->table_w().grad(), tw.grad()), 1e-12);
}

TEST(BiasModules, AnyBiasBehindTheCommonHandle) {
  std::vector<AttentionBias> biases = {AlibiBias(4), T5Bias(4), AlibiBias2d(AlibiBias2dOptions(4, 4, 5)),
                                       T5Bias2d(T5Bias2dOptions(4, 4, 5))};
  for (AttentionBias& b : biases) {
    SCOPED_TRACE(b->name());
    EXPECT_EQ(b->num_heads(), 4);
    const at::Tensor logits = at::randn({2, 4, 20, 20}).requires_grad_(true);
    const at::Tensor out = b(logits);
    EXPECT_EQ(out.sizes(), logits.sizes());
    // (l + b) - l in float32 with |l + b| < 8: within an ulp of 8, 1e-6.
    EXPECT_LE(max_abs_diff(out - logits, b->bias(20, 20).expand({2, 4, 20, 20})), 1e-6);
    // A loss through the handle reaches the logits and every parameter.
    out.square().sum().backward();
    EXPECT_TRUE(logits.grad().defined());
    for (const auto& p : b->named_parameters()) {
      ASSERT_TRUE(p.value().grad().defined()) << p.key();
      EXPECT_GT(p.value().grad().abs().max().item<double>(), 0.0) << p.key();
    }
  }
}

TEST(BiasModules, ParametersBuffersAndInit) {
  auto names = [](const auto& dict) {
    std::vector<std::string> out;
    for (const auto& item : dict) out.push_back(item.key());
    std::sort(out.begin(), out.end());
    return out;
  };
  using Names = std::vector<std::string>;
  EXPECT_EQ(names(AlibiBias(8)->named_buffers()), Names{"slopes"});
  EXPECT_EQ(names(AlibiBias(8)->named_parameters()), Names{});
  EXPECT_EQ(names(AlibiBias2d(AlibiBias2dOptions(8, 2, 2))->named_buffers()), Names{"slopes"});
  EXPECT_EQ(names(T5Bias(8)->named_parameters()), Names{"table"});
  EXPECT_EQ(names(T5Bias(8)->named_buffers()), Names{});
  EXPECT_EQ(names(T5Bias2d(T5Bias2dOptions(8, 2, 2))->named_parameters()), (Names{"table_h", "table_w"}));
  EXPECT_EQ(T5Bias(T5BiasOptions(8).num_buckets(64))->table().sizes(), at::IntArrayRef({64, 8}));

  torch::manual_seed(11);
  T5Bias a(T5BiasOptions(64).num_buckets(256).max_distance(1000).init_std(0.05));
  torch::manual_seed(11);
  T5Bias b(T5BiasOptions(64).num_buckets(256).max_distance(1000).init_std(0.05));
  EXPECT_TRUE(at::equal(a->table(), b->table()));
  // 16384 draws of N(0, 0.05^2): the sample std within 3% (about 5.4 standard errors).
  EXPECT_NEAR(a->table().std().item<double>(), 0.05, 0.0015);

  // to(kDouble) moves parameters and buffers; biases follow their dtype.
  T5Bias t5(4);
  t5->to(at::kDouble);
  EXPECT_EQ(t5->table().scalar_type(), at::kDouble);
  EXPECT_EQ(t5->bias(2, 3).scalar_type(), at::kDouble);
  AlibiBias alibi(4);
  alibi->to(at::kDouble);
  EXPECT_EQ(alibi->slopes().scalar_type(), at::kDouble);
  EXPECT_EQ(alibi->bias(2, 3).scalar_type(), at::kDouble);
  // float32 logits stay float32 (the sum in float64, rounded once).
  EXPECT_EQ(alibi(at::zeros({1, 4, 2, 3})).scalar_type(), at::kFloat);
}

TEST(BiasModules, PrettyPrint) {
  std::ostringstream s;
  s << *T5Bias(T5BiasOptions(12).bidirectional(false));
  EXPECT_EQ(s.str(), "posenc::nn::T5Bias(num_heads=12, num_buckets=32, max_distance=128, bidirectional=false)");
}

TEST(BiasModules, BadOptionsRaiseExactMessages) {
  expect_value_error([] { AlibiBias(0); }, "[AlibiBias] num_heads must be >= 1, got 0");
  expect_value_error([] { T5Bias(-2); }, "[T5Bias] num_heads must be >= 1, got -2");
  expect_value_error([] { T5Bias(T5BiasOptions(4).num_buckets(31)); },
                     "[T5Bias] num_buckets must be even when bidirectional (half per direction), got 31");
  expect_value_error([] { T5Bias(T5BiasOptions(4).max_distance(16)); },
                     "[T5Bias] max_distance must be > num_buckets/2 = 16, got 16");
  expect_value_error([] { T5Bias(T5BiasOptions(4).init_std(-0.5)); },
                     "[T5Bias] init_std must be finite and >= 0, got -0.5");
  expect_value_error([] { AlibiBias2d(AlibiBias2dOptions(4, 0, 5)); }, "[AlibiBias2d] height must be >= 1, got 0");
  expect_value_error([] { T5Bias2d(T5Bias2dOptions(4, 3, 0)); }, "[T5Bias2d] width must be >= 1, got 0");
  expect_value_error([] { T5Bias2d(T5Bias2dOptions(0, 3, 3)); }, "[T5Bias2d] num_heads must be >= 1, got 0");
  expect_value_error([] { T5Bias2d(T5Bias2dOptions(2, 3, 3).num_buckets(1).bidirectional(false)); },
                     "[T5Bias2d] num_buckets must be >= 2, got 1");
}

TEST(BiasModules, BadTensorsRaiseExactMessages) {
  AlibiBias alibi(8);
  expect_value_error([&] { alibi(at::zeros({8, 3, 3})); }, "[AlibiBias] logits must be 4-D (B, H, Tq, Tk), got 3-D");
  expect_value_error([&] { alibi(at::zeros({1, 4, 3, 3})); },
                     "[AlibiBias] logits must have num_heads = 8 heads, got 4");
  expect_error<c10::TypeError>([&] { alibi(at::zeros({1, 8, 3, 3}, at::kLong)); },
                               "[AlibiBias] logits must be float32, float64, bfloat16 or float16, got Long");
  // Causal ALiBi needs every query to see a key.
  expect_value_error([] { AlibiBias(AlibiBiasOptions(2).causal(true))->bias(5, 3); },
                     "[alibi_bias] causal needs q_len <= k_len (the queries are the last q_len keys), "
                     "got q_len 5 and k_len 3");
  AlibiBias2d grid(AlibiBias2dOptions(2, 4, 5));
  expect_value_error([&] { grid->bias(21, 20); },
                     "[AlibiBias2d] q_len and k_len must both be height*width = 20, got 21 and 20");
  expect_value_error([&] { grid(at::zeros({1, 2, 20, 19})); },
                     "[AlibiBias2d] q_len and k_len must both be height*width = 20, got 20 and 19");
  T5Bias2d t5(T5Bias2dOptions(2, 4, 5));
  expect_value_error([&] { t5->bias(20, 21); },
                     "[T5Bias2d] q_len and k_len must both be height*width = 20, got 20 and 21");
}

}  // namespace
}  // namespace posenc::nn::test
