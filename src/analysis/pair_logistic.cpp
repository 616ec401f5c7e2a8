#include "pair_logistic.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "linear_algebra.h"

namespace posenc::analysis::detail {
namespace {

// log(1 + e^x) and 1 / (1 + e^-x) from one exp(-|x|), without overflow.
struct LogisticTerms {
  double softplus, sigmoid;
};
LogisticTerms logistic_terms(double x) {
  const double e = std::exp(-std::abs(x));
  const double inv = 1.0 / (1.0 + e);
  return {std::max(x, 0.0) + std::log1p(e), x >= 0.0 ? inv : e * inv};
}

double inner(const std::vector<double>& a, const std::vector<double>& b) {
  return dot(a.data(), b.data(), static_cast<int64_t>(a.size()));
}

}  // namespace

double PairLogistic::logit(const std::vector<double>& theta, int64_t i, int64_t j) const noexcept {
  return theta[2 * d_] + dot(z_.data() + i * d_, theta.data(), d_) + dot(z_.data() + j * d_, theta.data() + d_, d_);
}

double PairLogistic::evaluate(const std::vector<double>& theta, std::vector<double>& grad) const {
  std::vector<double> first(static_cast<size_t>(n_)), second(static_cast<size_t>(n_));
  for (int64_t p = 0; p < n_; ++p) {
    first[p] = dot(z_.data() + p * d_, theta.data(), d_);
    second[p] = dot(z_.data() + p * d_, theta.data() + d_, d_);
  }
  const double b = theta[2 * d_];
  std::vector<double> r_first(static_cast<size_t>(n_), 0.0), r_second(static_cast<size_t>(n_), 0.0);
  double loss = 0.0, r_sum = 0.0;
  // Both orders of each pair: (i, j) with label 1 and (j, i) with label 0.
  for (const Pair& pair : train_) {
    const double forward = b + first[pair.i] + second[pair.j];
    const double backward = b + first[pair.j] + second[pair.i];
    const LogisticTerms tf = logistic_terms(forward), tb = logistic_terms(backward);
    loss += tf.softplus - forward + tb.softplus;
    const double rf = tf.sigmoid - 1.0, rb = tb.sigmoid;
    r_first[pair.i] += rf;
    r_second[pair.j] += rf;
    r_first[pair.j] += rb;
    r_second[pair.i] += rb;
    r_sum += rf + rb;
  }
  for (const OrderedPair& sample : samples_) {
    const double x = b + first[sample.first] + second[sample.second];
    const LogisticTerms t = logistic_terms(x);
    loss += t.softplus - sample.label * x;
    const double r = t.sigmoid - sample.label;
    r_first[sample.first] += r;
    r_second[sample.second] += r;
    r_sum += r;
  }
  const double scale = 1.0 / static_cast<double>(2 * train_.size() + samples_.size());
  grad.assign(static_cast<size_t>(size()), 0.0);
  for (int64_t p = 0; p < n_; ++p) {
    const double* zp = z_.data() + p * d_;
    const double a = r_first[p] * scale, c = r_second[p] * scale;
    for (int64_t k = 0; k < d_; ++k) {
      grad[k] += a * zp[k];
      grad[d_ + k] += c * zp[k];
    }
  }
  double penalty = 0.0;
  for (int64_t k = 0; k < 2 * d_; ++k) {
    grad[k] += l2_ * theta[k];
    penalty += theta[k] * theta[k];
  }
  grad[2 * d_] = r_sum * scale;
  return loss * scale + 0.5 * l2_ * penalty;
}

std::vector<double> minimize(const PairLogistic& model, int max_iterations) {
  const auto size = static_cast<size_t>(model.size());
  std::vector<double> x(size, 0.0), grad, next(size), next_grad;
  double f = model.evaluate(x, grad);
  std::vector<std::vector<double>> s_hist, y_hist;
  std::vector<double> rho_hist;
  std::vector<double> dir(size), alpha(kMemory);
  for (int iter = 0; iter < max_iterations; ++iter) {
    double largest = 0.0;
    for (double g : grad) largest = std::max(largest, std::abs(g));
    if (largest <= kTolerance) break;
    // Two-loop recursion: dir = -H grad.
    for (size_t k = 0; k < size; ++k) dir[k] = -grad[k];
    const auto m = static_cast<int64_t>(s_hist.size());
    for (int64_t k = m - 1; k >= 0; --k) {
      alpha[k] = rho_hist[k] * inner(s_hist[k], dir);
      for (size_t t = 0; t < size; ++t) dir[t] -= alpha[k] * y_hist[k][t];
    }
    const double gamma = m > 0 ? inner(s_hist[m - 1], y_hist[m - 1]) / inner(y_hist[m - 1], y_hist[m - 1])
                               : 1.0 / std::max(1.0, std::sqrt(inner(grad, grad)));
    for (double& v : dir) v *= gamma;
    for (int64_t k = 0; k < m; ++k) {
      const double beta = rho_hist[k] * inner(y_hist[k], dir);
      for (size_t t = 0; t < size; ++t) dir[t] += (alpha[k] - beta) * s_hist[k][t];
    }
    double slope = inner(grad, dir);
    if (!(slope < 0.0)) {  // not a descent direction: restart from steepest descent
      s_hist.clear(), y_hist.clear(), rho_hist.clear();
      for (size_t k = 0; k < size; ++k) dir[k] = -grad[k];
      slope = inner(grad, dir);
    }
    double step = 1.0, next_f = 0.0;
    bool accepted = false;
    for (int tries = 0; tries < 40 && !accepted; ++tries, step *= 0.5) {
      for (size_t k = 0; k < size; ++k) next[k] = x[k] + step * dir[k];
      next_f = model.evaluate(next, next_grad);
      accepted = next_f <= f + 1e-4 * step * slope;
    }
    if (!accepted) break;
    const bool stalled = f - next_f <= kTolerance * std::max({std::abs(f), std::abs(next_f), 1.0});
    std::vector<double> s(size), y(size);
    for (size_t k = 0; k < size; ++k) {
      s[k] = next[k] - x[k];
      y[k] = next_grad[k] - grad[k];
    }
    const double sy = inner(s, y);
    if (sy > 1e-12 * std::sqrt(inner(s, s) * inner(y, y))) {
      if (static_cast<int>(s_hist.size()) == kMemory) {
        s_hist.erase(s_hist.begin()), y_hist.erase(y_hist.begin()), rho_hist.erase(rho_hist.begin());
      }
      s_hist.push_back(std::move(s)), y_hist.push_back(std::move(y)), rho_hist.push_back(1.0 / sy);
    }
    x.swap(next);
    grad.swap(next_grad);
    f = next_f;
    if (stalled) break;
  }
  return x;
}

}  // namespace posenc::analysis::detail
