// linear_cross_entropy: loss and gradients against the formulas written as
// plain float64 loops, central differences, libtorch's linear + cross_entropy
// in float32, ignored rows, both reductions, the grad-mode rules and the exact
// refusals.
#include "posenc/nn/linear_cross_entropy.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>
#include <torch/autograd.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace posenc::nn {
namespace {

const auto kF64 = at::TensorOptions().dtype(at::kDouble);

struct Case {
  at::Tensor hidden, weight, bias, targets;
};

Case make_case(int64_t n, int64_t d, int64_t v, at::ScalarType dtype, uint64_t seed) {
  at::manual_seed(seed);
  const auto options = at::TensorOptions().dtype(dtype);
  Case c;
  c.hidden = at::randn({n, d}, options).requires_grad_(true);
  c.weight = (at::randn({v, d}, options) * 0.5).requires_grad_(true);
  c.bias = at::randn({v}, options).requires_grad_(true);
  c.targets = at::randint(0, v, {n}, at::kLong);
  return c;
}

// The cross-entropy over the rows whose target is not `ignore`, mean or sum,
// and its gradients, each sum a loop in double.
struct Plain {
  double loss = 0;
  std::vector<double> grad_hidden, grad_weight, grad_bias;
};

Plain plain(const Case& c, int64_t ignore = -100, bool sum_reduction = false) {
  const int64_t n = c.hidden.size(0), d = c.hidden.size(1), v = c.weight.size(0);
  const auto h = c.hidden.accessor<double, 2>();
  const auto w = c.weight.accessor<double, 2>();
  const auto b = c.bias.accessor<double, 1>();
  const auto t = c.targets.accessor<int64_t, 1>();
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) count += t[i] != ignore;
  const double divisor = sum_reduction ? 1.0 : static_cast<double>(count);
  Plain p;
  p.grad_hidden.assign(n * d, 0.0);
  p.grad_weight.assign(v * d, 0.0);
  p.grad_bias.assign(v, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    if (t[i] == ignore) continue;
    std::vector<double> z(v);
    double max = -INFINITY;
    for (int64_t j = 0; j < v; ++j) {
      z[j] = b[j];
      for (int64_t k = 0; k < d; ++k) z[j] += h[i][k] * w[j][k];
      max = std::max(max, z[j]);
    }
    double sum = 0;
    for (int64_t j = 0; j < v; ++j) sum += std::exp(z[j] - max);
    p.loss += (max + std::log(sum) - z[t[i]]) / divisor;
    for (int64_t j = 0; j < v; ++j) {
      const double dz = (std::exp(z[j] - max) / sum - (j == t[i] ? 1.0 : 0.0)) / divisor;
      p.grad_bias[j] += dz;
      for (int64_t k = 0; k < d; ++k) {
        p.grad_hidden[i * d + k] += dz * w[j][k];
        p.grad_weight[j * d + k] += dz * h[i][k];
      }
    }
  }
  return p;
}

void expect_close(const at::Tensor& got, const std::vector<double>& want, double tol, const char* what) {
  const at::Tensor flat = got.reshape({-1}).contiguous();
  ASSERT_EQ(flat.numel(), static_cast<int64_t>(want.size())) << what;
  for (int64_t i = 0; i < flat.numel(); ++i) EXPECT_NEAR(flat[i].item<double>(), want[i], tol) << what << " " << i;
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  }
  return "no error";
}

TEST(LinearCrossEntropy, LossAndGradientsEqualThePlainFormulas) {
  for (const int64_t chunk : {0, 1, 3, 7, 100}) {  // 3: a ragged last chunk of 1 row
    const Case c = make_case(7, 5, 11, at::kDouble, 3);
    const Plain want = plain(c);
    const LinearCrossEntropy got = linear_cross_entropy(c.hidden, c.weight, c.bias, c.targets, {.chunk_rows = chunk});
    // 1e-14: a handful of roundings on terms of order 1.
    EXPECT_NEAR(got.loss.item<double>(), want.loss, 1e-14) << chunk;
    got.loss.backward();
    expect_close(c.hidden.grad(), want.grad_hidden, 1e-14, "hidden");
    expect_close(c.weight.grad(), want.grad_weight, 1e-14, "weight");
    expect_close(c.bias.grad(), want.grad_bias, 1e-14, "bias");
  }
}

