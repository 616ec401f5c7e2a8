#include "posenc/analysis/translation_fit.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "linear_algebra.h"
#include "parallel.h"
#include "posenc/error.h"
#include "sampling.h"
#include "scaling.h"

namespace posenc::analysis {
namespace {

constexpr int64_t kMaxOperatorDim = 46340;  // floor(sqrt(2^31)), as kernels::translation_matrix
constexpr double kRidge = 1e-10;            // lambda = kRidge * trace(X^T X) / D

void validate_deltas(const Matrix& table, std::span<const int64_t> deltas) {
  require(!deltas.empty(), "translation", "deltas must hold at least 1 delta, got 0");
  const int64_t n = table.rows;
  for (int64_t delta : deltas)
    require(delta >= 1 && delta <= n - 1, "translation", "delta must be in [1, ", n - 1, "] for a table of ", n,
            " positions, got ", delta);
}

// Rows `rows[k] + offset` of the table, gathered into [rows.size(), D].
std::vector<double> gather_rows(const Matrix& table, const std::vector<int64_t>& rows, int64_t offset) {
  const int64_t d = table.cols;
  std::vector<double> out(rows.size() * static_cast<size_t>(d));
  for (size_t k = 0; k < rows.size(); ++k)
    std::copy_n(table.values.data() + (rows[k] + offset) * d, d, out.data() + static_cast<int64_t>(k) * d);
  return out;
}

double squared_norm(const double* v, int64_t count) { return detail::dot(v, v, count); }

// A residual relative to ||Y|| = 0 is 0 / 0: refused, naming the first such delta.
void require_nonzero_targets(const Matrix& table, std::span<const int64_t> deltas) {
  int64_t last = -1;  // the last row holding a non-zero value
  for (int64_t r = table.rows - 1; r >= 0 && last < 0; --r)
    for (int64_t c = 0; c < table.cols; ++c)
      if (table(r, c) != 0.0) {
        last = r;
        break;
      }
  for (int64_t delta : deltas)
    require(last >= delta, "translation", "the targets of delta ", delta, " (rows ", delta, " .. ", table.rows - 1,
            " of the table) must not all be zero, got all zeros: the relative residual is undefined");
}

double relative_residual(double squared_error, double squared_target) {
  return std::sqrt(squared_error / squared_target);
}

// Factors a [size, size] + lambda I, lambda = kRidge * trace / D (raised while
// float64 round-off leaves it not SPD) into `l`; false when the trace is 0
// (no data: T = 0).
bool ridge_factor(const std::vector<double>& a, int64_t size, int64_t dim, std::vector<double>& l) {
  double trace = 0.0;
  for (int64_t i = 0; i < size; ++i) trace += a[i * size + i];
  if (!(trace > 0.0)) return false;
  const double lambda = kRidge * trace / static_cast<double>(dim);
  if (!detail::ridge_cholesky(a, size, lambda, l))
    fail_runtime("translation", "ridge system must be positive definite in float64, got a failed Cholesky ",
                 "factorization for lambda = ", lambda, " .. ", lambda * 1e11);
  return true;
}

// Squared error of the targets PE[test + delta] against predictions [test, D].
double squared_error(const Matrix& table, const std::vector<int64_t>& test, int64_t delta,
                     const std::vector<double>& predicted) {
  const int64_t d = table.cols;
  double sum = 0.0;
  for (size_t k = 0; k < test.size(); ++k) {
    const double* y = table.values.data() + (test[k] + delta) * d;
    const double* f = predicted.data() + static_cast<int64_t>(k) * d;
    for (int64_t j = 0; j < d; ++j) sum += (y[j] - f[j]) * (y[j] - f[j]);
  }
  return sum;
}

double zero_prediction_error(const Matrix& table, const std::vector<int64_t>& test, int64_t delta) {
  return squared_error(table, test, delta, std::vector<double>(test.size() * static_cast<size_t>(table.cols), 0.0));
}

// Dual ridge: Y_test ~ K_test,train (K_train + lambda I)^-1 Y_train, with the
// kernel K = PE PE^T taken from the whole table's Gram matrix.
double dual_fold_error(const Matrix& table, const std::vector<double>& gram, const std::vector<int64_t>& train,
                       const std::vector<int64_t>& test, int64_t delta) {
  const int64_t n = table.rows, d = table.cols;
  const auto nt = static_cast<int64_t>(train.size());
  const auto ne = static_cast<int64_t>(test.size());
  std::vector<double> k(static_cast<size_t>(nt * nt));
  for (int64_t a = 0; a < nt; ++a)
    for (int64_t b = 0; b < nt; ++b) k[a * nt + b] = gram[train[a] * n + train[b]];
  std::vector<double> l;
  if (!ridge_factor(k, nt, d, l)) return zero_prediction_error(table, test, delta);
  std::vector<double> weights(static_cast<size_t>(nt * ne));  // (K + lambda I)^-1 K_train,test
  for (int64_t a = 0; a < nt; ++a)
    for (int64_t b = 0; b < ne; ++b) weights[a * ne + b] = gram[train[a] * n + test[b]];
  detail::cholesky_solve(l.data(), nt, weights.data(), ne);
  const std::vector<double> y_train = gather_rows(table, train, delta);
  std::vector<double> predicted(static_cast<size_t>(ne * d));
  detail::multiply_tn(weights.data(), y_train.data(), nt, ne, d, predicted.data(), false);
  return squared_error(table, test, delta, predicted);
}

// Primal ridge from the folds' partial sums X_g^T X_g and X_g^T Y_g (g != f).
double primal_fold_error(const Matrix& table, const std::vector<double>* xx, const std::vector<double>* xy,
                         int64_t folds, int64_t fold, const std::vector<int64_t>& test, int64_t delta) {
  const int64_t d = table.cols;
  std::vector<double> c(static_cast<size_t>(d * d), 0.0), r(static_cast<size_t>(d * d), 0.0);
  for (int64_t g = 0; g < folds; ++g) {
    if (g == fold) continue;
    for (int64_t i = 0; i < d * d; ++i) c[i] += xx[g][i];
    for (int64_t i = 0; i < d * d; ++i) r[i] += xy[g][i];
  }
  std::vector<double> l;
  if (!ridge_factor(c, d, d, l)) return zero_prediction_error(table, test, delta);
  const auto ne = static_cast<int64_t>(test.size());
  const std::vector<double> x_test = gather_rows(table, test, 0);
  std::vector<double> x_test_t(x_test.size());
  detail::transpose(x_test.data(), ne, d, x_test_t.data());
  std::vector<double> predicted(static_cast<size_t>(ne * d));
  // predicted = X_test A^-1 R with A = X^T X + lambda I, R = X^T Y: solve for
  // whichever of T^T = A^-1 R (D columns) or A^-1 X_test^T (ne columns) is
  // narrower; the same numbers up to round-off, 2 D^2 min(D, ne) for the solve.
  if (ne < d) {
    detail::cholesky_solve(l.data(), d, x_test_t.data(), ne);  // A^-1 X_test^T [D, ne]
    detail::multiply_tn(x_test_t.data(), r.data(), d, ne, d, predicted.data(), false);
  } else {
    detail::cholesky_solve(l.data(), d, r.data(), d);  // r = T^T
    detail::multiply_tn(x_test_t.data(), r.data(), d, ne, d, predicted.data(), false);
  }
  return squared_error(table, test, delta, predicted);
}

struct DeltaFolds {
  int64_t delta = 0;
  std::vector<std::vector<int64_t>> members;  // per fold, ascending p
  std::vector<std::vector<int64_t>> train;    // per fold: every other p, ascending
  bool primal = false;                        // D <= training pairs of every fold
};

}  // namespace

std::vector<int64_t> default_deltas(int64_t positions) {
  const int64_t top = std::max<int64_t>(1, positions / 4);
  std::vector<int64_t> deltas;
  for (int64_t delta = 1; delta <= top; delta *= 2) deltas.push_back(delta);
  return deltas;
}

TranslationResidual translation_residual_exact(const Matrix& original, std::span<const int64_t> deltas,
                                               const std::function<Matrix(int64_t)>& operator_for,
                                               const std::function<void(size_t)>& deltas_done) {
  validate_table("translation", "table", original);
  validate_deltas(original, deltas);
  require_nonzero_targets(original, deltas);
  const std::optional<Matrix> scaled = detail::normalised_if_extreme(original);  // T is linear: same residual
  const Matrix& table = scaled ? *scaled : original;
  const int64_t n = table.rows, d = table.cols;
  TranslationResidual result;
  result.method = "exact";
  for (int64_t delta : deltas) {
    const Matrix t = operator_for(delta);
    const std::string what = "operator for delta " + std::to_string(delta);
    require(t.rows == d && t.cols == d, "translation", what, " must be ", d, " x ", d, ", got ", t.rows, " x ", t.cols);
    validate_table("translation", what, t);
    const int64_t count = n - delta;
    // predicted = X T^T = (X^T)^T T^T
    std::vector<double> x_t(static_cast<size_t>(count * d)), t_t(static_cast<size_t>(d * d));
    detail::transpose(table.values.data(), count, d, x_t.data());
    detail::transpose(t.values.data(), d, d, t_t.data());
    std::vector<double> predicted(static_cast<size_t>(count * d));
    detail::multiply_tn(x_t.data(), t_t.data(), d, count, d, predicted.data(), true);
    const double* y = table.values.data() + delta * d;
    double error = 0.0;
    for (int64_t i = 0; i < count * d; ++i) error += (y[i] - predicted[i]) * (y[i] - predicted[i]);
    const double residual = relative_residual(error, squared_norm(y, count * d));
    result.deltas.push_back(delta);
    result.residuals.push_back(residual);
    result.max_residual = std::max(result.max_residual, residual);
    if (deltas_done) deltas_done(result.deltas.size());
  }
  return result;
}

TranslationResidual translation_residual_fitted(const Matrix& original, std::span<const int64_t> deltas,
                                                int64_t folds, uint64_t seed,
                                                const std::function<void(size_t)>& deltas_done) {
  validate_table("translation", "table", original);
  const int64_t n = original.rows, d = original.cols;
  require(!deltas.empty(), "translation", "deltas must hold at least 1 delta, got 0");
  for (int64_t delta : deltas) {
    require(delta >= 1 && delta <= n - 1, "translation", "delta must be in [1, ", n - 1, "] for a table of ", n,
            " positions, got ", delta);
    require(folds >= 2 && folds <= n - delta, "translation", "folds must be in [2, ", n - delta, "] for delta ", delta,
            " on a table of ", n, " positions, got ", folds);
  }
  require_nonzero_targets(original, deltas);
  // Ridge with lambda proportional to trace(X^T X) is scale-equivariant, and so
  // is the relative residual: a table of 1e200s is fitted as the same table scaled.
  const std::optional<Matrix> scaled = detail::normalised_if_extreme(original);
  const Matrix& table = scaled ? *scaled : original;

  // Folds per delta; the primal form needs D <= the smallest training set.
  std::vector<DeltaFolds> plan;
  bool any_dual = false;
  for (int64_t delta : deltas) {
    DeltaFolds p;
    p.delta = delta;
    const int64_t count = n - delta;
    const std::vector<int64_t> fold = detail::assign_folds(count, folds, seed);
    p.members.resize(static_cast<size_t>(folds));
    p.train.resize(static_cast<size_t>(folds));
    for (int64_t q = 0; q < count; ++q) p.members[fold[q]].push_back(q);
    for (int64_t f = 0; f < folds; ++f)
      for (int64_t q = 0; q < count; ++q)
        if (fold[q] != f) p.train[f].push_back(q);
    p.primal = true;
    for (int64_t f = 0; f < folds; ++f) p.primal = p.primal && d <= static_cast<int64_t>(p.train[f].size());
    any_dual = any_dual || !p.primal;
    plan.push_back(std::move(p));
  }

  std::vector<double> gram;  // PE PE^T [n, n], shared by every dual fit
  if (any_dual) {
    std::vector<double> columns(static_cast<size_t>(n * d));
    detail::transpose(table.values.data(), n, d, columns.data());
    gram.resize(static_cast<size_t>(n * n));
    detail::gram_tn(columns.data(), d, n, gram.data(), true);
  }

  // One delta at a time, so that only its folds' D x D partial sums are held
  // (2 * folds * D^2 doubles; all deltas at once held 2 * deltas * folds * D^2:
  // 16 GB at D = 4096).
  TranslationResidual result;
  result.method = "least-squares";
  std::vector<std::vector<double>> xx(static_cast<size_t>(folds)), xy(static_cast<size_t>(folds));
  std::vector<double> errors(static_cast<size_t>(folds));
  for (const DeltaFolds& p : plan) {
    const double count = static_cast<double>(n - p.delta);
    // multiply-adds, roughly: a min(D, N)^2 max(D, N) solve per fold
    const double work =
        static_cast<double>(folds) * std::min<double>(d, count) * std::min<double>(d, count) * std::max<double>(d, count);
    [[maybe_unused]] const bool threads = detail::worth_threads(work);
    if (p.primal) {
      // Partial sums X_g^T X_g and X_g^T Y_g of every fold g; each product uses every thread.
      for (int64_t g = 0; g < folds; ++g) {
        const std::vector<int64_t>& rows = p.members[g];
        const auto size = static_cast<int64_t>(rows.size());
        const std::vector<double> x = gather_rows(table, rows, 0);
        const std::vector<double> y = gather_rows(table, rows, p.delta);
        xx[g].resize(static_cast<size_t>(d * d));
        xy[g].resize(static_cast<size_t>(d * d));
        detail::gram_tn(x.data(), size, d, xx[g].data(), true);
        detail::multiply_tn(x.data(), y.data(), size, d, d, xy[g].data(), true);
      }
    }
    detail::FirstFailure failures;
#pragma omp parallel for schedule(dynamic, 1) if (threads)
    for (int64_t f = 0; f < folds; ++f) {
      failures.run(f, [&] {
        errors[f] = p.primal ? primal_fold_error(table, xx.data(), xy.data(), folds, f, p.members[f], p.delta)
                             : dual_fold_error(table, gram, p.train[f], p.members[f], p.delta);
      });
    }
    failures.rethrow();
    double error = 0.0;
    for (int64_t f = 0; f < folds; ++f) error += errors[f];
    const double residual =
        relative_residual(error, squared_norm(table.values.data() + p.delta * d, (n - p.delta) * d));
    result.deltas.push_back(p.delta);
    result.residuals.push_back(residual);
    result.max_residual = std::max(result.max_residual, residual);
    if (deltas_done) deltas_done(result.deltas.size());
  }
  return result;
}

Matrix rotation_operator(int64_t dim, std::span<const RotationPair> pairs, int64_t delta) {
  require(dim >= 1 && dim <= kMaxOperatorDim, "translation", "dim must be in [1, ", kMaxOperatorDim,
          "] (a dense dim x dim matrix), got ", dim);
  std::vector<int64_t> owner(static_cast<size_t>(dim), -1);
  for (size_t k = 0; k < pairs.size(); ++k) {
    const RotationPair& pair = pairs[k];
    require(pair.sin_col >= 0 && pair.sin_col < dim, "translation", "pair ", k, " sin_col must be in [0, ", dim - 1,
            "], got ", pair.sin_col);
    require(pair.cos_col >= 0 && pair.cos_col < dim, "translation", "pair ", k, " cos_col must be in [0, ", dim - 1,
            "], got ", pair.cos_col);
    require(pair.sin_col != pair.cos_col, "translation", "pair ", k, " sin_col and cos_col must differ, got ",
            pair.sin_col, " and ", pair.cos_col);
    for (int64_t col : {pair.sin_col, pair.cos_col}) {
      require(owner[col] < 0, "translation", "pair columns must be distinct, got column ", col, " in pairs ",
              owner[col], " and ", k);
      owner[col] = static_cast<int64_t>(k);
    }
    require(std::isfinite(pair.omega), "translation", "pair ", k, " omega must be finite, got ", pair.omega);
  }
  Matrix t(dim, dim);
  for (int64_t i = 0; i < dim; ++i)
    if (owner[i] < 0) t(i, i) = 1.0;
  for (const RotationPair& pair : pairs) {
    // sin(x + a) = sin x cos a + cos x sin a;  cos(x + a) = cos x cos a - sin x sin a
    const double angle = static_cast<double>(delta) * pair.omega;
    const double c = std::cos(angle), s = std::sin(angle);
    t(pair.sin_col, pair.sin_col) = c;
    t(pair.sin_col, pair.cos_col) = s;
    t(pair.cos_col, pair.cos_col) = c;
    t(pair.cos_col, pair.sin_col) = -s;
  }
  return t;
}

}  // namespace posenc::analysis
