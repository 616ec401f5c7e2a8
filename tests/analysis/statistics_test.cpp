#include "posenc/analysis/statistics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numbers>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>

namespace posenc::analysis {
namespace {

// Two-sided tail of Student's t by Simpson's rule on the density, written
// plainly: 2 * integral_|t|^inf f(x) dx with x = |t| + u / (1 - u).
double simpson_tail(double t, double nu) {
  const double c = std::exp(std::lgamma((nu + 1) / 2) - std::lgamma(nu / 2)) / std::sqrt(nu * std::numbers::pi);
  const auto f = [&](double u) {
    if (u >= 1) return 0.0;
    const double x = std::fabs(t) + u / (1 - u);
    return c * std::pow(1 + x * x / nu, -(nu + 1) / 2) / ((1 - u) * (1 - u));
  };
  const int n = 200000;
  const double h = 1.0 / n;
  double s = f(0) + f(1);
  for (int i = 1; i < n; ++i) s += f(i * h) * (i % 2 == 1 ? 4 : 2);
  return 2 * s * h / 3;
}

void expect_error(const std::function<void()>& f, const std::string& message) {
  try {
    f();
    FAIL() << "no exception, expected " << message;
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), message);
  }
}

TEST(Statistics, StudentTClosedForms) {
  for (const double t : {0.0, 0.3, 1.0, 2.5, 12.0}) {
    // nu = 1 is the Cauchy distribution; nu = 2 has the tail 1 - |t| / sqrt(2 + t^2).
    EXPECT_NEAR(student_t_two_sided_p(t, 1), 1 - 2 / std::numbers::pi * std::atan(t), 1e-13) << t;
    EXPECT_NEAR(student_t_two_sided_p(-t, 2), 1 - t / std::sqrt(2 + t * t), 1e-13) << t;
  }
}

TEST(Statistics, StudentTMatchesIntegratedDensity) {
  for (const double nu : {3.0, 4.0, 5.0, 9.0, 30.0}) {
    for (const double t : {0.5, 1.7, 2.8, 6.0}) {
      EXPECT_NEAR(student_t_two_sided_p(t, nu), simpson_tail(t, nu), 1e-9) << "nu " << nu << " t " << t;
    }
  }
  // Printed tables' 5 % two-sided critical values.
  EXPECT_NEAR(student_t_two_sided_p(2.776445105, 4), 0.05, 1e-9);
  EXPECT_NEAR(student_t_two_sided_p(2.570581836, 5), 0.05, 1e-9);
}

TEST(Statistics, IncompleteBetaProperties) {
  EXPECT_DOUBLE_EQ(regularized_incomplete_beta(2, 3, 0), 0);
  EXPECT_DOUBLE_EQ(regularized_incomplete_beta(2, 3, 1), 1);
  // I_x(1, 1) = x; I_x(a, 1) = x^a; symmetry I_x(a, b) = 1 - I_{1-x}(b, a).
  for (const double x : {0.1, 0.5, 0.93}) {
    EXPECT_NEAR(regularized_incomplete_beta(1, 1, x), x, 1e-14);
    EXPECT_NEAR(regularized_incomplete_beta(3.5, 1, x), std::pow(x, 3.5), 1e-14);
    EXPECT_NEAR(regularized_incomplete_beta(2.5, 7, x), 1 - regularized_incomplete_beta(7, 2.5, 1 - x), 1e-14);
  }
  expect_error([] { regularized_incomplete_beta(0, 1, 0.5); }, "[stats] incomplete beta needs a, b > 0, got 0, 1");
  expect_error([] { regularized_incomplete_beta(1, 1, 1.5); }, "[stats] incomplete beta needs x in [0, 1], got 1.5");
}

TEST(Statistics, PairedTTest) {
  // Differences 1, 2, 3, 4, 5: mean 3, sd sqrt(2.5), t = 3 / (sqrt(2.5) / sqrt(5)) = 3 sqrt(2).
  const PairedTTest r = paired_t_test({2, 4, 6, 8, 10}, {1, 2, 3, 4, 5});
  EXPECT_EQ(r.n, 5);
  EXPECT_DOUBLE_EQ(r.mean_difference, 3);
  EXPECT_NEAR(r.t, 3 * std::sqrt(2.0), 1e-12);
  EXPECT_NEAR(r.p, simpson_tail(r.t, 4), 1e-9);
  // Swapping the samples flips t, keeps p.
  const PairedTTest s = paired_t_test({1, 2, 3, 4, 5}, {2, 4, 6, 8, 10});
  EXPECT_NEAR(s.t, -r.t, 1e-12);
  EXPECT_NEAR(s.p, r.p, 1e-15);
  EXPECT_EQ(paired_t_test({1, 2}, {1, 2}).p, 1);
  EXPECT_EQ(paired_t_test({2, 3}, {1, 2}).p, 0);
  expect_error([] { paired_t_test({1, 2, 3}, {1, 2}); }, "[stats] paired samples must have the same size, got 3 and 2");
  expect_error([] { paired_t_test({1}, {2}); }, "[stats] a paired t-test needs >= 2 pairs, got 1");
}