TEST(LinearCrossEntropy, GradientsMatchCentralDifferences) {
  const Case c = make_case(6, 4, 9, at::kDouble, 5);
  const auto loss_of = [&] {
    at::NoGradGuard no_grad;
    return linear_cross_entropy(c.hidden, c.weight, c.bias, c.targets, {.chunk_rows = 4}).loss.item<double>();
  };
  // An upstream gradient of 2.5 scales every gradient.
  (linear_cross_entropy(c.hidden, c.weight, c.bias, c.targets, {.chunk_rows = 4}).loss * 2.5).backward();
  for (const at::Tensor* p : {&c.hidden, &c.weight, &c.bias}) {
    const at::Tensor flat = p->detach().view({-1});  // shares storage: perturbs the parameter itself
    const at::Tensor grad = p->grad().reshape({-1});
    for (int64_t i = 0; i < flat.numel(); ++i) {
      const double x = flat[i].item<double>(), eps = 1e-6;
      flat[i] = x + eps;
      const double up = loss_of();
      flat[i] = x - eps;
      const double down = loss_of();
      flat[i] = x;
      // 1e-8: central differences' O(eps^2) error and cancellation at eps = 1e-6.
      EXPECT_NEAR(grad[i].item<double>(), 2.5 * (up - down) / (2 * eps), 1e-8) << i;
    }
  }
}

TEST(LinearCrossEntropy, Float32EqualsLinearThenCrossEntropy) {
  const Case c = make_case(300, 64, 1000, at::kFloat, 7);
  const Case ref{c.hidden.detach().clone().requires_grad_(true), c.weight.detach().clone().requires_grad_(true),
                 c.bias.detach().clone().requires_grad_(true), c.targets};
  const at::Tensor logits = at::linear(ref.hidden, ref.weight, ref.bias);
  const at::Tensor loss = at::cross_entropy_loss(logits, ref.targets);
  loss.backward();
  for (const int64_t chunk : {0, 50}) {
    for (const at::Tensor* p : {&c.hidden, &c.weight, &c.bias}) p->mutable_grad() = at::Tensor();
    const LinearCrossEntropy got = linear_cross_entropy(c.hidden, c.weight, c.bias, c.targets, {.chunk_rows = chunk});
    EXPECT_EQ(got.correct, logits.argmax(1).eq(c.targets).sum().item<int64_t>());
    // 1e-6: float32 sums over 1000 logits in another order.
    EXPECT_NEAR(got.loss.item<double>(), loss.item<double>(), 1e-6 * loss.item<double>());
    got.loss.backward();
    for (const auto& [mine, theirs] :
         {std::pair{c.hidden, ref.hidden}, std::pair{c.weight, ref.weight}, std::pair{c.bias, ref.bias}}) {
      const double scale = theirs.grad().abs().max().item<double>();
      EXPECT_LE((mine.grad() - theirs.grad()).abs().max().item<double>(), 1e-5 * scale) << chunk;
    }
  }
}

