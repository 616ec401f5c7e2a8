#include "posenc/analysis/probes.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "linear_algebra.h"
#include "pair_logistic.h"
#include "parallel.h"
#include "posenc/error.h"
#include "sampling.h"
#include "scaling.h"

namespace posenc::analysis {
namespace {

constexpr double kAbsoluteRidge = 1e-8;  // lambda = kAbsoluteRidge * trace(Xc^T Xc) / D
constexpr int64_t kDefaultPairs = 4096;
// Wang & Chen's relative.py: x = x[:512]; pairs from np.random.permutation(512**2);
// LogisticRegression(max_iter=1000).
constexpr int64_t kPeStudyRows = 512;
constexpr int kPeStudyIterations = 1000;

using detail::OrderedPair;
using detail::Pair;
using detail::PairLogistic;

void validate_protocol(ProbeProtocol protocol) {
  require(protocol == ProbeProtocol::kDefault || protocol == ProbeProtocol::kPeStudy, "probe",
          "protocol must be default or pe-study, got '", static_cast<int>(protocol), "'");
}

// Messages say what to change: "folds must be in [2, 1]" (a 1-row table) did not.
void validate_folds(const Matrix& table, int64_t folds) {
  validate_table("probe", "table", table);
  const int64_t n = table.rows;
  require(n >= 2, "probe", "the table has 1 position; the probes need at least 2 (cross-validation holds out ",
          "positions in at least 2 folds)");
  require(folds >= 2, "probe", "folds must be >= 2, got ", folds);
  require(folds <= n, "probe", "the table has ", n, " positions; ", folds, " folds need at least ", folds,
          " (one held-out position per fold): use 2 .. ", n, " folds or a table of at least ", folds, " positions");
}

int64_t pair_count(int64_t n) { return n * (n - 1) / 2; }

// Pairs used by the relative probe: min(pairs, n (n - 1) / 2) (default) or
// min(pairs, R^2), R = min(n, 512) (pe-study); at least folds.
int64_t validate_pairs(const Matrix& table, const ProbeOptions& options) {
  const int64_t n = table.rows;
  const bool pe_study = options.protocol == ProbeProtocol::kPeStudy;
  const int64_t rows = std::min(n, kPeStudyRows);
  const int64_t pairs = options.pairs.value_or(pe_study ? rows : kDefaultPairs);
  require(pairs >= 1, "probe", "pairs must be >= 1, got ", pairs);
  require(pairs >= options.folds, "probe", "pairs must be at least folds = ", options.folds, ", got ", pairs);
  if (pe_study) {
    // With n >= folds (validate_folds) only folds > 512^2 can exceed R^2.
    require(rows * rows >= options.folds, "probe", "the pe-study protocol draws from the first ", rows,
            " positions' ", rows * rows, " ordered pairs; ", options.folds, " folds need at least ", options.folds);
    return std::min(pairs, rows * rows);
  }
  const int64_t used = std::min(pairs, pair_count(n));
  // With n >= folds (validate_folds) only n = 2 has fewer pairs than folds.
  require(used >= options.folds, "probe", "the table has ", n, " positions, hence ", pair_count(n), " pair",
          pair_count(n) == 1 ? "" : "s", "; ", options.folds, " folds need at least ", options.folds,
          " (one held-out pair per fold): use a table of at least 3 positions");
  return used;
}

// ---- absolute: ridge regression PE[p] -> p --------------------------------

// Sum over the fold's held-out positions of |round(p_hat) - p|.
int64_t absolute_fold_error(const Matrix& table, const std::vector<int64_t>& train, const std::vector<int64_t>& test) {
  const int64_t d = table.cols;
  const auto nt = static_cast<int64_t>(train.size());
  // The bias is not penalized: centre X and p on the training rows. The sums
  // are shifted by the first row, so a constant column centres to exactly 0.
  const double* first = table.values.data() + train.front() * d;
  std::vector<double> mean(static_cast<size_t>(d), 0.0);
  double mean_p = 0.0;
  for (int64_t p : train) {
    const double* x = table.values.data() + p * d;
    for (int64_t k = 0; k < d; ++k) mean[k] += x[k] - first[k];
    mean_p += static_cast<double>(p);
  }
  for (int64_t k = 0; k < d; ++k) mean[k] = first[k] + mean[k] / static_cast<double>(nt);
  mean_p /= static_cast<double>(nt);
  std::vector<double> centred(static_cast<size_t>(nt * d));
  std::vector<double> target(static_cast<size_t>(nt));
  for (int64_t r = 0; r < nt; ++r) {
    const double* x = table.values.data() + train[r] * d;
    for (int64_t k = 0; k < d; ++k) centred[r * d + k] = x[k] - mean[k];
    target[r] = static_cast<double>(train[r]) - mean_p;
  }
  const double trace = detail::dot(centred.data(), centred.data(), nt * d);
  std::vector<double> w(static_cast<size_t>(d), 0.0);  // zero: predict the training mean
  if (trace > 0.0) {
    const double lambda = kAbsoluteRidge * trace / static_cast<double>(d);
    std::vector<double> l;
    if (d <= nt) {  // primal: (Xc^T Xc + lambda I) w = Xc^T t
      std::vector<double> c(static_cast<size_t>(d * d));
      detail::gram_tn(centred.data(), nt, d, c.data(), false);
      detail::multiply_tn(centred.data(), target.data(), nt, d, 1, w.data(), false);
      if (!detail::ridge_cholesky(c, d, lambda, l))
        fail_runtime("probe", "ridge system must be positive definite in float64, got a failed Cholesky ",
                     "factorization for lambda = ", lambda, " .. ", lambda * 1e11);
      detail::cholesky_solve(l.data(), d, w.data(), 1);
    } else {  // dual: w = Xc^T (Xc Xc^T + lambda I)^-1 t
      std::vector<double> columns(centred.size()), k(static_cast<size_t>(nt * nt));
      detail::transpose(centred.data(), nt, d, columns.data());
      detail::gram_tn(columns.data(), d, nt, k.data(), false);
      if (!detail::ridge_cholesky(k, nt, lambda, l))
        fail_runtime("probe", "ridge system must be positive definite in float64, got a failed Cholesky ",
                     "factorization for lambda = ", lambda, " .. ", lambda * 1e11);
      detail::cholesky_solve(l.data(), nt, target.data(), 1);
      detail::multiply_tn(centred.data(), target.data(), nt, d, 1, w.data(), false);
    }
  }
  int64_t error = 0;
  std::vector<double> shifted(static_cast<size_t>(d));
  for (int64_t p : test) {
    const double* x = table.values.data() + p * d;
    for (int64_t k = 0; k < d; ++k) shifted[k] = x[k] - mean[k];
    const double predicted = mean_p + detail::dot(shifted.data(), w.data(), d);
    error += static_cast<int64_t>(std::abs(std::round(predicted) - static_cast<double>(p)));
  }
  return error;
}

double absolute_mae_unchecked(const Matrix& table, const ProbeOptions& options) {
  const int64_t n = table.rows, folds = options.folds;
  const std::vector<int64_t> fold = detail::assign_folds(n, folds, options.seed);
  std::vector<int64_t> errors(static_cast<size_t>(folds), 0);
  detail::FirstFailure failures;
  const double small = static_cast<double>(std::min(n, table.cols));
  const double work = static_cast<double>(folds) * small * small * static_cast<double>(std::max(n, table.cols));
  [[maybe_unused]] const bool threads = detail::worth_threads(work);  // a min(n, D)^2 max(n, D) solve per fold
#pragma omp parallel for schedule(dynamic, 1) if (threads)
  for (int64_t f = 0; f < folds; ++f) {
    failures.run(f, [&] {
      std::vector<int64_t> train, test;
      for (int64_t p = 0; p < n; ++p) (fold[p] == f ? test : train).push_back(p);
      errors[f] = absolute_fold_error(table, train, test);
    });
  }
  failures.rethrow();
  int64_t total = 0;
  for (int64_t e : errors) total += e;
  return static_cast<double>(total) / static_cast<double>(n);
}

// ---- relative: logistic regression [PE[i], PE[j]] -> [i < j] -------------

// The index-th pair (i, j), i < j, in row-major order.
Pair pair_at(int64_t index, int64_t n) {
  int64_t lo = 0, hi = n - 2;  // the largest i with first(i) <= index
  auto first = [n](int64_t i) { return i * (2 * n - i - 1) / 2; };
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (first(mid) <= index)
      lo = mid;
    else
      hi = mid - 1;
  }
  return {lo, lo + 1 + (index - first(lo))};
}

// Rows standardized by the training pairs' column means and deviations, each
// position weighted by how many training pairs hold it (the statistics of the
// design matrix's columns); a column constant over them becomes 0.
std::vector<double> standardize(const Matrix& table, const std::vector<Pair>& train) {
  const int64_t n = table.rows, d = table.cols;
  std::vector<double> weight(static_cast<size_t>(n), 0.0);
  for (const Pair& pair : train) weight[pair.i] += 1.0, weight[pair.j] += 1.0;
  const double total = 2.0 * static_cast<double>(train.size());
  const double* first = table.values.data() + train.front().i * d;  // shift: a constant column stays exact
  std::vector<double> mean(static_cast<size_t>(d), 0.0), spread(static_cast<size_t>(d), 0.0);
  for (int64_t p = 0; p < n; ++p) {
    if (weight[p] == 0.0) continue;
    for (int64_t k = 0; k < d; ++k) mean[k] += weight[p] * (table(p, k) - first[k]);
  }
  for (int64_t k = 0; k < d; ++k) mean[k] = first[k] + mean[k] / total;
  for (int64_t p = 0; p < n; ++p) {
    if (weight[p] == 0.0) continue;
    for (int64_t k = 0; k < d; ++k) spread[k] += weight[p] * (table(p, k) - mean[k]) * (table(p, k) - mean[k]);
  }
  std::vector<double> z(static_cast<size_t>(n * d));
  for (int64_t k = 0; k < d; ++k) {
    const double deviation = std::sqrt(spread[k] / total);
    for (int64_t p = 0; p < n; ++p) z[p * d + k] = deviation > 0.0 ? (table(p, k) - mean[k]) / deviation : 0.0;
  }
  return z;
}

// Misclassified held-out ordered pairs of one fold.
int64_t relative_fold_error(const Matrix& table, const std::vector<Pair>& train, const std::vector<Pair>& test) {
  const std::vector<double> z = standardize(table, train);
  const PairLogistic model(z, table.rows, table.cols, train);
  const std::vector<double> theta = detail::minimize(model);
  int64_t errors = 0;
  for (const Pair& pair : test) {
    // "i < j" is predicted when the logit is > 0.
    errors += model.logit(theta, pair.i, pair.j) > 0.0 ? 0 : 1;
    errors += model.logit(theta, pair.j, pair.i) > 0.0 ? 1 : 0;
  }
  return errors;
}

double relative_error_unchecked(const Matrix& table, const ProbeOptions& options, int64_t used) {
  const int64_t n = table.rows, folds = options.folds;
  std::mt19937_64 rng(options.seed);
  const std::vector<int64_t> drawn = detail::sample_without_replacement(pair_count(n), used, rng);
  std::vector<std::vector<Pair>> members(static_cast<size_t>(folds));
  for (int64_t t = 0; t < used; ++t) members[t % folds].push_back(pair_at(drawn[t], n));
  std::vector<int64_t> errors(static_cast<size_t>(folds), 0);
  detail::FirstFailure failures;
  // Each L-BFGS evaluation is four passes over z [n, D].
  const double work = static_cast<double>(folds) * detail::kMaxIterations * 4.0 * static_cast<double>(n * table.cols);
  [[maybe_unused]] const bool threads = detail::worth_threads(work);
#pragma omp parallel for schedule(dynamic, 1) if (threads)
  for (int64_t f = 0; f < folds; ++f) {
    failures.run(f, [&] {
      std::vector<Pair> train;
      for (int64_t g = 0; g < folds; ++g)
        if (g != f) train.insert(train.end(), members[g].begin(), members[g].end());
      errors[f] = relative_fold_error(table, train, members[f]);
    });
  }
  failures.rethrow();
  int64_t total = 0;
  for (int64_t e : errors) total += e;
  return static_cast<double>(total) / static_cast<double>(2 * used);
}

// ---- relative, pe-study protocol: Wang & Chen's relative.py ------------------

// Misclassified held-out pairs of one fold, the table unscaled.
int64_t pe_study_fold_errors(const std::vector<double>& z, int64_t rows, int64_t d, std::vector<OrderedPair> train,
                             const std::vector<OrderedPair>& test) {
  // sklearn's C = 1 multiplies the summed log loss: on the mean, l2 = 1 / N.
  const double l2 = 1.0 / static_cast<double>(train.size());
  const PairLogistic model(z, rows, d, std::move(train), l2);
  const std::vector<double> theta = detail::minimize(model, kPeStudyIterations);
  int64_t errors = 0;
  for (const OrderedPair& pair : test) {
    const bool predicted = model.logit(theta, pair.first, pair.second) > 0.0;  // sklearn: class 1 when > 0
    errors += predicted != (pair.label == 1.0) ? 1 : 0;
  }
  return errors;
}

double relative_error_pe_study(const Matrix& table, const ProbeOptions& options, int64_t used) {
  const int64_t rows = std::min(table.rows, kPeStudyRows), d = table.cols, folds = options.folds;
  std::mt19937_64 rng(options.seed);
  // q = i R + j over all R^2 ordered pairs, i = j included (relative.py: y1 = r // 512, y2 = r % 512).
  const std::vector<int64_t> drawn = detail::sample_without_replacement(rows * rows, used, rng);
  std::vector<OrderedPair> samples;
  samples.reserve(static_cast<size_t>(used));
  for (int64_t q : drawn) samples.push_back({q / rows, q % rows, q / rows < q % rows ? 1.0 : 0.0});
  // cross_val_score stratifies a classifier's folds by label: label 0 first, then 1, round-robin.
  std::vector<int64_t> fold(static_cast<size_t>(used));
  int64_t t = 0;
  for (double label : {0.0, 1.0})
    for (int64_t k = 0; k < used; ++k)
      if (samples[k].label == label) fold[k] = t++ % folds;
  const std::vector<double> z(table.values.begin(), table.values.begin() + rows * d);  // first R rows, as they are
  std::vector<double> rates(static_cast<size_t>(folds), 0.0);
  detail::FirstFailure failures;
  const double work = static_cast<double>(folds) * kPeStudyIterations * 4.0 * static_cast<double>(rows * d);
  [[maybe_unused]] const bool threads = detail::worth_threads(work);
#pragma omp parallel for schedule(dynamic, 1) if (threads)
  for (int64_t f = 0; f < folds; ++f) {
    failures.run(f, [&] {
      std::vector<OrderedPair> train, test;
      for (int64_t k = 0; k < used; ++k) (fold[k] == f ? test : train).push_back(samples[k]);
      const int64_t errors = pe_study_fold_errors(z, rows, d, std::move(train), test);
      rates[f] = static_cast<double>(errors) / static_cast<double>(test.size());
    });
  }
  failures.rethrow();
  double sum = 0.0;
  for (double rate : rates) sum += rate;
  return sum / static_cast<double>(folds);  // the mean of the folds' rates, as cross_val_score(...).mean()
}

// The default protocol is scale-free and runs on `scaled` (the table scaled by
// a power of two when extreme); pe-study reads the table as it is.
double relative_error_of(const Matrix& original, const Matrix& scaled, const ProbeOptions& options, int64_t used) {
  if (options.protocol == ProbeProtocol::kPeStudy) return relative_error_pe_study(original, options, used);
  return relative_error_unchecked(scaled, options, used);
}

}  // namespace