TEST(Statistics, Correlations) {
  EXPECT_NEAR(pearson_correlation({1, 2, 3}, {2, 4, 6}), 1, 1e-15);
  EXPECT_NEAR(pearson_correlation({1, 2, 3}, {3, 2, 1}), -1, 1e-15);
  // x = 1..4, y = 1, 3, 2, 4: covariance 4 / sqrt(5 * 5) = 0.8.
  EXPECT_NEAR(pearson_correlation({1, 2, 3, 4}, {1, 3, 2, 4}), 0.8, 1e-15);
  // Monotone but not linear: Spearman 1, Pearson below.
  EXPECT_NEAR(spearman_correlation({1, 2, 3, 4}, {1, 8, 27, 1000}), 1, 1e-15);
  EXPECT_LT(pearson_correlation({1, 2, 3, 4}, {1, 8, 27, 1000}), 0.99);
  // Ties share their mean rank: ranks of (1, 1, 2) are (1.5, 1.5, 3).
  EXPECT_NEAR(spearman_correlation({1, 1, 2}, {1.5, 1.5, 3}), 1, 1e-15);
  EXPECT_TRUE(std::isnan(pearson_correlation({1, 1, 1}, {1, 2, 3})));
  expect_error([] { spearman_correlation({1}, {1}); }, "[stats] a correlation needs >= 2 pairs, got 1");
}

TEST(Statistics, CorrelationP) {
  // Closed forms of the t test of r: with 3 pairs (1 degree of freedom) p = 1 - (2 / pi) asin|r|, with 4 pairs
  // (2 degrees) p = 1 - |r|; with more, the tail integrated by Simpson's rule.
  for (const double r : {0.0, 0.1, -0.35, 0.8, -0.97}) {
    EXPECT_NEAR(correlation_p(r, 3), 1 - 2 / std::numbers::pi * std::asin(std::abs(r)), 1e-13) << r;
    EXPECT_NEAR(correlation_p(r, 4), 1 - std::abs(r), 1e-13) << r;
    for (const int64_t n : {5, 9, 20}) {
      const double nu = static_cast<double>(n - 2);
      EXPECT_NEAR(correlation_p(r, n), simpson_tail(std::abs(r) * std::sqrt(nu / (1 - r * r)), nu), 1e-9) << r;
    }
  }
  // More pairs make the same r more significant; the sign does not matter.
  EXPECT_LT(correlation_p(0.8, 20), correlation_p(0.8, 9));
  EXPECT_DOUBLE_EQ(correlation_p(-0.6, 9), correlation_p(0.6, 9));
  EXPECT_EQ(correlation_p(1, 5), 0);
  EXPECT_EQ(correlation_p(-1, 3), 0);
  EXPECT_TRUE(std::isnan(correlation_p(std::nan(""), 9)));
  expect_error([] { correlation_p(0.5, 2); }, "[stats] a correlation test needs >= 3 pairs, got 2");
  expect_error([] { correlation_p(1.5, 9); }, "[stats] r must be in [-1, 1], got 1.5");
}

// The share of the orderings of y whose |rho| reaches the observed one, counted here over all n! labelled
// orderings with rho = 1 - 6 sum d^2 / (n (n^2 - 1)) (no ties), or with spearman_correlation (ties).
double brute_force_spearman_p(const std::vector<double>& x, std::vector<double> y, bool ties) {
  const auto n = static_cast<double>(x.size());
  const auto rho = [&](const std::vector<double>& v) {
    if (ties) return spearman_correlation(x, v);
    double d2 = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double rx = static_cast<double>(std::count_if(x.begin(), x.end(), [&](double a) { return a < x[i]; }));
      const double ry = static_cast<double>(std::count_if(v.begin(), v.end(), [&](double a) { return a < v[i]; }));
      d2 += (rx - ry) * (rx - ry);
    }
    return 1 - 6 * d2 / (n * (n * n - 1));
  };
  const double observed = std::abs(rho(y));
  std::vector<size_t> order(y.size());
  std::iota(order.begin(), order.end(), 0);
  int64_t at_least = 0, all = 0;
  do {
    std::vector<double> v(y.size());
    for (size_t i = 0; i < y.size(); ++i) v[i] = y[order[i]];
    ++all;
    at_least += std::abs(rho(v)) >= observed - 1e-12;
  } while (std::next_permutation(order.begin(), order.end()));
  return static_cast<double>(at_least) / static_cast<double>(all);
}