TEST(LinearCrossEntropy, GradientsOnlyWhereAskedFor) {
  Case c = make_case(5, 3, 7, at::kDouble, 9);
  {
    at::NoGradGuard no_grad;
    const LinearCrossEntropy r = linear_cross_entropy(c.hidden, c.weight, c.bias, c.targets);
    EXPECT_FALSE(r.loss.requires_grad());
    EXPECT_NEAR(r.loss.item<double>(), plain(c).loss, 1e-14);
  }
  c.hidden.requires_grad_(false);
  const LinearCrossEntropy r = linear_cross_entropy(c.hidden, c.weight, at::Tensor(), c.targets);
  r.loss.backward();
  EXPECT_FALSE(c.hidden.grad().defined());
  EXPECT_TRUE(c.weight.grad().defined());
  EXPECT_FALSE(c.bias.grad().defined());
  // Without a bias: the plain formula with b = 0.
  Case zero = c;
  zero.bias = at::zeros({7}, kF64);
  EXPECT_NEAR(r.loss.item<double>(), plain(zero).loss, 1e-14);
  expect_close(c.weight.grad(), plain(zero).grad_weight, 1e-14, "weight");
}

TEST(LinearCrossEntropy, IgnoredRowsAndTheSumReduction) {
  for (const bool sum_reduction : {false, true}) {
    for (const int64_t chunk : {0, 2}) {
      Case c = make_case(7, 5, 11, at::kDouble, 13);
      c.targets.index_put_({at::tensor({1, 4, 5}, at::kLong)}, -1);  // ignore_index -1; 4 rows count
      const Plain want = plain(c, -1, sum_reduction);
      const LinearCrossEntropy got = linear_cross_entropy(
          c.hidden, c.weight, c.bias, c.targets,
          {.ignore_index = -1, .reduction = sum_reduction ? LossReduction::kSum : LossReduction::kMean,
           .chunk_rows = chunk});
      EXPECT_NEAR(got.loss.item<double>(), want.loss, 1e-13) << sum_reduction << " " << chunk;
      got.loss.backward();
      // Ignored rows get exactly 0.
      EXPECT_EQ(c.hidden.grad().index_select(0, at::tensor({1, 4, 5}, at::kLong)).abs().max().item<double>(), 0.0);
      expect_close(c.hidden.grad(), want.grad_hidden, 1e-13, "hidden");
      expect_close(c.weight.grad(), want.grad_weight, 1e-13, "weight");
      expect_close(c.bias.grad(), want.grad_bias, 1e-13, "bias");
    }
  }
}

TEST(LinearCrossEntropy, NoCountedRowIsNanForTheMeanAndZeroForTheSum) {
  // torch's cross_entropy: the mean over no rows is NaN, their sum 0, and every gradient 0.
  Case c = make_case(3, 4, 5, at::kDouble, 17);
  c.targets.fill_(-100);
  const LinearCrossEntropy mean = linear_cross_entropy(c.hidden, c.weight, c.bias, c.targets);
  EXPECT_TRUE(std::isnan(mean.loss.item<double>()));
  EXPECT_EQ(mean.correct, 0);
  mean.loss.backward();
  EXPECT_EQ(c.hidden.grad().abs().max().item<double>(), 0.0);
  EXPECT_EQ(c.weight.grad().abs().max().item<double>(), 0.0);
  const LinearCrossEntropy sum =
      linear_cross_entropy(c.hidden, c.weight, c.bias, c.targets, {.reduction = LossReduction::kSum});
  EXPECT_EQ(sum.loss.item<double>(), 0.0);
  at::NoGradGuard no_grad;
  const at::Tensor none = at::empty({0, 4}, kF64);
  EXPECT_TRUE(std::isnan(linear_cross_entropy(none, c.weight, c.bias, at::empty({0}, at::kLong)).loss.item<double>()));
}

TEST(LinearCrossEntropy, LeadingDimensionsAreRows) {
  // hidden (B, T, D) and targets (B, T) give the loss of the (B T) rows, and hidden's gradient in its shape.
  const Case c = make_case(6, 4, 9, at::kDouble, 19);
  const at::Tensor h3 = c.hidden.detach().view({2, 3, 4}).requires_grad_(true);
  const LinearCrossEntropy got = linear_cross_entropy(h3, c.weight, c.bias, c.targets.view({2, 3}));
  EXPECT_NEAR(got.loss.item<double>(), plain(c).loss, 1e-14);
  got.loss.backward();
  EXPECT_EQ(h3.grad().sizes(), h3.sizes());
  expect_close(h3.grad(), plain(c).grad_hidden, 1e-14, "hidden");
}