// Both probes are scale-free under the default protocol (ridge lambda follows
// trace(Xc^T Xc); columns are standardized), but their sums of squares are
// not: an extreme table is probed scaled by a power of two (exact).
ProbeProtocol parse_probe_protocol(std::string_view name) {
  if (name == "default") return ProbeProtocol::kDefault;
  if (name == "pe-study") return ProbeProtocol::kPeStudy;
  fail_argument("probe", "protocol must be default or pe-study, got '", name, "'");
}

std::string probe_protocol_name(ProbeProtocol protocol) {
  validate_protocol(protocol);
  return protocol == ProbeProtocol::kPeStudy ? "pe-study" : "default";
}

double absolute_probe_mae(const Matrix& original, const ProbeOptions& options) {
  validate_protocol(options.protocol);
  validate_folds(original, options.folds);
  const std::optional<Matrix> scaled = detail::normalised_if_extreme(original);
  return absolute_mae_unchecked(scaled ? *scaled : original, options);
}

double relative_probe_error(const Matrix& original, const ProbeOptions& options) {
  validate_protocol(options.protocol);
  validate_folds(original, options.folds);
  const int64_t used = validate_pairs(original, options);
  const std::optional<Matrix> scaled = detail::normalised_if_extreme(original);
  return relative_error_of(original, scaled ? *scaled : original, options, used);
}

ProbeResult probe(const Matrix& original, const ProbeOptions& options) {
  validate_protocol(options.protocol);
  validate_folds(original, options.folds);
  const int64_t used = validate_pairs(original, options);
  const std::optional<Matrix> scaled = detail::normalised_if_extreme(original);
  const Matrix& table = scaled ? *scaled : original;
  ProbeResult result;
  result.absolute_mae = absolute_mae_unchecked(table, options);
  result.relative_error = relative_error_of(original, table, options, used);
  result.folds = options.folds;
  result.seed = options.seed;
  result.pairs = used;
  result.protocol = options.protocol;
  return result;
}

}  // namespace posenc::analysis
