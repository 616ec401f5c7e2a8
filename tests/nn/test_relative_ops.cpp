// The relative-vector C++ API (posenc/nn/relative_ops.h) against plain
// float64 loops written here from kernels/relative.h: values, a gradient
// through the dispatcher, and the errors. The Python tests
// (tests/python/test_relative*.py) cover the ops in depth.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "posenc/nn/relative_ops.h"
#include "reference.h"

namespace posenc::nn::test {
namespace {

using kernels::RelativeParams;

int64_t row_of(int64_t i, int64_t j, const RelativeParams& p) {
  return std::clamp(j - (i + p.query_offset), -p.max_distance, p.max_distance) + p.max_distance;
}

// The table of head h: [2k+1, D] shared or [H, 2k+1, D].
at::Tensor head_table(const at::Tensor& table, int64_t h) { return table.dim() == 2 ? table : table[h]; }

// out[b,h,i,j] = q[b,h,i] . table[row(i, j)]
at::Tensor reference_logits(const at::Tensor& q, const at::Tensor& table, const RelativeParams& p, int64_t tk) {
  const at::Tensor qd = q.to(at::kDouble), td = table.to(at::kDouble);
  at::Tensor out = at::zeros({q.size(0), q.size(1), q.size(2), tk}, at::kDouble);
  auto o = out.accessor<double, 4>();
  auto a = qd.accessor<double, 4>();
  for (int64_t b = 0; b < q.size(0); ++b) {
    for (int64_t h = 0; h < q.size(1); ++h) {
      const at::Tensor t = head_table(td, h).contiguous();
      auto ta = t.accessor<double, 2>();
      for (int64_t i = 0; i < q.size(2); ++i) {
        for (int64_t j = 0; j < tk; ++j) {
          for (int64_t d = 0; d < q.size(3); ++d) o[b][h][i][j] += a[b][h][i][d] * ta[row_of(i, j, p)][d];
        }
      }
    }
  }
  return out;
}

// out[b,h,i] = sum_j probs[b,h,i,j] table[row(i, j)]
at::Tensor reference_values(const at::Tensor& probs, const at::Tensor& table, const RelativeParams& p) {
  const at::Tensor pd = probs.to(at::kDouble), td = table.to(at::kDouble);
  const int64_t dim = table.size(-1);
  at::Tensor out = at::zeros({probs.size(0), probs.size(1), probs.size(2), dim}, at::kDouble);
  auto o = out.accessor<double, 4>();
  auto a = pd.accessor<double, 4>();
  for (int64_t b = 0; b < probs.size(0); ++b) {
    for (int64_t h = 0; h < probs.size(1); ++h) {
      const at::Tensor t = head_table(td, h).contiguous();
      auto ta = t.accessor<double, 2>();
      for (int64_t i = 0; i < probs.size(2); ++i) {
        for (int64_t j = 0; j < probs.size(3); ++j) {
          for (int64_t d = 0; d < dim; ++d) o[b][h][i][d] += a[b][h][i][j] * ta[row_of(i, j, p)][d];
        }
      }
    }
  }
  return out;
}

// grad[t(h), row(i, j)] += w[b,h,i,j] x[b,h,i]; [2k+1, D] for a shared table.
at::Tensor reference_table_grad(const at::Tensor& w, const at::Tensor& x, const RelativeParams& p, bool shared) {
  const int64_t tables = shared ? 1 : w.size(1), rows = 2 * p.max_distance + 1, dim = x.size(3);
  at::Tensor grad = at::zeros({tables, rows, dim}, at::kDouble);
  auto g = grad.accessor<double, 3>();
  const at::Tensor wd = w.to(at::kDouble), xd = x.to(at::kDouble);
  auto wa = wd.accessor<double, 4>();
  auto xa = xd.accessor<double, 4>();
  for (int64_t b = 0; b < w.size(0); ++b) {
    for (int64_t h = 0; h < w.size(1); ++h) {
      for (int64_t i = 0; i < w.size(2); ++i) {
        for (int64_t j = 0; j < w.size(3); ++j) {
          for (int64_t d = 0; d < dim; ++d) g[shared ? 0 : h][row_of(i, j, p)][d] += wa[b][h][i][j] * xa[b][h][i][d];
        }
      }
    }
  }
  return shared ? grad[0] : grad;
}

// 1e-12: float64 sums of at most Dh = 16 (or Tk = 11) products of unit-variance values.
constexpr double kF64 = 1e-12;

TEST(NnRelativeOps, LogitsAndValuesMatchReference) {
  struct Case {
    int64_t b, heads, tq, tk, dim;
    RelativeParams params;
    bool per_head;
  };
  const Case cases[] = {
      {2, 3, 7, 7, 8, {2, 0}, false},   // Shaw et al., k = 2
      {1, 4, 6, 11, 16, {16, 5}, true},  // Transformer-XL: k >= every offset, 5 memory keys
      {1, 2, 9, 4, 4, {3, -1}, false},   // Tq > Tk, negative offset
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << "k=" << c.params.max_distance << " offset=" << c.params.query_offset);
    // q as a transposed (B, T, H, D) projection: the strided path.
    const at::Tensor q = at::randn({c.b, c.tq, c.heads, c.dim}, at::kDouble).transpose(1, 2);
    const int64_t rows = 2 * c.params.max_distance + 1;
    const at::Tensor table = c.per_head ? at::randn({c.heads, rows, c.dim}, at::kDouble)
                                        : at::randn({rows, c.dim}, at::kDouble);
    const at::Tensor logits = ops::relative_logits(q, table, c.params, c.tk);
    EXPECT_EQ(logits.sizes(), at::IntArrayRef({c.b, c.heads, c.tq, c.tk}));
    EXPECT_LE(max_abs_diff(logits, reference_logits(q, table, c.params, c.tk)), kF64);
    const at::Tensor probs = at::softmax(at::randn({c.b, c.heads, c.tq, c.tk}, at::kDouble), -1);
    const at::Tensor values = ops::relative_values(probs, table, c.params);
    EXPECT_EQ(values.sizes(), at::IntArrayRef({c.b, c.heads, c.tq, c.dim}));
    EXPECT_LE(max_abs_diff(values, reference_values(probs, table, c.params)), kF64);
  }
}

TEST(NnRelativeOps, Float32AndBfloat16RoundOnce) {
  const RelativeParams params{4, 0};
  const at::Tensor q = at::randn({1, 2, 10, 32}).to(at::kBFloat16);
  const at::Tensor table = at::randn({9, 32}).to(at::kBFloat16);
  const at::Tensor out = ops::relative_logits(q, table, params);
  EXPECT_EQ(out.scalar_type(), at::kBFloat16);
  const at::Tensor expected = reference_logits(q, table, params, 10);
  // One rounding to bfloat16 (2^-8 relative) of a float32 sum of 32 products (|sum| <= ~40).
  EXPECT_LE(((out.to(at::kDouble) - expected).abs() - expected.abs() * std::ldexp(1.0, -8)).max().item<double>(),
            1e-4);
  const at::Tensor out32 = ops::relative_logits(q.to(at::kFloat), table.to(at::kFloat), params);
  EXPECT_EQ(out32.scalar_type(), at::kFloat);
  EXPECT_LE(max_abs_diff(out32, expected), 1e-4);  // 32 * 2^-24 * sum |terms| (~40)
}

TEST(NnRelativeOps, GradientsFlowThroughTheDispatcher) {
  const RelativeParams params{2, 1};
  for (const bool shared : {true, false}) {
    SCOPED_TRACE(shared ? "shared table" : "per-head tables");
    const at::Tensor q = at::randn({2, 3, 5, 4}, at::kDouble).requires_grad_();
    const at::Tensor table =
        (shared ? at::randn({5, 4}, at::kDouble) : at::randn({3, 5, 4}, at::kDouble)).requires_grad_();
    const at::Tensor g = at::randn({2, 3, 5, 6}, at::kDouble);
    ops::relative_logits(q, table, params, 6).backward(g);
    // logits(q, T): dq = values(g, T), dT = table_grad(g, q), in T's own shape.
    EXPECT_LE(max_abs_diff(q.grad(), reference_values(g, table.detach(), params)), kF64);
    EXPECT_EQ(table.grad().sizes(), table.sizes());
    EXPECT_LE(max_abs_diff(table.grad(), reference_table_grad(g, q.detach(), params, shared)), kF64);
  }
}

TEST(NnRelativeOps, Logits2dIsTheSumOfRowAndColumnTerms) {
  const kernels::Relative2dParams grid{3, 5};
  const at::Tensor q = at::randn({1, 2, 15, 4}, at::kDouble);
  const at::Tensor table_h = at::randn({5, 4}, at::kDouble), table_w = at::randn({2, 9, 4}, at::kDouble);
  const at::Tensor out = ops::relative_logits_2d(q, table_h, table_w, grid);
  auto o = out.accessor<double, 4>();
  double worst = 0;
  for (int64_t h = 0; h < 2; ++h) {
    for (int64_t a = 0; a < 15; ++a) {
      for (int64_t c = 0; c < 15; ++c) {
        const int64_t y = a / 5, x = a % 5, y2 = c / 5, x2 = c % 5;
        const double expected =
            (q[0][h][a] * (table_h[y2 - y + 2] + table_w[h][x2 - x + 4])).sum().item<double>();
        worst = std::max(worst, std::abs(o[0][h][a][c] - expected));
      }
    }
  }
  EXPECT_LE(worst, kF64);
}

TEST(NnRelativeOps, SinusoidalTableIsTheSinusoidOfEachOffset) {
  const at::Tensor table = ops::sinusoidal_relative_table(3, 8, 10000.0, std::nullopt, at::kDouble);
  EXPECT_EQ(table.sizes(), at::IntArrayRef({7, 8}));
  EXPECT_LE(max_abs_diff(table, reference_sinusoidal(-3, 7, 8)), 1e-15);  // float64 sin/cos
  const at::Tensor omega = at::tensor(std::vector<double>{0.5, 0.01});
  const at::Tensor learnable = ops::sinusoidal_relative_table(2, 4, 10000.0, omega);
  EXPECT_EQ(learnable.scalar_type(), at::kDouble);
  EXPECT_LE(max_abs_diff(learnable, reference_sinusoids({-2, -1, 0, 1, 2}, {0.5L, 0.01L},
                                                        kernels::SinusoidalLayout::kInterleaved)),
            1e-15);
}

TEST(NnRelativeOps, BadArgumentsRaiseValueErrors) {
  const at::Tensor q = at::zeros({1, 8, 16, 64});
  expect_value_error([&] { ops::relative_logits(q, at::zeros({8, 64}), {4, 0}); },
                     "[relative_logits] table must have 2*max_distance+1 = 9 rows, got 8");
  expect_value_error([&] { ops::relative_values(at::zeros({8, 16, 16}), at::zeros({9, 64}), {4, 0}); },
                     "[relative_values] probs must be 4-D (B, H, Tq, Tk), got 3-D");
  expect_value_error([&] { ops::relative_logits_2d(q, at::zeros({7, 64}), at::zeros({9, 64}), {4, 5}); },
                     "[relative_logits_2d] q must have height*width = 20 rows, got 16");
  expect_value_error([] { ops::sinusoidal_relative_table(-1, 8); },
                     "[sinusoidal_relative_table] max_distance must be >= 0, got -1");
  expect_error<c10::TypeError>([&] { ops::relative_logits(q, at::zeros({9, 64}, at::kDouble), {4, 0}); },
                               "[relative_logits] table must have q's dtype (float32), got float64");
}

}  // namespace
}  // namespace posenc::nn::test