TEST(Statistics, SpearmanPExactUpTo10Pairs) {
  // Perfect order: 2 of the n! orderings (it and its reverse).
  EXPECT_DOUBLE_EQ(spearman_p({1, 2, 3}, {10, 20, 30}), 2.0 / 6);
  EXPECT_DOUBLE_EQ(spearman_p({1, 2, 3, 4, 5}, {5, 4, 3, 2, 1}), 2.0 / 120);
  // n = 5, one neighbouring swap: rho = 0.9, reached by the 1 + 4 orderings with sum d^2 <= 2, both ways.
  EXPECT_DOUBLE_EQ(spearman_p({1, 2, 3, 4, 5}, {2, 1, 3, 4, 5}), 10.0 / 120);
  const std::vector<double> x{0.3, 1.7, -0.2, 2.5, 0.9, 1.1, -1.4}, y{0.1, 0.8, 0.2, 1.9, -0.5, 1.0, -0.7};
  EXPECT_NEAR(spearman_p(x, y), brute_force_spearman_p(x, y, false), 1e-15);
  // Ties keep their mean ranks; each distinct ordering stands for as many labelled ones.
  const std::vector<double> tx{1, 1, 2, 3, 3, 4}, ty{2, 1, 1, 5, 4, 4};
  EXPECT_NEAR(spearman_p(tx, ty), brute_force_spearman_p(tx, ty, true), 1e-15);
  // Beyond 10 pairs, the t test of rho.
  std::vector<double> lx, ly;
  for (int i = 0; i < 11; ++i) lx.push_back(i), ly.push_back(std::sin(i));
  EXPECT_DOUBLE_EQ(spearman_p(lx, ly), correlation_p(spearman_correlation(lx, ly), 11));
  EXPECT_TRUE(std::isnan(spearman_p({1, 1, 1}, {1, 2, 3})));
  expect_error([] { spearman_p({1, 2}, {1, 2}); }, "[stats] a correlation test needs >= 3 pairs, got 2");
  expect_error([] { spearman_p({1, 2, 3}, {1, 2}); }, "[stats] paired samples must have the same size, got 3 and 2");
}

// Holm's procedure as its authors state it: go through the p-values from the smallest; reject the k-th (from 0)
// while p <= alpha / (m - k); stop at the first that is not.
std::vector<bool> holm_rejects(const std::vector<double>& p, double alpha) {
  std::vector<size_t> order(p.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] < p[b]; });
  std::vector<bool> rejected(p.size(), false);
  for (size_t k = 0; k < order.size(); ++k) {
    if (p[order[k]] > alpha / static_cast<double>(order.size() - k)) break;
    rejected[order[k]] = true;
  }
  return rejected;
}