TEST(LinearCrossEntropy, RefusesBadArguments) {
  const Case c = make_case(4, 3, 6, at::kDouble, 11);
  const auto call = [&](const at::Tensor& h, const at::Tensor& w, const at::Tensor& b, const at::Tensor& t,
                        int64_t chunk) {
    return message_of([&] { linear_cross_entropy(h, w, b, t, {.chunk_rows = chunk}); });
  };
  EXPECT_EQ(call(c.hidden, c.weight, c.bias, at::full({4}, 6, at::kLong), 0),
            "[linear_cross_entropy] targets must be in [0, 6) or ignore_index (-100), got 6");
  EXPECT_EQ(call(c.hidden, c.weight, c.bias, at::full({4}, -1, at::kLong), 0),
            "[linear_cross_entropy] targets must be in [0, 6) or ignore_index (-100), got -1");
  EXPECT_EQ(call(c.hidden, c.weight, c.bias, c.targets.narrow(0, 0, 3), 0),
            "[linear_cross_entropy] targets must be on the CPU with hidden's leading shape (4), got (3) on cpu");
  EXPECT_EQ(call(c.hidden, c.weight, c.bias, c.targets.to(at::kInt), 0),
            "[linear_cross_entropy] targets must be int64, got Int");
  EXPECT_EQ(call(c.hidden, c.weight.narrow(1, 0, 2), c.bias, c.targets, 0),
            "[linear_cross_entropy] weight must be (V, D) = (V, 3) with V >= 1, got (6, 2)");
  EXPECT_EQ(call(c.hidden, c.weight.to(at::kFloat), c.bias, c.targets, 0),
            "[linear_cross_entropy] weight must have hidden's dtype float64, got float32");
  EXPECT_EQ(call(c.hidden, c.weight, c.bias.narrow(0, 0, 5), c.targets, 0),
            "[linear_cross_entropy] bias must be (V) = (6), got (5)");
  EXPECT_EQ(call(c.hidden.sum(), c.weight, c.bias, c.targets, 0),
            "[linear_cross_entropy] hidden must be (..., D), got a 0-d tensor");
  EXPECT_EQ(call(c.hidden.to(at::kHalf), c.weight, c.bias, c.targets, 0),
            "[linear_cross_entropy] hidden must be float32 or float64, got float16");
  EXPECT_EQ(call(c.hidden, c.weight, c.bias, c.targets, -1),
            "[linear_cross_entropy] chunk_rows must be >= 0 (0: max(256, 2^20 / V) rows), got -1");
  EXPECT_EQ(message_of([&] {
              c10::Dispatcher::singleton()
                  .findSchemaOrThrow("posenc::linear_cross_entropy", "")
                  .typed<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                            const c10::optional<at::Tensor>&, const at::Tensor&,
                                                            int64_t, c10::string_view, int64_t)>()
                  .call(c.hidden, c.weight, c.bias, c.targets, -100, "none", 0);
            }),
            "[linear_cross_entropy] reduction must be \"mean\" or \"sum\" (the gradient is formed with the loss; "
            "per-row losses need the logits: cross_entropy(linear(...))), got \"none\"");
  // Its gradient is computed with the loss: a gradient of the gradient is refused, not silently wrong.
  const at::Tensor loss = linear_cross_entropy(c.hidden, c.weight, c.bias, c.targets).loss;
  const auto second =
      message_of([&] { torch::autograd::grad({loss}, {c.hidden}, {}, /*retain_graph=*/true, /*create_graph=*/true); });
  EXPECT_NE(second.find("[linear_cross_entropy] has no double backward"), std::string::npos) << second;
}

}  // namespace
}  // namespace posenc::nn
