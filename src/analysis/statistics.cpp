#include "posenc/analysis/statistics.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <numeric>

#include "posenc/error.h"

namespace posenc::analysis {
namespace {

constexpr const char* kOp = "stats";

void check_pairs(const std::vector<double>& a, const std::vector<double>& b, const char* what) {
  require(a.size() == b.size(), kOp, "paired samples must have the same size, got ", a.size(), " and ", b.size());
  require(a.size() >= 2, kOp, what, " needs >= 2 pairs, got ", a.size());
}

// The continued fraction of I_x(a, b) (modified Lentz), converging for x < (a + 1) / (a + b + 2).
double beta_fraction(double a, double b, double x) {
  constexpr double kTiny = 1e-300, kEps = 1e-16;
  double c = 1, d = 1 - (a + b) * x / (a + 1);
  if (std::fabs(d) < kTiny) d = kTiny;
  d = 1 / d;
  double h = d;
  for (int m = 1; m <= 10000; ++m) {
    const double m2 = 2.0 * m;
    // Even step: m (b - m) x / ((a + 2m - 1)(a + 2m)).
    double num = m * (b - m) * x / ((a + m2 - 1) * (a + m2));
    d = 1 + num * d;
    c = 1 + num / c;
    if (std::fabs(d) < kTiny) d = kTiny;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1 / d;
    h *= d * c;
    // Odd step: -(a + m)(a + b + m) x / ((a + 2m)(a + 2m + 1)).
    num = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1));
    d = 1 + num * d;
    c = 1 + num / c;
    if (std::fabs(d) < kTiny) d = kTiny;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1 / d;
    const double step = d * c;
    h *= step;
    if (std::fabs(step - 1) < kEps) break;
  }
  return h;
}

std::vector<double> ranks(const std::vector<double>& v) {
  std::vector<size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t i, size_t j) { return v[i] < v[j]; });
  std::vector<double> r(v.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    const double mean_rank = (static_cast<double>(i) + static_cast<double>(j)) / 2 + 1;
    for (size_t k = i; k <= j; ++k) r[order[k]] = mean_rank;
    i = j + 1;
  }
  return r;
}

}  // namespace

MeanSd mean_sd(const std::vector<double>& values) {
  require(!values.empty(), kOp, "values must not be empty");
  MeanSd s;
  s.n = static_cast<int64_t>(values.size());
  s.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(s.n);
  if (s.n > 1) {
    double sq = 0;
    for (const double v : values) sq += (v - s.mean) * (v - s.mean);
    s.sd = std::sqrt(sq / static_cast<double>(s.n - 1));
  }
  return s;
}

double regularized_incomplete_beta(double a, double b, double x) {
  require(a > 0 && b > 0, kOp, "incomplete beta needs a, b > 0, got ", a, ", ", b);
  require(x >= 0 && x <= 1, kOp, "incomplete beta needs x in [0, 1], got ", x);
  if (x == 0 || x == 1) return x;
  const double log_front =
      std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x);
  // The fraction converges fast on one side of the mean; the symmetry I_x(a, b) = 1 - I_{1-x}(b, a) covers the other.
  if (x < (a + 1) / (a + b + 2)) return std::exp(log_front) * beta_fraction(a, b, x) / a;
  return 1 - std::exp(log_front) * beta_fraction(b, a, 1 - x) / b;
}

double student_t_two_sided_p(double t, double nu) {
  require(nu > 0, kOp, "degrees of freedom must be > 0, got ", nu);
  if (std::isnan(t)) return std::numeric_limits<double>::quiet_NaN();
  if (std::isinf(t)) return 0;
  return regularized_incomplete_beta(nu / 2, 0.5, nu / (nu + t * t));
}

PairedTTest paired_t_test(const std::vector<double>& a, const std::vector<double>& b) {
  check_pairs(a, b, "a paired t-test");
  std::vector<double> d(a.size());
  for (size_t i = 0; i < a.size(); ++i) d[i] = a[i] - b[i];
  const MeanSd s = mean_sd(d);
  PairedTTest r;
  r.n = s.n;
  r.mean_difference = s.mean;
  if (s.sd == 0) {
    r.t = s.mean == 0 ? 0 : std::copysign(std::numeric_limits<double>::infinity(), s.mean);
    r.p = s.mean == 0 ? 1 : 0;
    return r;
  }
  r.t = s.mean / (s.sd / std::sqrt(static_cast<double>(s.n)));
  r.p = student_t_two_sided_p(r.t, static_cast<double>(s.n - 1));
  return r;
}

