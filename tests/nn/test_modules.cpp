// The input-encoding modules: add / concat, the four input dtypes, shapes,
// start offsets and explicit positions, gradients into the trainable
// parameters, and exact error messages. Expected values come from the plain
// float64 reference in reference.h.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "posenc/nn/absolute_modules.h"
#include "reference.h"

namespace posenc::nn::test {
namespace {

using kernels::SinusoidalLayout;

// Expects out == exact rounded once to out's dtype: within half an ulp of
// each value, plus a slack for what happens before that rounding (float32:
// the table's 5e-7 and the float32 sum; float64: a few float64 ulps). A second
// rounding (pe to bfloat16 before the sum, say) shows up as a full ulp.
void expect_rounded_once(const at::Tensor& out, const at::Tensor& exact) {
  int bits = 0;  // explicit significand bits
  double slack = 0;
  switch (out.scalar_type()) {
    case at::kDouble: bits = 52; slack = 1e-15; break;
    case at::kFloat: bits = 23; slack = 1e-6; break;
    case at::kBFloat16: bits = 7; slack = 1e-6; break;
    case at::kHalf: bits = 10; slack = 1e-6; break;
    default: FAIL() << "unexpected dtype " << out.scalar_type();
  }
  const at::Tensor magnitude = exact.abs().clamp_min(1e-30);
  const at::Tensor half_ulp = at::exp2(at::floor(at::log2(magnitude)) - bits) * 0.5;
  const at::Tensor excess = (out.to(at::kDouble) - exact).abs() - half_ulp - slack;
  EXPECT_LE(excess.max().item<double>(), 0.0) << "worst value " << exact.flatten()[excess.flatten().argmax()].item<double>();
}

struct DtypeCase {
  at::ScalarType dtype;
  const char* name;
};
const std::vector<DtypeCase> kDtypes = {
    {at::kFloat, "float32"}, {at::kDouble, "float64"}, {at::kBFloat16, "bfloat16"}, {at::kHalf, "float16"}};

TEST(NnModules, SinusoidalAddsTheTableInEveryDtype) {
  SinusoidalEncoding encoding(SinusoidalEncodingOptions(16).layout(SinusoidalLayout::kHalf));
  for (const DtypeCase& c : kDtypes) {
    SCOPED_TRACE(c.name);
    const at::Tensor x = at::randn({8, 5, 16}).to(c.dtype);
    const at::Tensor out = encoding(x);
    EXPECT_EQ(out.scalar_type(), c.dtype);
    EXPECT_EQ(out.sizes(), x.sizes());
    expect_rounded_once(out, x.to(at::kDouble) + reference_sinusoidal(0, 5, 16, 10000.0, SinusoidalLayout::kHalf));
  }
}

TEST(NnModules, StartOffsetAndExplicitPositions) {
  SinusoidalEncoding encoding(8);
  const at::Tensor x = at::zeros({3, 4, 8}, at::kDouble);
  EXPECT_LE(max_abs_diff(encoding(x, 100)[1], reference_sinusoidal(100, 4, 8)), 1e-12);
  // (T) shared by the batch
  const at::Tensor shared = at::tensor(std::vector<int64_t>{7, 3, 3, 0});
  EXPECT_LE(max_abs_diff(encoding->forward_at(x, shared)[2][0], reference_sinusoidal(7, 1, 8)[0]), 1e-12);
  // (B, T) per batch row
  const at::Tensor per_row = at::arange(12, at::kLong).reshape({3, 4});
  EXPECT_LE(max_abs_diff(encoding->forward_at(x, per_row)[2], reference_sinusoidal(8, 4, 8)), 1e-12);
  // (T, D) input
  EXPECT_EQ(encoding(at::zeros({4, 8}), 2).sizes(), at::IntArrayRef({4, 8}));
  // no tokens
  EXPECT_EQ(encoding(at::zeros({2, 0, 8})).sizes(), at::IntArrayRef({2, 0, 8}));
}

TEST(NnModules, ConcatAppendsItsOwnDim) {
  SinusoidalEncoding encoding(SinusoidalEncodingOptions(6).mode(InputMode::kConcat));
  for (const DtypeCase& c : kDtypes) {
    SCOPED_TRACE(c.name);
    const at::Tensor x = at::randn({2, 3, 10}).to(c.dtype);
    const at::Tensor out = encoding(x, 5);
    EXPECT_EQ(out.sizes(), at::IntArrayRef({2, 3, 16}));
    EXPECT_EQ(out.scalar_type(), c.dtype);
    EXPECT_TRUE(at::equal(out.narrow(-1, 0, 10), x));  // x passes through untouched
    expect_rounded_once(out[1].narrow(-1, 10, 6), reference_sinusoidal(5, 3, 6));
  }
}

TEST(NnModules, LearnedTableInitAndGradient) {
  torch::manual_seed(7);
  LearnedEncoding a(LearnedEncodingOptions(1000, 64));
  torch::manual_seed(7);
  LearnedEncoding b(LearnedEncodingOptions(1000, 64));
  LearnedEncoding c(LearnedEncodingOptions(1000, 64));
  EXPECT_TRUE(at::equal(a->table(), b->table()));  // torch's generator, seeded by the caller
  EXPECT_FALSE(at::equal(a->table(), c->table()));
  // N(0, 0.02^2) over 64000 draws: the sample std is within 2% of 0.02 (about 7 standard errors).
  EXPECT_NEAR(a->table().std().item<double>(), 0.02, 0.0004);
  EXPECT_NEAR(a->table().mean().item<double>(), 0.0, 0.0004);
  ASSERT_EQ(a->named_parameters().size(), 1u);
  EXPECT_TRUE(a->named_parameters().contains("table"));

  LearnedEncoding encoding(LearnedEncodingOptions(10, 4));
  const at::Tensor x = at::randn({2, 3, 4}, at::kBFloat16);
  const at::Tensor out = encoding(x, 6);
  EXPECT_EQ(out.scalar_type(), at::kBFloat16);
  expect_rounded_once(out, x.to(at::kDouble) + encoding->table().narrow(0, 6, 3).to(at::kDouble));
  out.to(at::kFloat).sum().backward();
  // Rows 6..8 were used once per batch row; the others not at all.
  at::Tensor expected = at::zeros({10, 4});
  expected.narrow(0, 6, 3).fill_(2.0);
  EXPECT_TRUE(at::equal(encoding->table().grad(), expected));
}

TEST(NnModules, LearnableSinusoidalStartsAtTheFixedFrequencies) {
  LearnableSinusoidalEncoding encoding(LearnableSinusoidalEncodingOptions(8).base(100.0));
  const std::vector<long double> omega = reference_frequencies(8, 100.0);
  for (int64_t i = 0; i < 4; ++i) {
    EXPECT_EQ(encoding->omega()[i].item<float>(), static_cast<float>(omega[i]));
  }
  const at::Tensor x = at::zeros({1, 5, 8}, at::kDouble);
  const at::Tensor out = encoding(x, 2);
  // omega is a float32 parameter: compare against the reference at those float32 frequencies.
  std::vector<long double> rounded;
  for (long double w : omega) rounded.push_back(static_cast<float>(w));
  EXPECT_LE(max_abs_diff(out[0], reference_sinusoids({2, 3, 4, 5, 6}, rounded, SinusoidalLayout::kInterleaved)), 1e-12);

  out.sum().backward();
  // d/dw_i sum_p (sin(p w_i) + cos(p w_i)) = sum_p p (cos(p w_i) - sin(p w_i))
  for (int64_t i = 0; i < 4; ++i) {
    double expected = 0;
    for (int p = 2; p <= 6; ++p) {
      expected += p * (std::cos(p * static_cast<double>(rounded[i])) - std::sin(p * static_cast<double>(rounded[i])));
    }
    EXPECT_NEAR(encoding->omega().grad()[i].item<double>(), expected, 1e-5);  // float32 gradient
  }
}

TEST(NnModules, Grid2dMatchesRowAndColumnEncodings) {
  SinusoidalEncoding2d encoding(SinusoidalEncoding2dOptions(3, 4, 8));
  const at::Tensor out = encoding(at::zeros({2, 12, 8}, at::kDouble));
  const at::Tensor rows = reference_sinusoidal(0, 3, 4);
  const at::Tensor cols = reference_sinusoidal(0, 4, 4);
  for (int64_t y = 0; y < 3; ++y) {
    for (int64_t x = 0; x < 4; ++x) {
      EXPECT_LE(max_abs_diff(out[1][y * 4 + x], at::cat({rows[y], cols[x]})), 1e-12);
    }
  }
  // The last 5 cells, e.g. after a class token took the first place elsewhere.
  EXPECT_TRUE(at::equal(encoding(at::zeros({1, 5, 8}, at::kDouble), 7)[0], out[0].narrow(0, 7, 5)));
  EXPECT_TRUE(at::equal(encoding->forward_at(at::zeros({1, 2, 8}, at::kDouble), at::tensor(std::vector<int64_t>{11, 0}))[0][0],
                        out[0][11]));
}

TEST(NnModules, Grid3dMatchesFrameRowAndColumnEncodings) {
  SinusoidalEncoding3d encoding(SinusoidalEncoding3dOptions(2, 2, 3, 12).mode(InputMode::kConcat));
  const at::Tensor out = encoding(at::zeros({12, 5}, at::kDouble));
  EXPECT_EQ(out.sizes(), at::IntArrayRef({12, 17}));
  const at::Tensor t = reference_sinusoidal(0, 2, 4);
  const at::Tensor y = reference_sinusoidal(0, 2, 4);
  const at::Tensor x = reference_sinusoidal(0, 3, 4);
  // cell (t=1, y=0, x=2) is row (1*2 + 0)*3 + 2 = 8
  EXPECT_LE(max_abs_diff(out[8].narrow(0, 5, 12), at::cat({t[1], y[0], x[2]})), 1e-12);
}

TEST(NnModules, AnyEncodingBehindTheCommonHandle) {
  std::vector<InputEncoding> encodings = {SinusoidalEncoding(8), LearnedEncoding(LearnedEncodingOptions(16, 8)),
                                          LearnableSinusoidalEncoding(8),
                                          SinusoidalEncoding2d(SinusoidalEncoding2dOptions(2, 4, 8))};
  for (InputEncoding& encoding : encodings) {
    SCOPED_TRACE(encoding->name());
    EXPECT_EQ(encoding->dim(), 8);
    EXPECT_EQ(encoding(at::zeros({3, 8, 8})).sizes(), at::IntArrayRef({3, 8, 8}));
  }
}

TEST(NnModules, PrettyPrintNamesTheOptions) {
  std::ostringstream s;
  s << *SinusoidalEncoding(SinusoidalEncodingOptions(8).mode(InputMode::kConcat));
  EXPECT_EQ(s.str(),
            "posenc::nn::SinusoidalEncoding(dim=8, base=10000, scale=1, layout=interleaved, precision=exact, mode=concat)");
}

TEST(NnModules, BadOptionsAndInputsRaiseExactMessages) {
  expect_value_error([] { SinusoidalEncoding(7); }, "[sinusoidal] dim must be even, got 7");
  expect_value_error([] { SinusoidalEncoding(SinusoidalEncodingOptions(8).base(0.0)); },
                     "[sinusoidal] base must be finite and > 0, got 0");
  expect_value_error([] { LearnableSinusoidalEncoding(5); }, "[learnable-sinusoidal] dim must be even, got 5");
  expect_value_error([] { LearnedEncoding(LearnedEncodingOptions(0, 4)); },
                     "[LearnedEncoding] max_positions must be at least 1, got 0");
  expect_value_error([] { SinusoidalEncoding2d(SinusoidalEncoding2dOptions(4, 4, 6)); },
                     "[sinusoidal-2d] dim must be divisible by 4 (an even share per axis), got 6");
  expect_value_error([] { SinusoidalEncoding3d(SinusoidalEncoding3dOptions(2, 4, 4, 8)); },
                     "[sinusoidal-3d] dim must be divisible by 6 (an even share per axis), got 8");
  expect_value_error([] { SinusoidalEncoding2d(SinusoidalEncoding2dOptions(0, 4, 8)); },
                     "[sinusoidal-2d] height must be at least 1, got 0");

  SinusoidalEncoding encoding(8);
  expect_value_error([&] { encoding(at::zeros({2, 3, 6})); },
                     "[SinusoidalEncoding] x must have 8 features (the encoding dim) in add mode, got 6");
  expect_value_error([&] { encoding(at::zeros({1, 2, 3, 8})); },
                     "[SinusoidalEncoding] x must have shape (B, T, D) or (T, D), got [1, 2, 3, 8]");
  expect_error<c10::TypeError>([&] { encoding(at::zeros({2, 3, 8}, at::kLong)); },
                               "[SinusoidalEncoding] x must be float32, float64, bfloat16 or float16, got Long");
  expect_value_error([&] { encoding->forward_at(at::zeros({2, 3, 8}), at::arange(4, at::kLong)); },
                     "[SinusoidalEncoding] positions must have shape (T) or (B, T) for x of shape [2, 3, 8], got [4]");
  LearnedEncoding learned(LearnedEncodingOptions(8, 4));
  expect_value_error([&] { learned(at::zeros({1, 3, 4}), 6); },
                     "[learned] position 8 is outside the table of 8 rows (valid 0..7)");
  SinusoidalEncoding2d grid(SinusoidalEncoding2dOptions(4, 4, 8));
  expect_value_error([&] { grid(at::zeros({1, 10, 8}), 8); },
                     "[SinusoidalEncoding2d] cells 8..17 must lie in the grid of 16 cells (0..15)");
  expect_value_error([&] { grid->forward_at(at::zeros({1, 2, 8}), at::tensor(std::vector<int64_t>{3, 16})); },
                     "[SinusoidalEncoding2d] position 16 is outside the grid of 16 cells (valid 0..15)");
}

}  // namespace
}  // namespace posenc::nn::test
