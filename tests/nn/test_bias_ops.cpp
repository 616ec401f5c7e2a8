// The attention-bias C++ API (posenc/nn/bias_ops.h: ALiBi, T5) against
// plain float64 references written here, plus the exact errors. The Python
// tests (tests/python/test_attention_bias*.py) cover the ops in more depth.
#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "posenc/nn/bias_ops.h"

namespace posenc::nn::test {
namespace {

// The paper's slopes, written from the rule: 2^(-8h/n) for a power of two;
// else those of c = 2^floor(log2 n) heads, then the odd ones of 2c heads.
std::vector<double> paper_slopes(int64_t n) {
  int64_t c = 1;
  while (2 * c <= n) c *= 2;
  std::vector<double> s;
  for (int64_t h = 1; h <= c; ++h) s.push_back(std::exp2(-8.0 * static_cast<double>(h) / static_cast<double>(c)));
  for (int64_t h = 1; static_cast<int64_t>(s.size()) < n; h += 2) {
    s.push_back(std::exp2(-8.0 * static_cast<double>(h) / static_cast<double>(2 * c)));
  }
  return s;
}

// [H, q_len, k_len] float64, queries on the last keys.
at::Tensor reference_alibi(int64_t heads, int64_t q_len, int64_t k_len, bool causal) {
  const std::vector<double> m = paper_slopes(heads);
  at::Tensor out = at::empty({heads, q_len, k_len}, at::kDouble);
  auto a = out.accessor<double, 3>();
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < q_len; ++i) {
      const int64_t ip = i + k_len - q_len;
      for (int64_t j = 0; j < k_len; ++j) {
        a[h][i][j] = causal && j > ip ? -std::numeric_limits<double>::infinity()
                                      : -m[h] * static_cast<double>(std::llabs(ip - j));
      }
    }
  }
  return out;
}

// Max |a - b| over finite entries; -inf must match exactly (else +inf).
double max_diff(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor x = a.to(at::kDouble), y = b.to(at::kDouble);
  if (!at::equal(at::isneginf(x), at::isneginf(y))) return std::numeric_limits<double>::infinity();
  const at::Tensor finite = at::isfinite(y);
  if (finite.sum().item<int64_t>() == 0) return 0.0;
  return (x.masked_select(finite) - y.masked_select(finite)).abs().max().item<double>();
}

template <class Body>
std::string value_error(Body&& body) {
  try {
    body();
  } catch (const c10::ValueError& e) {
    return e.what_without_backtrace();
  }
  return "(no ValueError)";
}

TEST(NnBiasOps, AlibiMatchesReference) {
  struct Case {
    int64_t heads, q_len, k_len;
    bool causal;
  };
  for (const Case& c : {Case{8, 6, 6, false}, Case{8, 6, 6, true}, Case{5, 2, 9, true}, Case{12, 9, 4, false}}) {
    SCOPED_TRACE("heads=" + std::to_string(c.heads) + " q_len=" + std::to_string(c.q_len) +
                 " k_len=" + std::to_string(c.k_len) + " causal=" + std::to_string(c.causal));
    const at::Tensor expected = reference_alibi(c.heads, c.q_len, c.k_len, c.causal);
    const at::Tensor f32 = ops::alibi_bias(c.heads, c.q_len, c.k_len, c.causal);
    EXPECT_EQ(f32.scalar_type(), at::kFloat);
    // |bias| <= 8 * 0.5: one float32 rounding, 4 * 2^-24.
    EXPECT_LE(max_diff(f32, expected), 2.5e-7);
    // 8 * 2^-52 * 4: exp2 and the product, each correctly rounded in double.
    EXPECT_LE(max_diff(ops::alibi_bias(c.heads, c.q_len, c.k_len, c.causal, at::kDouble), expected), 1e-14);
  }
}

TEST(NnBiasOps, AlibiSlopesAndOutBuffer) {
  const std::vector<double> m = paper_slopes(12);
  const at::Tensor slopes = ops::alibi_slopes(12, at::kDouble);
  for (int64_t h = 0; h < 12; ++h) EXPECT_NEAR(slopes[h].item<double>(), m[h], 1e-16) << "h=" << h;

  at::Tensor out = at::full({4, 3, 7}, 5.0, at::kFloat);
  const void* data = out.data_ptr();
  at::Tensor& result = ops::alibi_bias_out(out, 4, 3, 7, true);
  EXPECT_EQ(&result, &out);
  EXPECT_EQ(out.data_ptr(), data);
  EXPECT_LE(max_diff(out, reference_alibi(4, 3, 7, true)), 2.5e-7);  // as above: one float32 rounding
}

TEST(NnBiasOps, Alibi2dManhattan) {
  const at::Tensor out = ops::alibi_bias_2d({3, 2, 3, kernels::GridDistance::kManhattan}, at::kDouble);
  ASSERT_EQ(out.sizes(), at::IntArrayRef({3, 6, 6}));
  const std::vector<double> m = paper_slopes(3);
  double worst = 0;
  for (int64_t p = 0; p < 6; ++p) {
    for (int64_t q = 0; q < 6; ++q) {
      const double d = std::abs(p / 3 - q / 3) + std::abs(p % 3 - q % 3);
      for (int64_t h = 0; h < 3; ++h) worst = std::max(worst, std::abs(out[h][p][q].item<double>() + m[h] * d));
    }
  }
  EXPECT_LE(worst, 1e-15);  // one double rounding of a product <= 3
}

