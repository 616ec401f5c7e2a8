// The relative-vector modules (relative_encodings.h) against float64
// references written here from the papers' formulas: the row of every
// (query, key) pair is computed by plain loops, the vectors gathered into a
// dense (Tq, Tk, Dh) tensor (fine at test sizes, never done by the library)
// and contracted with einsum. The references are differentiable through
// torch's own autograd, so they also give the expected gradients of q, k,
// probs and every parameter.
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

#include "posenc/nn/relative_encodings.h"
#include "reference.h"

namespace posenc::nn::test {
namespace {

const auto kF64 = at::TensorOptions().dtype(at::kDouble);

// row[i][j] = clip(j - i', -k, k) + k with i' = i + Tk - Tq (queries on the last keys).
at::Tensor clipped_rows(int64_t q_len, int64_t k_len, int64_t k) {
  at::Tensor rows = at::empty({q_len, k_len}, at::kLong);
  auto a = rows.accessor<int64_t, 2>();
  for (int64_t i = 0; i < q_len; ++i) {
    for (int64_t j = 0; j < k_len; ++j) a[i][j] = std::clamp(j - (i + k_len - q_len), -k, k) + k;
  }
  return rows;
}

// table [R, Dh] -> (Tq, Tk, Dh); [H, R, Dh] -> (H, Tq, Tk, Dh)
at::Tensor gather_rows(const at::Tensor& table, const at::Tensor& rows) {
  const int64_t axis = table.dim() - 2;
  std::vector<int64_t> shape = table.sizes().vec();
  shape[axis] = rows.size(0);
  shape.insert(shape.begin() + axis + 1, rows.size(1));
  return table.index_select(axis, rows.flatten()).view(shape);
}

// sum_d q[b,h,i,d] a[(h,) i, j, d]
at::Tensor dense_logits(const at::Tensor& q, const at::Tensor& a) {
  return a.dim() == 3 ? at::einsum("bhid,ijd->bhij", {q, a}) : at::einsum("bhid,hijd->bhij", {q, a});
}
// sum_j p[b,h,i,j] a[(h,) i, j, d]
at::Tensor dense_values(const at::Tensor& p, const at::Tensor& a) {
  return a.dim() == 3 ? at::einsum("bhij,ijd->bhid", {p, a}) : at::einsum("bhij,hijd->bhid", {p, a});
}

// A float64 leaf copy of a module tensor, for the reference's own autograd.
at::Tensor leaf(const at::Tensor& t) { return t.detach().to(at::kDouble).clone().requires_grad_(true); }

// Dai et al. 2019: R_d with M channels, sin(d w_c) for c < M/2 then cos(d w_c),
// w_c = base^(-2c/M), in long double; (Tq, Tk, M) for d = i' - j.
at::Tensor xl_sinusoids(int64_t q_len, int64_t k_len, int64_t model_dim, double base) {
  at::Tensor r = at::empty({q_len, k_len, model_dim}, kF64);
  auto a = r.accessor<double, 3>();
  const int64_t half = model_dim / 2;
  for (int64_t i = 0; i < q_len; ++i) {
    for (int64_t j = 0; j < k_len; ++j) {
      const long double d = static_cast<long double>(i + k_len - q_len - j);
      for (int64_t c = 0; c < half; ++c) {
        const long double w = std::pow(static_cast<long double>(base), -2.0L * c / model_dim);
        a[i][j][c] = static_cast<double>(std::sin(d * w));
        a[i][j][c + half] = static_cast<double>(std::cos(d * w));
      }
    }
  }
  return r;
}

// u . k_j + (q_i + v) . (W_R R_{i'-j})_h, float64; u, v [H, Dh], w_r [H*Dh, M].
at::Tensor xl_reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& u, const at::Tensor& v,
                        const at::Tensor& w_r, double base) {
  const int64_t heads = u.size(0), head_dim = u.size(1), model_dim = w_r.size(1);
  const at::Tensor r = xl_sinusoids(q.size(2), k.size(2), model_dim, base);
  const at::Tensor a = at::einsum("ijm,hem->hije", {r, w_r.view({heads, head_dim, model_dim})});
  const at::Tensor position = dense_logits(q + v.view({1, heads, 1, head_dim}), a);
  const at::Tensor content = at::einsum("hd,bhjd->bhj", {u, k}).unsqueeze(2);
  return position + content;
}

// Row r of the [2k+1, Dh] NEZHA table from omega (differentiable): interleaved
// sin((r-k) omega_i), cos((r-k) omega_i).
at::Tensor sinusoid_rows(const at::Tensor& omega, int64_t k) {
  const at::Tensor offsets = at::arange(-k, k + 1, kF64);
  const at::Tensor angles = at::outer(offsets, omega);
  return at::stack({at::sin(angles), at::cos(angles)}, -1).reshape({2 * k + 1, -1});
}

void expect_grad_near(const at::Tensor& got, const at::Tensor& expected, double tolerance, const char* what) {
  ASSERT_TRUE(got.defined()) << what << " got no gradient";
  EXPECT_LE(max_abs_diff(got, expected), tolerance) << what;
}

TEST(RelativeModules, ShawDecodingAlignmentTheRowsByHand) {
  // Tq = 2 queries on the last of Tk = 5 keys (positions 3 and 4), k = 1.
  const at::Tensor rows = clipped_rows(2, 5, 1);
  EXPECT_TRUE(at::equal(rows, at::tensor(std::vector<int64_t>{0, 0, 0, 1, 2, 0, 0, 0, 0, 1}).view({2, 5})));
  ShawRelative shaw(ShawRelativeOptions(1, 3));
  shaw->to(at::kDouble);
  const at::Tensor q = at::randn({1, 1, 2, 3}, kF64);
  const at::Tensor logits = shaw->logits(q, at::randn({1, 1, 5, 3}, kF64));
  const at::Tensor t = shaw->key_table();
  // query 0 (position 3): keys 0..2 clip to offset -1, key 3 is offset 0, key 4 offset +1.
  EXPECT_NEAR(logits[0][0][0][0].item<double>(), at::dot(q[0][0][0], t[0]).item<double>(), 1e-14);
  EXPECT_NEAR(logits[0][0][0][3].item<double>(), at::dot(q[0][0][0], t[1]).item<double>(), 1e-14);
  EXPECT_NEAR(logits[0][0][0][4].item<double>(), at::dot(q[0][0][0], t[2]).item<double>(), 1e-14);
  EXPECT_NEAR(logits[0][0][1][4].item<double>(), at::dot(q[0][0][1], t[1]).item<double>(), 1e-14);
}

struct ShawCase {
  int64_t num_heads, max_distance, q_len, k_len;
};

TEST(RelativeModules, ShawMatchesTheReferenceWithGradients) {
  // shared / per head, Tq < Tk (decoding), Tq = Tk, k beyond the lengths, k = 0.
  const std::vector<ShawCase> cases = {{0, 2, 3, 7}, {3, 2, 3, 7}, {3, 3, 6, 6}, {0, 9, 4, 5}, {2, 0, 4, 4}};
  for (const ShawCase& c : cases) {
    SCOPED_TRACE("num_heads=" + std::to_string(c.num_heads) + " k=" + std::to_string(c.max_distance) +
                 " Tq=" + std::to_string(c.q_len) + " Tk=" + std::to_string(c.k_len));
    ShawRelative shaw(ShawRelativeOptions(c.max_distance, 4).num_heads(c.num_heads));
    shaw->to(at::kDouble);
    const int64_t heads = c.num_heads == 0 ? 3 : c.num_heads;
    const at::Tensor q = at::randn({2, heads, c.q_len, 4}, kF64).requires_grad_(true);
    const at::Tensor k = at::randn({2, heads, c.k_len, 4}, kF64);
    const at::Tensor p = at::softmax(at::randn({2, heads, c.q_len, c.k_len}, kF64), -1).requires_grad_(true);
    const at::Tensor logits = shaw->logits(q, k);
    const at::Tensor values = shaw->values(p);
    ASSERT_EQ(logits.sizes(), at::IntArrayRef({2, heads, c.q_len, c.k_len}));
    ASSERT_EQ(values.sizes(), at::IntArrayRef({2, heads, c.q_len, 4}));

    const at::Tensor rows = clipped_rows(c.q_len, c.k_len, c.max_distance);
    const at::Tensor q_ref = leaf(q), p_ref = leaf(p);
    const at::Tensor key_ref = leaf(shaw->key_table()), value_ref = leaf(shaw->value_table());
    const at::Tensor logits_ref = dense_logits(q_ref, gather_rows(key_ref, rows));
    const at::Tensor values_ref = dense_values(p_ref, gather_rows(value_ref, rows));
    // float64 both ways: only the summation order differs (a few ulps of sums of size ~4).
    EXPECT_LE(max_abs_diff(logits, logits_ref), 1e-13);
    EXPECT_LE(max_abs_diff(values, values_ref), 1e-13);

    const at::Tensor g = at::randn_like(logits), h = at::randn_like(values);
    ((logits * g).sum() + (values * h).sum()).backward();
    ((logits_ref * g).sum() + (values_ref * h).sum()).backward();
    expect_grad_near(q.grad(), q_ref.grad(), 1e-12, "q");
    expect_grad_near(p.grad(), p_ref.grad(), 1e-12, "probs");
    expect_grad_near(shaw->key_table().grad(), key_ref.grad(), 1e-12, "key_table");
    expect_grad_near(shaw->value_table().grad(), value_ref.grad(), 1e-12, "value_table");
  }
}

TEST(RelativeModules, ShawFloat32NonContiguousAndHalfInputs) {
  ShawRelative shaw(ShawRelativeOptions(3, 8).num_heads(2));
  // (B, Tq, H, Dh) viewed as (B, H, Tq, Dh): not contiguous, last dim stride 1.
  const at::Tensor q = at::randn({2, 5, 2, 8}).transpose(1, 2);
  const at::Tensor k = at::randn({2, 2, 9, 8});
  ASSERT_FALSE(q.is_contiguous());
  const at::Tensor logits_ref = dense_logits(q.to(at::kDouble), gather_rows(shaw->key_table().to(at::kDouble),
                                                                             clipped_rows(5, 9, 3)));
  const at::Tensor logits = shaw->logits(q, k);
  EXPECT_EQ(logits.scalar_type(), at::kFloat);
  // float32 products of 8 terms of size ~0.02*3: well under 1e-6.
  EXPECT_LE(max_abs_diff(logits, logits_ref), 1e-6);
  // bfloat16 / float16 inputs: the result in that dtype, rounded once from the
  // float32 value. Table values ~1 so that rounding the table too would show.
  ShawRelative wide(ShawRelativeOptions(3, 8).num_heads(2).init_std(1.0));
  for (at::ScalarType dtype : {at::kBFloat16, at::kHalf}) {
    SCOPED_TRACE(c10::toString(dtype));
    const at::Tensor q16 = at::randn({4, 2, 40, 8}).to(dtype), k16 = at::randn({4, 2, 48, 8}).to(dtype);
    const at::Tensor out = wide->logits(q16, k16);
    EXPECT_EQ(out.scalar_type(), dtype);
    const at::Tensor exact = dense_logits(q16.to(at::kDouble), gather_rows(wide->key_table().to(at::kDouble),
                                                                           clipped_rows(40, 48, 3)));
    // float32 sums of 8 products of size < 16: 8 x 1e-6 before the one rounding.
    expect_rounded_once(out, exact, 8e-6);
  }
}

TEST(RelativeModules, EmptyInputs) {
  ShawRelative shaw(ShawRelativeOptions(2, 4));
  EXPECT_EQ(shaw->logits(at::zeros({1, 2, 0, 4}), at::zeros({1, 2, 3, 4})).sizes(), at::IntArrayRef({1, 2, 0, 3}));
  EXPECT_EQ(shaw->logits(at::zeros({1, 2, 0, 4}), at::zeros({1, 2, 0, 4})).sizes(), at::IntArrayRef({1, 2, 0, 0}));
  EXPECT_EQ(shaw->values(at::zeros({1, 2, 3, 0})).sizes(), at::IntArrayRef({1, 2, 3, 4}));
  TransformerXLRelative xl(TransformerXLOptions(2, 4));
  EXPECT_EQ(xl->logits(at::zeros({1, 2, 0, 4}), at::zeros({1, 2, 0, 4})).sizes(), at::IntArrayRef({1, 2, 0, 0}));
  EXPECT_EQ(xl->logits(at::zeros({0, 2, 3, 4}), at::zeros({0, 2, 3, 4})).sizes(), at::IntArrayRef({0, 2, 3, 3}));
}

TEST(RelativeModules, SinusoidalFixedIsNezhasTable) {
  SinusoidalRelative nezha(SinusoidalRelativeOptions(3, 6).base(100.0).values(true));
  EXPECT_EQ(nezha->parameters().size(), 0u);
  ASSERT_EQ(nezha->named_buffers().size(), 1u);
  ASSERT_TRUE(nezha->named_buffers().contains("omega"));
  // omega is base^(-2i/Dh), rounded to float32 once.
  const std::vector<long double> omega = reference_frequencies(6, 100.0);
  std::vector<long double> rounded;
  for (size_t i = 0; i < omega.size(); ++i) {
    EXPECT_EQ(nezha->omega()[i].item<float>(), static_cast<float>(omega[i]));
    rounded.push_back(static_cast<float>(omega[i]));
  }
  // Row r: sin / cos of offset r - k, interleaved (reference.h, long double).
  const at::Tensor table =
      reference_sinusoids({-3, -2, -1, 0, 1, 2, 3}, rounded, kernels::SinusoidalLayout::kInterleaved);
  // float64 table from the float32 omega: within a few float64 ulps of sin(d w) for |d w| <= 3.
  EXPECT_LE(max_abs_diff(nezha->table(at::kDouble), table), 1e-15);
  // float32: the kernel's exact argument reduction, 5e-7 (sinusoidal.h).
  EXPECT_LE(max_abs_diff(nezha->table(at::kFloat), table), 5e-7);

  const at::Tensor q = at::randn({2, 4, 3, 6}, kF64), k = at::randn({2, 4, 8, 6}, kF64);
  const at::Tensor p = at::softmax(at::randn({2, 4, 3, 8}, kF64), -1);
  const at::Tensor a = gather_rows(table, clipped_rows(3, 8, 3));
  EXPECT_LE(max_abs_diff(nezha->logits(q, k), dense_logits(q, a)), 1e-13);  // float64 sums of 6 terms
  EXPECT_TRUE(nezha->has_values());
  EXPECT_LE(max_abs_diff(nezha->values(p), dense_values(p, a)), 1e-13);  // the same table for the values
  // Any head count: the table is shared.
  EXPECT_EQ(nezha->logits(at::zeros({1, 7, 2, 6}), at::zeros({1, 7, 2, 6})).sizes(), at::IntArrayRef({1, 7, 2, 2}));
}

TEST(RelativeModules, SinusoidalLearnableFrequenciesGetTheGradient) {
  SinusoidalRelative fixed(SinusoidalRelativeOptions(4, 8));
  SinusoidalRelative learnable(SinusoidalRelativeOptions(4, 8).learnable(true));
  ASSERT_EQ(learnable->named_parameters().size(), 1u);
  ASSERT_TRUE(learnable->named_parameters().contains("omega"));
  EXPECT_EQ(learnable->named_buffers().size(), 0u);
  EXPECT_FALSE(learnable->has_values());
  // Initialised to the fixed frequencies: the same logits.
  const at::Tensor q = at::randn({2, 2, 5, 8}), k = at::randn({2, 2, 6, 8});
  EXPECT_TRUE(at::equal(learnable->logits(q, k), fixed->logits(q, k)));

  learnable->to(at::kDouble);
  const at::Tensor q64 = q.to(at::kDouble), k64 = k.to(at::kDouble);
  const at::Tensor logits = learnable->logits(q64, k64);
  const at::Tensor omega_ref = leaf(learnable->omega());
  const at::Tensor logits_ref = dense_logits(q64, gather_rows(sinusoid_rows(omega_ref, 4), clipped_rows(5, 6, 4)));
  EXPECT_LE(max_abs_diff(logits, logits_ref), 1e-13);  // float64 both ways
  const at::Tensor g = at::randn_like(logits);
  (logits * g).sum().backward();
  (logits_ref * g).sum().backward();
  // d/dw sum g q.(sin(d w), cos(d w)): sums of ~100 terms of size ~4 in float64.
  expect_grad_near(learnable->omega().grad(), omega_ref.grad(), 1e-11, "omega");
  EXPECT_GT(learnable->omega().grad().abs().max().item<double>(), 0.1);
}

TEST(RelativeModules, TransformerXLIsDaiEtAlsFormula) {
  // Tq = Tk and Tq < Tk (a memory of earlier keys); model_dim = H*Dh and a smaller one.
  struct Case {
    int64_t q_len, k_len, model_dim;
  };
  for (const Case& c : std::vector<Case>{{5, 5, 0}, {3, 7, 0}, {4, 6, 6}}) {
    SCOPED_TRACE("Tq=" + std::to_string(c.q_len) + " Tk=" + std::to_string(c.k_len));
    TransformerXLRelative xl(TransformerXLOptions(2, 4).model_dim(c.model_dim).base(50.0).init_std(0.5));
    EXPECT_EQ(xl->model_dim(), c.model_dim == 0 ? 8 : c.model_dim);
    xl->to(at::kDouble);
    const at::Tensor q = at::randn({2, 2, c.q_len, 4}, kF64).requires_grad_(true);
    const at::Tensor k = at::randn({2, 2, c.k_len, 4}, kF64).requires_grad_(true);
    const at::Tensor logits = xl->logits(q, k);
    const at::Tensor q_ref = leaf(q), k_ref = leaf(k);
    const at::Tensor u = leaf(xl->u()), v = leaf(xl->v()), w_r = leaf(xl->w_r());
    const at::Tensor logits_ref = xl_reference(q_ref, k_ref, u, v, w_r, 50.0);
    // float64: sums of 8 x 4 products of size ~1 (init_std 0.5).
    EXPECT_LE(max_abs_diff(logits, logits_ref), 1e-12);

    const at::Tensor g = at::randn_like(logits);
    (logits * g).sum().backward();
    (logits_ref * g).sum().backward();
    expect_grad_near(q.grad(), q_ref.grad(), 1e-11, "q");
    expect_grad_near(k.grad(), k_ref.grad(), 1e-11, "k");
    expect_grad_near(xl->u().grad(), u.grad(), 1e-11, "u");
    expect_grad_near(xl->v().grad(), v.grad(), 1e-11, "v");
    expect_grad_near(xl->w_r().grad(), w_r.grad(), 1e-11, "w_r");
  }
  // float32 parameters and q: within float32 accuracy of the same formula
  // (R within 5e-7, then sums of 32 products of size ~0.25).
  TransformerXLRelative xl(TransformerXLOptions(2, 4).init_std(0.5));
  const at::Tensor q = at::randn({1, 2, 3, 4}), k = at::randn({1, 2, 6, 4});
  const at::Tensor expected = xl_reference(q.to(at::kDouble), k.to(at::kDouble), xl->u().to(at::kDouble),
                                           xl->v().to(at::kDouble), xl->w_r().to(at::kDouble), 10000.0);
  EXPECT_LE(max_abs_diff(xl->logits(q, k), expected), 2e-5);
}

TEST(RelativeModules, Relative2dOnANonSquareGrid) {
  for (int64_t num_heads : {0, 3}) {
    SCOPED_TRACE("num_heads=" + std::to_string(num_heads));
    const int64_t height = 3, width = 5, cells = 15;
    Relative2d botnet(Relative2dOptions(height, width, 4).num_heads(num_heads).init_std(1.0));
    botnet->to(at::kDouble);
    const std::vector<int64_t> per_head = num_heads == 0 ? std::vector<int64_t>{} : std::vector<int64_t>{3};
    EXPECT_EQ(botnet->table_h().sizes().back(), 4);
    EXPECT_EQ(botnet->table_h().size(-2), 2 * height - 1);
    EXPECT_EQ(botnet->table_w().size(-2), 2 * width - 1);
    EXPECT_EQ(botnet->table_h().dim(), num_heads == 0 ? 2 : 3);

    // rows_h[(y,x),(y',x')] = y'-y+H-1, rows_w = x'-x+W-1
    at::Tensor rows_h = at::empty({cells, cells}, at::kLong), rows_w = at::empty({cells, cells}, at::kLong);
    auto rh = rows_h.accessor<int64_t, 2>();
    auto rw = rows_w.accessor<int64_t, 2>();
    for (int64_t y = 0; y < height; ++y) {
      for (int64_t x = 0; x < width; ++x) {
        for (int64_t y2 = 0; y2 < height; ++y2) {
          for (int64_t x2 = 0; x2 < width; ++x2) {
            rh[y * width + x][y2 * width + x2] = y2 - y + height - 1;
            rw[y * width + x][y2 * width + x2] = x2 - x + width - 1;
          }
        }
      }
    }
    const at::Tensor q = at::randn({2, 3, cells, 4}, kF64).requires_grad_(true);
    const at::Tensor logits = botnet->logits(q, at::randn({2, 3, cells, 4}, kF64));
    const at::Tensor q_ref = leaf(q), th = leaf(botnet->table_h()), tw = leaf(botnet->table_w());
    const at::Tensor logits_ref = dense_logits(q_ref, gather_rows(th, rows_h) + gather_rows(tw, rows_w));
    EXPECT_LE(max_abs_diff(logits, logits_ref), 1e-13);  // float64 sums of 8 terms
    const at::Tensor g = at::randn_like(logits);
    (logits * g).sum().backward();
    (logits_ref * g).sum().backward();
    expect_grad_near(q.grad(), q_ref.grad(), 1e-12, "q");
    expect_grad_near(botnet->table_h().grad(), th.grad(), 1e-12, "table_h");
    expect_grad_near(botnet->table_w().grad(), tw.grad(), 1e-12, "table_w");
  }
}

TEST(RelativeModules, ParametersBuffersAndInit) {
  auto names = [](const auto& dict) {
    std::vector<std::string> out;
    for (const auto& item : dict) out.push_back(item.key());
    std::sort(out.begin(), out.end());
    return out;
  };
  using Names = std::vector<std::string>;
  EXPECT_EQ(names(ShawRelative(ShawRelativeOptions(2, 4))->named_parameters()), (Names{"key_table", "value_table"}));
  EXPECT_EQ(names(ShawRelative(ShawRelativeOptions(2, 4).values(false))->named_parameters()), Names{"key_table"});
  EXPECT_EQ(names(TransformerXLRelative(TransformerXLOptions(2, 4))->named_parameters()), (Names{"u", "v", "w_r"}));
  EXPECT_EQ(names(Relative2d(Relative2dOptions(2, 3, 4))->named_parameters()), (Names{"table_h", "table_w"}));
  EXPECT_EQ(names(SinusoidalRelative(SinusoidalRelativeOptions(2, 4))->named_buffers()), Names{"omega"});
  for (const auto& m : std::vector<RelativeEncoding>{ShawRelative(ShawRelativeOptions(2, 4)),
                                                     TransformerXLRelative(TransformerXLOptions(2, 4)),
                                                     Relative2d(Relative2dOptions(2, 3, 4))}) {
    EXPECT_EQ(m->named_buffers().size(), 0u) << m->name();
  }

  ShawRelative shared(ShawRelativeOptions(5, 16));
  EXPECT_EQ(shared->key_table().sizes(), at::IntArrayRef({11, 16}));
  EXPECT_EQ(ShawRelative(ShawRelativeOptions(5, 16).num_heads(4))->value_table().sizes(),
            at::IntArrayRef({4, 11, 16}));
  TransformerXLRelative xl(TransformerXLOptions(4, 8).model_dim(10));
  EXPECT_EQ(xl->w_r().sizes(), at::IntArrayRef({32, 10}));
  EXPECT_EQ(xl->u().sizes(), at::IntArrayRef({4, 8}));

  // N(0, init_std^2) from torch's generator, seeded by the caller.
  torch::manual_seed(3);
  ShawRelative a(ShawRelativeOptions(200, 64).init_std(0.1));
  torch::manual_seed(3);
  ShawRelative b(ShawRelativeOptions(200, 64).init_std(0.1));
  EXPECT_TRUE(at::equal(a->key_table(), b->key_table()));
  EXPECT_FALSE(at::equal(a->key_table(), a->value_table()));
  // 25728 draws: the sample std is within 3% of 0.1 (about 7 standard errors).
  EXPECT_NEAR(a->key_table().std().item<double>(), 0.1, 0.003);
  EXPECT_NEAR(a->key_table().mean().item<double>(), 0.0, 0.003);

  // to(kDouble) moves parameters and buffers; the handles stay valid.
  SinusoidalRelative nezha(SinusoidalRelativeOptions(2, 4));
  nezha->to(at::kDouble);
  EXPECT_EQ(nezha->omega().scalar_type(), at::kDouble);
  EXPECT_EQ(nezha->logits(at::zeros({1, 1, 2, 4}), at::zeros({1, 1, 2, 4})).scalar_type(), at::kFloat);
  shared->to(at::kDouble);
  EXPECT_EQ(shared->key_table().scalar_type(), at::kDouble);
  EXPECT_EQ(shared->logits(at::zeros({1, 1, 2, 16}, kF64), at::zeros({1, 1, 2, 16}, kF64)).scalar_type(),
            at::kDouble);
}

TEST(RelativeModules, AnyFamilyBehindTheCommonHandle) {
  std::vector<RelativeEncoding> encodings = {
      ShawRelative(ShawRelativeOptions(2, 8).num_heads(4)), SinusoidalRelative(SinusoidalRelativeOptions(2, 8)),
      TransformerXLRelative(TransformerXLOptions(4, 8)), Relative2d(Relative2dOptions(2, 3, 8))};
  const std::vector<bool> values = {true, false, false, false};
  const std::vector<int64_t> heads = {4, 0, 4, 0};
  for (size_t n = 0; n < encodings.size(); ++n) {
    RelativeEncoding& e = encodings[n];
    SCOPED_TRACE(e->name());
    EXPECT_EQ(e->head_dim(), 8);
    EXPECT_EQ(e->num_heads(), heads[n]);
    EXPECT_EQ(e->has_values(), values[n]);
    const at::Tensor q = at::randn({2, 4, 6, 8}, at::kDouble);
    const at::Tensor logits = e->logits(q, at::randn({2, 4, 6, 8}, at::kDouble));
    EXPECT_EQ(logits.sizes(), at::IntArrayRef({2, 4, 6, 6}));
    EXPECT_EQ(logits.scalar_type(), at::kDouble);
    if (e->has_values()) {
      EXPECT_EQ(e->values(at::softmax(logits, -1)).sizes(), at::IntArrayRef({2, 4, 6, 8}));
    }
    // A loss through the handle reaches every parameter.
    e->zero_grad();
    const at::Tensor q32 = q.to(at::kFloat).requires_grad_(true);
    e->logits(q32, q.to(at::kFloat)).square().sum().backward();
    EXPECT_TRUE(q32.grad().defined());
    for (const auto& p : e->named_parameters()) {
      if (p.key() == "value_table") continue;  // reached through values() only
      ASSERT_TRUE(p.value().grad().defined()) << p.key();
      EXPECT_GT(p.value().grad().abs().max().item<double>(), 0.0) << p.key();
    }
  }
}

TEST(RelativeModules, PrettyPrint) {
  std::ostringstream s;
  s << *ShawRelative(ShawRelativeOptions(4, 64).num_heads(8));
  EXPECT_EQ(s.str(), "posenc::nn::ShawRelative(max_distance=4, head_dim=64, num_heads=8, values=true, init_std=0.02)");
}

TEST(RelativeModules, BadOptionsRaiseExactMessages) {
  expect_value_error([] { ShawRelative(ShawRelativeOptions(-1, 4)); },
                     "[ShawRelative] max_distance must be >= 0, got -1");
  expect_value_error([] { ShawRelative(ShawRelativeOptions(2, 0)); }, "[ShawRelative] head_dim must be >= 1, got 0");
  expect_value_error([] { ShawRelative(ShawRelativeOptions(2, 4).num_heads(-2)); },
                     "[ShawRelative] num_heads must be >= 0 (0: one table shared by the heads), got -2");
  expect_value_error([] { ShawRelative(ShawRelativeOptions(2, 4).init_std(-1.0)); },
                     "[ShawRelative] init_std must be finite and >= 0, got -1");
  expect_value_error([] { ShawRelative(ShawRelativeOptions(int64_t{1} << 62, 64).num_heads(8)); },
                     "[ShawRelative] a table (tables x (2*max_distance+1) x head_dim) must have at most 2147483648 "
                     "values, got 8 x 9223372036854775809 x 64");
  expect_value_error([] { SinusoidalRelative(SinusoidalRelativeOptions(2, 7)); },
                     "[SinusoidalRelative] head_dim must be even, got 7");
  expect_value_error([] { SinusoidalRelative(SinusoidalRelativeOptions(-3, 8)); },
                     "[SinusoidalRelative] max_distance must be >= 0, got -3");
  expect_value_error([] { SinusoidalRelative(SinusoidalRelativeOptions(2, 8).base(0.0)); },
                     "[SinusoidalRelative] base must be finite and > 0, got 0");
  expect_value_error([] { TransformerXLRelative(TransformerXLOptions(0, 8)); },
                     "[TransformerXLRelative] num_heads must be >= 1, got 0");
  expect_value_error([] { TransformerXLRelative(TransformerXLOptions(2, 8).model_dim(7)); },
                     "[TransformerXLRelative] model_dim must be even (sines then cosines), got 7");
  expect_value_error([] { TransformerXLRelative(TransformerXLOptions(2, 8).model_dim(-2)); },
                     "[TransformerXLRelative] model_dim must be >= 0 (0: num_heads*head_dim), got -2");
  expect_value_error([] { TransformerXLRelative(TransformerXLOptions(1, 3)); },
                     "[TransformerXLRelative] model_dim must be even (sines then cosines), got 3");
  expect_value_error([] { TransformerXLRelative(TransformerXLOptions(2, 8).init_std(NAN)); },
                     "[TransformerXLRelative] init_std must be finite and >= 0, got nan");
  expect_value_error([] { Relative2d(Relative2dOptions(0, 3, 4)); }, "[Relative2d] height must be >= 1, got 0");
  expect_value_error([] { Relative2d(Relative2dOptions(2, -1, 4)); }, "[Relative2d] width must be >= 1, got -1");
}

TEST(RelativeModules, BadTensorsRaiseExactMessages) {
  ShawRelative shaw(ShawRelativeOptions(2, 8).num_heads(4).values(false));
  const at::Tensor q = at::zeros({1, 4, 3, 8});
  expect_value_error([&] { shaw->logits(at::zeros({4, 3, 8}), q); },
                     "[ShawRelative] q must be 4-D (B, H, Tq, Dh), got 3-D");
  expect_value_error([&] { shaw->logits(q, at::zeros({1, 1, 4, 3, 8})); },
                     "[ShawRelative] k must be 4-D (B, H, Tk, Dh), got 5-D");
  expect_value_error([&] { shaw->logits(at::zeros({1, 4, 3, 6}), q); },
                     "[ShawRelative] q must have head_dim = 8 in its last dimension, got 6");
  expect_value_error([&] { shaw->logits(at::zeros({1, 3, 3, 8}), at::zeros({1, 3, 3, 8})); },
                     "[ShawRelative] q must have num_heads = 4 heads, got 3");
  expect_value_error([&] { shaw->logits(q, at::zeros({2, 4, 5, 8})); },
                     "[ShawRelative] k must have q's (B, H, Dh) = (1, 4, 8), got (2, 4, 8)");
  expect_error<c10::TypeError>([&] { shaw->logits(q, q.to(at::kDouble)); },
                               "[ShawRelative] k must have q's dtype (float32), got float64");
  expect_error<c10::TypeError>([&] { shaw->logits(q.to(at::kInt), q.to(at::kInt)); },
                               "[ShawRelative] q must be float32, float64, bfloat16 or float16, got Int");
  EXPECT_FALSE(shaw->has_values());
  expect_error<c10::Error>([&] { shaw->values(at::zeros({1, 4, 3, 3})); }, "[ShawRelative] has no value vectors");
  expect_error<c10::Error>([] { TransformerXLRelative(TransformerXLOptions(2, 4))->values(at::zeros({1, 2, 3, 3})); },
                           "[TransformerXLRelative] has no value vectors");

  ShawRelative with_values(ShawRelativeOptions(2, 8).num_heads(4));
  expect_value_error([&] { with_values->values(at::zeros({4, 3, 3})); },
                     "[ShawRelative] probs must be 4-D (B, H, Tq, Tk), got 3-D");
  expect_value_error([&] { with_values->values(at::zeros({1, 2, 3, 3})); },
                     "[ShawRelative] probs must have num_heads = 4 heads, got 2");
  expect_error<c10::TypeError>([&] { with_values->values(at::zeros({1, 4, 3, 3}, at::kLong)); },
                               "[ShawRelative] probs must be float32, float64, bfloat16 or float16, got Long");

  Relative2d botnet(Relative2dOptions(4, 5, 8));
  expect_value_error([&] { botnet->logits(at::zeros({1, 2, 21, 8}), at::zeros({1, 2, 20, 8})); },
                     "[Relative2d] q and k must both have height*width = 20 positions, got 21 and 20");
}

}  // namespace
}  // namespace posenc::nn::test