double pearson_correlation(const std::vector<double>& x, const std::vector<double>& y) {
  check_pairs(x, y, "a correlation");
  const double mx = mean_sd(x).mean, my = mean_sd(y).mean;
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  if (sxx == 0 || syy == 0) return std::numeric_limits<double>::quiet_NaN();
  return sxy / std::sqrt(sxx * syy);
}

double spearman_correlation(const std::vector<double>& x, const std::vector<double>& y) {
  check_pairs(x, y, "a correlation");
  return pearson_correlation(ranks(x), ranks(y));
}

double correlation_p(double r, int64_t n) {
  require(n >= 3, kOp, "a correlation test needs >= 3 pairs, got ", n);
  if (std::isnan(r)) return r;
  require(r >= -1 && r <= 1, kOp, "r must be in [-1, 1], got ", r);
  if (std::abs(r) == 1) return 0;
  const double nu = static_cast<double>(n - 2);
  return student_t_two_sided_p(r * std::sqrt(nu / (1 - r * r)), nu);
}

double spearman_p(const std::vector<double>& x, const std::vector<double>& y) {
  check_pairs(x, y, "a correlation");
  const auto n = static_cast<int64_t>(x.size());
  const double rho = spearman_correlation(x, y);
  if (n > kExactSpearmanPairs || std::isnan(rho)) return correlation_p(rho, n);
  require(n >= 3, kOp, "a correlation test needs >= 3 pairs, got ", n);
  // Under "no correlation" every ordering of y's ranks against x's is equally likely; rho's denominator is the
  // same for all of them, so the centred cross sum ranks them.
  std::vector<double> rx = ranks(x), ry = ranks(y);
  const double centre = static_cast<double>(n + 1) / 2;
  for (size_t i = 0; i < rx.size(); ++i) rx[i] -= centre, ry[i] -= centre;
  const auto cross = [&](const std::vector<double>& r) {
    double s = 0;
    for (size_t i = 0; i < rx.size(); ++i) s += rx[i] * r[i];
    return s;
  };
  const double observed = std::abs(cross(ry)) * (1 - 1e-12);  // a reordering reaching it exactly counts
  std::sort(ry.begin(), ry.end());
  int64_t at_least = 0, orderings = 0;
  do {
    ++orderings;
    at_least += std::abs(cross(ry)) >= observed;
  } while (std::next_permutation(ry.begin(), ry.end()));
  // Tied ranks repeat orderings; next_permutation visits each distinct one once, and each stands for the same
  // number of the n! orderings, so the share is the same.
  return static_cast<double>(at_least) / static_cast<double>(orderings);
}

LeaveOneOut most_influential_pair(const std::vector<double>& x, const std::vector<double>& y) {
  check_pairs(x, y, "a correlation");
  require(x.size() >= 4, kOp, "leaving one pair out needs >= 4 pairs, got ", x.size());
  const double r = pearson_correlation(x, y);
  LeaveOneOut best;
  double largest = -1;
  for (size_t k = 0; k < x.size(); ++k) {
    std::vector<double> xs = x, ys = y;
    xs.erase(xs.begin() + static_cast<std::ptrdiff_t>(k));
    ys.erase(ys.begin() + static_cast<std::ptrdiff_t>(k));
    const double without = pearson_correlation(xs, ys);
    const double move = std::isnan(without) || std::isnan(r) ? INFINITY : std::abs(without - r);
    if (move > largest) largest = move, best = {k, without};  // ties: the first pair
  }
  return best;
}

std::vector<double> holm_adjusted(const std::vector<double>& p) {
  std::vector<size_t> order;
  for (size_t i = 0; i < p.size(); ++i) {
    if (std::isnan(p[i])) continue;
    require(p[i] >= 0 && p[i] <= 1, kOp, "p-values must be in [0, 1], got ", p[i]);
    order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] < p[b]; });
  std::vector<double> adjusted = p;
  const size_t m = order.size();
  double running = 0;  // the step-down max keeps the adjusted values in the order of the raw ones
  for (size_t k = 0; k < m; ++k) {
    running = std::max(running, std::min(1.0, static_cast<double>(m - k) * p[order[k]]));
    adjusted[order[k]] = running;
  }
  return adjusted;
}

}  // namespace posenc::analysis