TEST(NnBiasOps, T5BucketAndBiasMatchTheFormula) {
  // T5 defaults: 8 exact buckets per direction, keys after the query + 16; n >= 8 logarithmic:
  // 8 + floor(log(n/8) / log(16) * 8).
  const at::Tensor rel = at::tensor(std::vector<int64_t>{0, -3, 3, -12, 12, -200, 200});
  const at::Tensor buckets = ops::t5_bucket(rel);
  const std::vector<int64_t> expected{0, 3, 19, 9, 25, 15, 31};
  ASSERT_EQ(buckets.scalar_type(), at::kLong);
  for (size_t k = 0; k < expected.size(); ++k) EXPECT_EQ(buckets[k].item<int64_t>(), expected[k]) << "k=" << k;

  // the bias looks the table up at bucket(j - i'), here with the decoder's (causal) buckets
  const at::Tensor table = at::randn({32, 4}, at::kDouble);
  const at::Tensor bias = ops::t5_bias(table, 3, 5, /*bidirectional=*/false);
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < 5; ++j) {
      const int64_t n = std::max<int64_t>(0, (i + 2) - j);  // causal: n = max(i' - j, 0) < 16, exact
      EXPECT_TRUE(at::equal(bias.select(1, i).select(1, j), table[n])) << "i=" << i << " j=" << j;
    }
  }
}

TEST(NnBiasOps, T5GradientsFlowTwice) {
  // d/dtable of <t5_bias(table), g> is t5_bias_backward(g); its derivative wrt g, applied to v, is t5_bias(v).
  const at::Tensor table = at::randn({8, 2}, at::kDouble).requires_grad_();
  const at::Tensor g = at::randn({2, 4, 6}, at::kDouble).requires_grad_();
  const at::Tensor out = ops::t5_bias(table, 4, 6, true, 10);
  const at::Tensor grad_table = torch::autograd::grad({out}, {table}, {g}, /*retain_graph=*/true,
                                                      /*create_graph=*/true)[0];
  // reference: the sum of g over each bucket's (i, j), buckets by hand for nb' = 4, max_exact = 2
  at::Tensor expected = at::zeros({8, 2}, at::kDouble);
  for (int64_t i = 0; i < 4; ++i) {
    for (int64_t j = 0; j < 6; ++j) {
      const int64_t r = j - (i + 2);
      const int64_t n = std::llabs(r);
      const int64_t b = (r > 0 ? 4 : 0) +
                        (n < 2 ? n : std::min<int64_t>(3, 2 + static_cast<int64_t>(std::log(n / 2.0) /
                                                                                  std::log(10 / 2.0) * 2)));
      expected[b] += g.detach().select(1, i).select(1, j);
    }
  }
  EXPECT_LE((grad_table.detach() - expected).abs().max().item<double>(), 1e-14);  // 24-term double sums
  const at::Tensor v = at::randn({8, 2}, at::kDouble);
  const at::Tensor gg = torch::autograd::grad({grad_table}, {g}, {v})[0];
  EXPECT_TRUE(at::equal(gg, ops::t5_bias(v, 4, 6, true, 10)));

  const at::Tensor th = at::randn({8, 2}, at::kDouble).requires_grad_();
  const at::Tensor tw = at::randn({8, 2}, at::kDouble).requires_grad_();
  ops::t5_bias_2d(th, tw, 2, 3, true, 10).sum().backward();
  // each (p, q) pair adds its 1 to one bucket of each table: a head's column sums to HW^2 = 36
  EXPECT_NEAR(th.grad().sum(0)[0].item<double>(), 36.0, 1e-12);
  EXPECT_NEAR(tw.grad().sum(0)[1].item<double>(), 36.0, 1e-12);
}

TEST(NnBiasOps, ErrorsAreValueErrorsWithExactMessages) {
  EXPECT_EQ(value_error([] { ops::alibi_bias(8, 5, 3, true); }),
            "[alibi_bias] causal needs q_len <= k_len (the queries are the last q_len keys), got q_len 5 and k_len 3");
  EXPECT_EQ(value_error([] { ops::alibi_bias(0, 4, 4); }), "[alibi_bias] num_heads must be >= 1, got 0");
  at::Tensor wrong = at::empty({8, 16, 16}, at::kHalf);
  EXPECT_EQ(value_error([&] { ops::alibi_bias_out(wrong, 8, 16, 16); }),
            "[alibi_bias] out must be a contiguous float32 or float64 tensor of shape [8, 16, 16], got a contiguous "
            "float16 tensor of shape [8, 16, 16]");
  EXPECT_EQ(value_error([] { ops::t5_bias(at::zeros({2, 32, 8}), 4, 4); }),
            "[t5_bias] table must be 2-D [num_buckets, heads], got 3-D");
  EXPECT_EQ(value_error([] { ops::t5_bucket(at::arange(3), {true, 31, 128}); }),
            "[t5_bucket] num_buckets must be even when bidirectional (half per direction), got 31");
  EXPECT_EQ(value_error([] { ops::alibi_bias_2d({8, 0, 4, kernels::GridDistance::kEuclidean}); }),
            "[alibi_bias_2d] height must be >= 1, got 0");
}

}  // namespace
}  // namespace posenc::nn::test
