#include "posenc/analysis/monotone_range.h"

#include <algorithm>
#include <vector>

#include "posenc/error.h"

namespace posenc::analysis {

MonotoneRange monotone_range(const Matrix& s) {
  validate_square("monotone range", "matrix", s);
  const int64_t n = s.rows;
  require(n >= 2, "monotone range", "matrix must be at least 2 x 2, got ", n, " x ", n);
  MonotoneRange result;
  result.per_row.resize(static_cast<size_t>(n));
  std::vector<int64_t> uncensored;
  for (int64_t x = 0; x < n; ++x) {
    int64_t r = 0;
    while (x + r + 1 < n && s(x, x + r + 1) < s(x, x + r)) ++r;
    result.per_row[x] = r;
    if (r < n - 1 - x) uncensored.push_back(r);
  }
  result.uncensored_rows = static_cast<int64_t>(uncensored.size());
  result.all_censored = uncensored.empty();
  const std::vector<int64_t>& pool = result.all_censored ? result.per_row : uncensored;
  int64_t sum = 0;
  for (int64_t r : pool) sum += r;
  result.min = *std::min_element(pool.begin(), pool.end());
  result.max = *std::max_element(pool.begin(), pool.end());
  result.mean = static_cast<double>(sum) / static_cast<double>(pool.size());
  if (result.all_censored) {
    result.range = n - 1;
  } else {
    std::vector<int64_t> sorted = uncensored;
    const auto lower_median = sorted.begin() + static_cast<std::ptrdiff_t>((sorted.size() - 1) / 2);
    std::nth_element(sorted.begin(), lower_median, sorted.end());
    result.range = *lower_median;
  }
  return result;
}

}  // namespace posenc::analysis
