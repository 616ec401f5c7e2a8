// The relative probe's model and optimizer (private header src/analysis/pair_logistic.h).
#include "pair_logistic.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "analysis_test_support.h"

namespace posenc::analysis {
namespace {

using detail::Pair;
using detail::PairLogistic;
using Real = long double;

// The header's f, plainly: every ordered pair's features [z_first, z_second, 1].
Real plain_loss(const std::vector<double>& z, int64_t d, const std::vector<Pair>& pairs,
                const std::vector<Real>& theta) {
  Real loss = 0;
  for (const Pair& pair : pairs) {
    for (int order = 0; order < 2; ++order) {
      const int64_t a = order == 0 ? pair.i : pair.j, b = order == 0 ? pair.j : pair.i;
      const Real label = order == 0 ? 1 : 0;
      Real logit = theta[2 * d];
      for (int64_t k = 0; k < d; ++k) logit += theta[k] * z[a * d + k] + theta[d + k] * z[b * d + k];
      loss += std::log(1 + std::exp(logit)) - label * logit;
    }
  }
  Real penalty = 0;
  for (int64_t k = 0; k < 2 * d; ++k) penalty += theta[k] * theta[k];
  return loss / (2 * pairs.size()) + Real(detail::kL2) / 2 * penalty;
}

// The unique minimizer by Newton's method in long double (plain Hessian).
std::vector<Real> newton_minimum(const std::vector<double>& z, int64_t d, const std::vector<Pair>& pairs) {
  const int64_t size = 2 * d + 1;
  std::vector<Real> theta(static_cast<size_t>(size), 0);
  for (int iter = 0; iter < 60; ++iter) {
    std::vector<Real> grad(static_cast<size_t>(size), 0), hess(static_cast<size_t>(size * size), 0);
    for (const Pair& pair : pairs) {
      for (int order = 0; order < 2; ++order) {
        const int64_t a = order == 0 ? pair.i : pair.j, b = order == 0 ? pair.j : pair.i;
        std::vector<Real> f(static_cast<size_t>(size));
        for (int64_t k = 0; k < d; ++k) f[k] = z[a * d + k], f[d + k] = z[b * d + k];
        f[2 * d] = 1;
        Real logit = 0;
        for (int64_t k = 0; k < size; ++k) logit += theta[k] * f[k];
        const Real p = 1 / (1 + std::exp(-logit));
        const Real r = p - (order == 0 ? 1 : 0);
        for (int64_t k = 0; k < size; ++k) {
          grad[k] += r * f[k];
          for (int64_t l = 0; l < size; ++l) hess[k * size + l] += p * (1 - p) * f[k] * f[l];
        }
      }
    }
    const Real count = 2 * pairs.size();
    for (auto& g : grad) g /= count;
    for (auto& h : hess) h /= count;
    for (int64_t k = 0; k < 2 * d; ++k) grad[k] += detail::kL2 * theta[k], hess[k * size + k] += detail::kL2;
    const std::vector<Real> step = test::solve(hess, grad, size, 1);
    for (int64_t k = 0; k < size; ++k) theta[k] -= step[k];
  }
  return theta;
}

struct Problem {
  int64_t n, d;
  std::vector<double> z;
  std::vector<Pair> pairs;
};

Problem small_problem(int64_t n, int64_t d, uint64_t seed) {
  Problem p{n, d, test::random_table(n, d, seed).values, {}};
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i + 1; j < n; ++j)
      if ((i * 7 + j * 3) % 4 != 0) p.pairs.push_back({i, j});
  return p;
}

TEST(PairLogistic, LossAndGradientMatchThePlainFormula) {
  const Problem p = small_problem(9, 3, 4);
  const PairLogistic model(p.z, p.n, p.d, p.pairs);
  ASSERT_EQ(model.size(), 7);
  const std::vector<double> theta = {0.3, -1.2, 0.5, 0.8, 0.1, -0.4, 0.25};
  std::vector<double> grad;
  const double loss = model.evaluate(theta, grad);
  const std::vector<Real> at(theta.begin(), theta.end());
  EXPECT_NEAR(loss, static_cast<double>(plain_loss(p.z, p.d, p.pairs, at)), 1e-14);  // float64 sums of O(1) terms
  ASSERT_EQ(grad.size(), theta.size());
  for (size_t k = 0; k < theta.size(); ++k) {
    // Central difference in long double: O(h^2) = 1e-10 truncation, far below the tolerance.
    const Real h = 1e-5L;
    std::vector<Real> up = at, down = at;
    up[k] += h, down[k] -= h;
    const Real numeric = (plain_loss(p.z, p.d, p.pairs, up) - plain_loss(p.z, p.d, p.pairs, down)) / (2 * h);
    EXPECT_NEAR(grad[k], static_cast<double>(numeric), 1e-8) << k;
  }
  // logit(i, j) = b + u . z[i] + v . z[j]
  Real logit = theta[6];
  for (int64_t k = 0; k < 3; ++k) logit += theta[k] * p.z[2 * 3 + k] + theta[3 + k] * p.z[5 * 3 + k];
  EXPECT_NEAR(model.logit(theta, 2, 5), static_cast<double>(logit), 1e-15);
}

TEST(PairLogistic, MinimizeFindsTheNewtonOptimum) {
  // Random rows do not separate the orders, so the loss is strongly convex and its minimum unique.
  const Problem p = small_problem(14, 2, 9);
  const PairLogistic model(p.z, p.n, p.d, p.pairs);
  const std::vector<double> theta = detail::minimize(model);
  const std::vector<Real> want = newton_minimum(p.z, p.d, p.pairs);
  // L-BFGS stops when a step gains < 1e-10 of f: parameters within ~sqrt(1e-10 / curvature).
  for (size_t k = 0; k < theta.size(); ++k) EXPECT_NEAR(theta[k], static_cast<double>(want[k]), 1e-4) << k;
  std::vector<double> grad;
  model.evaluate(theta, grad);
  for (double g : grad) EXPECT_LT(std::abs(g), 1e-5);
  EXPECT_EQ(detail::minimize(model), theta);  // deterministic
}

}  // namespace
}  // namespace posenc::analysis
