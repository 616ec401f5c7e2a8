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
  if (kind == ProximityKind::kDot && exponent != 0) {
    const int largest = detail::largest_exponent(s.values);
    if (largest > 0 && largest + 2 * exponent > std::numeric_limits<double>::max_exponent) {
      double biggest = 0.0;
      for (double v : table.values) biggest = std::max(biggest, std::abs(v));
      fail_argument("proximity", "dot proximity must fit in float64, got products beyond 1.8e308 for a table whose ",
                    "largest |value| is ", biggest, " (use cosine proximity, which does not depend on scale)");
    }
    for (double& v : s.values) v = std::ldexp(v, 2 * exponent);
  }
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