TEST(Statistics, HolmAdjusted) {
  // Sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1: 0.02, 0.03, 0.06, 0.04 -> the running max 0.06 for the last.
  const std::vector<double> adjusted = holm_adjusted({0.01, 0.04, 0.03, 0.005});
  ASSERT_EQ(adjusted.size(), 4u);
  EXPECT_DOUBLE_EQ(adjusted[0], 0.03);
  EXPECT_DOUBLE_EQ(adjusted[1], 0.06);
  EXPECT_DOUBLE_EQ(adjusted[2], 0.06);
  EXPECT_DOUBLE_EQ(adjusted[3], 0.02);
  // Capped at 1; a NaN stays and does not count in m (m = 2 here).
  const std::vector<double> with_nan = holm_adjusted({0.7, std::nan(""), 0.2});
  EXPECT_DOUBLE_EQ(with_nan[0], 0.7);
  EXPECT_TRUE(std::isnan(with_nan[1]));
  EXPECT_DOUBLE_EQ(with_nan[2], 0.4);
  EXPECT_DOUBLE_EQ(holm_adjusted({0.6, 0.9})[0], 1.0);
  EXPECT_TRUE(holm_adjusted({}).empty());
  EXPECT_DOUBLE_EQ(holm_adjusted({0.03})[0], 0.03);  // a family of one is not corrected
  // Properties over random families with ties: adjusted >= raw, same order as raw, and "adjusted <= alpha" is
  // exactly the set Holm's sequential procedure rejects at alpha.
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> unit(0, 0.2);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<double> p(1 + trial % 12);
    for (double& v : p) v = std::round(unit(rng) * 200) / 1000;  // on a grid of 0.001: ties happen
    const std::vector<double> a = holm_adjusted(p);
    for (size_t i = 0; i < p.size(); ++i) {
      EXPECT_GE(a[i], p[i]);
      EXPECT_LE(a[i], 1.0);
      for (size_t j = 0; j < p.size(); ++j) {
        if (p[i] < p[j]) {
          EXPECT_LE(a[i], a[j]);
        }
      }
    }
    for (const double alpha : {0.0105, 0.0505, 0.1005}) {  // between grid multiples: no boundary to round across
      const std::vector<bool> rejected = holm_rejects(p, alpha);
      for (size_t i = 0; i < p.size(); ++i) EXPECT_EQ(a[i] <= alpha, rejected[i]) << trial << " " << i;
    }
  }
  expect_error([] { holm_adjusted({0.1, 1.5}); }, "[stats] p-values must be in [0, 1], got 1.5");
  expect_error([] { holm_adjusted({-0.25}); }, "[stats] p-values must be in [0, 1], got -0.25");
}

// Pearson's r as the textbook writes it, for the leave-one-out test.
double plain_pearson(const std::vector<double>& x, const std::vector<double>& y) {
  const double n = static_cast<double>(x.size());
  const double mx = std::accumulate(x.begin(), x.end(), 0.0) / n, my = std::accumulate(y.begin(), y.end(), 0.0) / n;
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxy += (x[i] - mx) * (y[i] - my), sxx += (x[i] - mx) * (x[i] - mx), syy += (y[i] - my) * (y[i] - my);
  }
  return sxy / std::sqrt(sxx * syy);
}

TEST(Statistics, MostInfluentialPair) {
  // Four points with r = -1/sqrt(5) and a fifth far out that makes r strongly positive: it is the one named.
  const LeaveOneOut outlier = most_influential_pair({1, 2, 3, 4, 10}, {2, 1, 2, 1, 9});
  EXPECT_GT(pearson_correlation({1, 2, 3, 4, 10}, {2, 1, 2, 1, 9}), 0.9);
  EXPECT_EQ(outlier.index, 4u);
  EXPECT_NEAR(outlier.r_without, -1 / std::sqrt(5.0), 1e-15);
  // Against every leave-one-out r computed plainly: the named pair moves r the most.
  std::mt19937_64 rng(11);
  std::normal_distribution<double> normal;
  for (int trial = 0; trial < 100; ++trial) {
    std::vector<double> x(4 + trial % 9), y(x.size());
    for (size_t i = 0; i < x.size(); ++i) x[i] = normal(rng), y[i] = 0.5 * x[i] + normal(rng);
    const double r = plain_pearson(x, y);
    const LeaveOneOut l = most_influential_pair(x, y);
    double largest = 0;
    for (size_t k = 0; k < x.size(); ++k) {
      std::vector<double> xs = x, ys = y;
      xs.erase(xs.begin() + static_cast<long>(k)), ys.erase(ys.begin() + static_cast<long>(k));
      const double without = plain_pearson(xs, ys);
      largest = std::max(largest, std::abs(without - r));
      if (k == l.index) {
        EXPECT_NEAR(l.r_without, without, 1e-12);
      }
    }
    EXPECT_NEAR(std::abs(l.r_without - r), largest, 1e-12) << trial;
  }
  // Without the pair one sample is constant: r is NaN, the largest move.
  EXPECT_EQ(most_influential_pair({1, 2, 3, 4}, {1, 1, 1, 5}).index, 3u);
  EXPECT_TRUE(std::isnan(most_influential_pair({1, 2, 3, 4}, {1, 1, 1, 5}).r_without));
  expect_error([] { most_influential_pair({1, 2, 3}, {1, 2, 4}); },
               "[stats] leaving one pair out needs >= 4 pairs, got 3");
  expect_error([] { most_influential_pair({1, 2, 3, 4}, {1, 2, 4}); },
               "[stats] paired samples must have the same size, got 4 and 3");
}

}  // namespace
}  // namespace posenc::analysis
