// The C++ op API (posenc/nn/ops.h) against plain float64 references: layouts,
// dtypes, shapes, non-contiguous and empty inputs, gradients, exact errors.
// The Python tests cover the same ops from torch.ops in more depth.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "posenc/nn/ops.h"
#include "reference.h"

namespace posenc::nn::test {
namespace {

using kernels::SinusoidalLayout;
using kernels::SinusoidalParams;

struct TableCase {
  int64_t dim;
  double base;
  SinusoidalLayout layout;
  at::ScalarType dtype;
  double tolerance;  // against the float64 reference
};

std::string describe(const TableCase& c) {
  std::ostringstream s;
  s << "dim=" << c.dim << " base=" << c.base << " layout=" << kernels::layout_name(c.layout)
    << " dtype=" << c.dtype;
  return s.str();
}

// Model shapes (GPT-2 768, BERT-base head 64, tiny 2) in each layout and dtype.
const std::vector<TableCase> kTableCases = {
    // 5e-7: the exact mode's documented float32 bound.
    {768, 10000.0, SinusoidalLayout::kInterleaved, at::kFloat, 5e-7},
    {64, 10000.0, SinusoidalLayout::kHalf, at::kFloat, 5e-7},
    {2, 500.0, SinusoidalLayout::kCosSin, at::kFloat, 5e-7},
    // 1e-12: float64 rounding of sin/cos, far below any float32 effect.
    {64, 10000.0, SinusoidalLayout::kInterleaved, at::kDouble, 1e-12},
    // one rounding to the 8-bit / 11-bit significand of values in [-1, 1].
    {64, 10000.0, SinusoidalLayout::kHalf, at::kBFloat16, 1.0 / 256},
    {64, 10000.0, SinusoidalLayout::kCosSin, at::kHalf, 1.0 / 2048},
};

TEST(NnOps, SinusoidalMatchesReferenceForRangeAndList) {
  for (const TableCase& c : kTableCases) {
    SCOPED_TRACE(describe(c));
    const SinusoidalParams params{c.dim, c.base, 1.0, c.layout};
    const at::Tensor expected = reference_sinusoidal(1000, 50, c.dim, c.base, c.layout);
    const at::Tensor range = ops::sinusoidal_range(1000, 50, params, c.dtype);
    EXPECT_EQ(range.scalar_type(), c.dtype);
    EXPECT_EQ(range.sizes(), at::IntArrayRef({50, c.dim}));
    EXPECT_LE(max_abs_diff(range, expected), c.tolerance);
    const at::Tensor list = ops::sinusoidal(at::arange(1000, 1050, at::kLong), params, c.dtype);
    EXPECT_LE(max_abs_diff(list, expected), c.tolerance);
  }
}

TEST(NnOps, SinusoidalTakesAnyPositionShapeAndStrides) {
  const SinusoidalParams params{16};
  const at::Tensor grid = at::arange(24, at::kLong).reshape({4, 6});
  const at::Tensor strided = grid.t();  // (6, 4), non-contiguous
  ASSERT_FALSE(strided.is_contiguous());
  const at::Tensor out = ops::sinusoidal(strided, params);
  EXPECT_EQ(out.sizes(), at::IntArrayRef({6, 4, 16}));
  const at::Tensor expected = ops::sinusoidal(strided.contiguous().reshape(-1), params).reshape({6, 4, 16});
  EXPECT_TRUE(at::equal(out, expected));
  // Row (i, j) holds position 6*j + i.
  EXPECT_LE(max_abs_diff(out[2][3], reference_sinusoidal(20, 1, 16)[0]), 5e-7);
}

TEST(NnOps, EmptyPositionsGiveAnEmptyTable) {
  const at::Tensor out = ops::sinusoidal(at::empty({0}, at::kLong), SinusoidalParams{8});
  EXPECT_EQ(out.sizes(), at::IntArrayRef({0, 8}));
  const at::Tensor learned = ops::learned(at::randn({4, 3}), at::empty({0}, at::kLong));
  EXPECT_EQ(learned.sizes(), at::IntArrayRef({0, 3}));
}

TEST(NnOps, AbsoluteIndexAndFrequencies) {
  kernels::AbsoluteParams params;
  params.kind = kernels::AbsoluteKind::kIndex;
  params.dim = 3;
  const at::Tensor out = ops::absolute_range(5, 4, params);
  EXPECT_TRUE(at::equal(out, at::arange(5, 9, at::kFloat).unsqueeze(1).expand({4, 3})));
  const at::Tensor omega = ops::sinusoidal_frequencies(8, 100.0);
  EXPECT_EQ(omega.scalar_type(), at::kDouble);
  const std::vector<long double> expected = reference_frequencies(8, 100.0);
  for (int64_t i = 0; i < 4; ++i) EXPECT_NEAR(omega[i].item<double>(), static_cast<double>(expected[i]), 1e-15);
  const std::vector<std::string> kinds = ops::absolute_kinds();
  EXPECT_EQ(kinds.size(), 9u);
  EXPECT_EQ(kinds.back(), "learnable-sinusoidal");
}

TEST(NnOps, LearnedGathersAndScattersGradients) {
  const at::Tensor table = at::randn({5, 3}, at::kDouble).requires_grad_();
  const at::Tensor positions = at::tensor(std::vector<int64_t>{4, 0, 4, 2}).reshape({2, 2});
  const at::Tensor out = ops::learned(table, positions);
  EXPECT_EQ(out.sizes(), at::IntArrayRef({2, 2, 3}));
  EXPECT_TRUE(at::equal(out[0][0], table[4]));
  out.sum().backward();
  const at::Tensor counts = at::tensor(std::vector<double>{1, 0, 1, 0, 2}).unsqueeze(1).expand({5, 3});
  EXPECT_TRUE(at::equal(table.grad(), counts));
}

TEST(NnOps, LearnedBfloat16TableStaysExact) {
  const at::Tensor table = at::randn({6, 4}).to(at::kBFloat16);
  const at::Tensor out = ops::learned(table, at::tensor(std::vector<int64_t>{5, 1}));
  EXPECT_EQ(out.scalar_type(), at::kBFloat16);
  EXPECT_TRUE(at::equal(out[0], table[5]));
}

TEST(NnOps, LearnableSinusoidalMatchesReferenceAndHasGradient) {
  const at::Tensor omega = at::tensor(std::vector<double>{0.9, 0.1, 0.003}).requires_grad_();
  const at::Tensor positions = at::arange(0, 7, at::kLong);
  const at::Tensor out = ops::learnable_sinusoidal(positions, omega, {SinusoidalLayout::kHalf, 2.0});
  const at::Tensor expected =
      reference_sinusoids({0, 1, 2, 3, 4, 5, 6}, {0.9L, 0.1L, 0.003L}, SinusoidalLayout::kHalf, 2.0);
  EXPECT_LE(max_abs_diff(out, expected), 1e-12);  // float64 sin/cos
  out.sum().backward();
  // d/dw sum_p 2 (sin(p w) + cos(p w)) = sum_p 2 p (cos(p w) - sin(p w))
  for (int64_t i = 0; i < 3; ++i) {
    const double w = omega[i].item<double>();
    double expected_grad = 0;
    for (int p = 0; p < 7; ++p) expected_grad += 2.0 * p * (std::cos(p * w) - std::sin(p * w));
    EXPECT_NEAR(omega.grad()[i].item<double>(), expected_grad, 1e-12);
  }
}

TEST(NnOps, GridShapesAndTranslationComposes) {
  kernels::SinusoidalGridParams grid;
  grid.height = 3;
  grid.width = 5;
  grid.dim = 8;
  EXPECT_EQ(ops::sinusoidal_2d(grid).sizes(), at::IntArrayRef({15, 8}));
  grid.frames = 2;
  grid.dim = 12;
  EXPECT_EQ(ops::sinusoidal_3d(grid, at::kDouble).sizes(), at::IntArrayRef({30, 12}));

  const SinusoidalParams params{16};
  const at::Tensor product = at::matmul(ops::translation_matrix(3.0, params), ops::translation_matrix(4.5, params));
  EXPECT_LE(max_abs_diff(product, ops::translation_matrix(7.5, params)), 1e-14);  // a few float64 roundings
}

TEST(NnOps, BadArgumentsRaiseValueErrorsWithTheKernelMessages) {
  expect_value_error([] { ops::sinusoidal_range(0, 4, SinusoidalParams{7}); }, "[sinusoidal] dim must be even, got 7");
  expect_value_error([] { ops::sinusoidal_range(0, 0, SinusoidalParams{8}); },
                     "[sinusoidal] positions must be at least 1, got 0");
  expect_value_error([] { ops::sinusoidal_range(0, int64_t{1} << 30, SinusoidalParams{8}); },
                     "[sinusoidal] positions x dim must be at most 2147483648 values, got 1073741824 x 8");
  expect_value_error([] { ops::sinusoidal(at::arange(3, at::kLong), SinusoidalParams{8, -2.0}); },
                     "[sinusoidal] base must be finite and > 0, got -2");
  expect_value_error([] { ops::learned(at::zeros({4, 2}), at::tensor(std::vector<int64_t>{1, 4})); },
                     "[learned] position 4 is outside the table of 4 rows (valid 0..3)");
  expect_value_error([] { ops::learned(at::zeros({4}), at::arange(2, at::kLong)); },
                     "[learned] table must be 2-D [rows, dim], got shape [4]");
  expect_error<c10::TypeError>(
      [] { ops::sinusoidal(at::arange(3, at::kFloat), SinusoidalParams{8}); },
      "[sinusoidal] positions must be a signed integer tensor (int64, int32, int16 or int8), got Float");
  expect_error<c10::TypeError>(
      [] { ops::sinusoidal(at::arange(3, at::kByte), SinusoidalParams{8}); },
      "[sinusoidal] positions must be a signed integer tensor (int64, int32, int16 or int8), got Byte");
}

}  // namespace
}  // namespace posenc::nn::test
