#include "posenc/analysis/proximity.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "linear_algebra.h"
#include "parallel.h"
#include "posenc/error.h"
#include "scaling.h"

namespace posenc::analysis {

std::string_view proximity_kind_name(ProximityKind kind) noexcept {
  return kind == ProximityKind::kCosine ? "cosine" : "dot";
}

ProximityKind parse_proximity_kind(std::string_view name) {
  if (name == "dot") return ProximityKind::kDot;
  if (name == "cosine") return ProximityKind::kCosine;
  fail_argument("proximity", "kind must be dot or cosine, got '", std::string(name), "'");
}

namespace {

// Dot proximity computed on the table scaled by 2^-exponent, brought back by
// 4^exponent (exact), refused when that exceeds float64.
void scale_back(const Matrix& table, std::vector<double>& values, int exponent) {
  if (exponent == 0) return;
  const int largest = detail::largest_exponent(values);
  if (largest + 2 * exponent > std::numeric_limits<double>::max_exponent) {
    double biggest = 0.0;
    for (double v : table.values) biggest = std::max(biggest, std::abs(v));
    fail_argument("proximity", "dot proximity must fit in float64, got products beyond 1.8e308 for a table whose ",
                  "largest |value| is ", biggest, " (use cosine proximity, which does not depend on scale)");
  }
  for (double& v : values) v = std::ldexp(v, 2 * exponent);
}

}  // namespace

std::vector<double> proximity_row(const Matrix& table, int64_t row, ProximityKind kind) {
  validate_table("proximity", "table", table);
  const int64_t n = table.rows;
  const int64_t d = table.cols;
  require(row >= 0 && row < n, "proximity", "row must be in [0, ", n - 1, "] for a table of ", n, " positions, got ",
          row);
  std::vector<double> columns(static_cast<size_t>(n * d));
  detail::transpose(table.values.data(), n, d, columns.data());
  const int exponent = detail::largest_exponent(columns);
  if (exponent != 0)
    for (double& v : columns) v = std::ldexp(v, -exponent);
  // S[row, j] = sum_t PE^T[t, j] PE^T[t, row]: the sums of proximity(), in the same order.
  std::vector<double> reference(static_cast<size_t>(d));
  for (int64_t t = 0; t < d; ++t) reference[t] = columns[t * n + row];
  std::vector<double> out(static_cast<size_t>(n));
  detail::multiply_tn(columns.data(), reference.data(), d, n, 1, out.data(), true);
  if (kind == ProximityKind::kDot) {
    scale_back(table, out, exponent);
    return out;
  }
  const double self = std::sqrt(out[row]);
  for (int64_t j = 0; j < n; ++j) {
    double squared = 0.0;
    for (int64_t t = 0; t < d; ++t) {
      const double v = std::ldexp(table(j, t), -exponent);  // the scaled value, read along the row
      squared += v * v;
    }
    const double denom = self * std::sqrt(squared);
    out[j] = denom > 0.0 ? out[j] / denom : 0.0;
  }
  return out;
}

Matrix proximity(const Matrix& table, ProximityKind kind) {
  validate_table("proximity", "table", table);
  const int64_t n = table.rows;
  const int64_t d = table.cols;
  // S = PE PE^T is the Gram matrix of the columns of PE^T [d, n].
  std::vector<double> columns(static_cast<size_t>(n * d));
  detail::transpose(table.values.data(), n, d, columns.data());
  // Both kinds run on the table scaled by 2^-e (exact), the largest |value|
  // brought into [0.5, 1), so that no product or squared norm overflows or
  // underflows; dot proximity is scaled back by 4^e once at the end.
  const int exponent = detail::largest_exponent(columns);
  if (exponent != 0)
    for (double& v : columns) v = std::ldexp(v, -exponent);
  Matrix s(n, n);
  detail::gram_tn(columns.data(), d, n, s.values.data(), true);
  if (kind == ProximityKind::kDot) scale_back(table, s.values, exponent);
  if (kind == ProximityKind::kCosine) {
    std::vector<double> norm(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) norm[i] = std::sqrt(s(i, i));
    // norm[i] * norm[j] commutes, so the cosine matrix stays exactly symmetric.
    [[maybe_unused]] const bool threads = detail::worth_threads(4.0 * n * n);
#pragma omp parallel for schedule(static) if (threads)
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        const double denom = norm[i] * norm[j];
        s(i, j) = denom > 0.0 ? s(i, j) / denom : 0.0;
      }
    }
  }
  return s;
}

}  // namespace posenc::analysis
