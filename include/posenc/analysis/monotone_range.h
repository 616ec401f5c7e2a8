// Monotone range: how far proximity keeps falling from a position.
//
// For row x of S [n, n], r(x) = the largest m in [0, n - 1 - x] with
// S[x, x + k] < S[x, x + k - 1] for every k = 1 .. m (strictly, forward
// offsets). Row x is censored when r(x) = n - 1 - x: proximity still falls at
// the table's end, so the true range is at least r(x). The headline `range` is
// the median (lower median) of r over the uncensored rows; when every row is
// censored it is n - 1 and `all_censored` is set. For a translation-invariant
// S every uncensored row has the same r, which is then the range; for other
// tables the distribution (min, max, mean, per row) says how it varies.
#pragma once

#include <cstdint>
#include <vector>

#include "posenc/analysis/matrix.h"

namespace posenc::analysis {

struct MonotoneRange {
  int64_t range = 0;
  bool all_censored = false;
  int64_t min = 0;    // over uncensored rows (all rows when all_censored)
  int64_t max = 0;
  double mean = 0;
  int64_t uncensored_rows = 0;
  std::vector<int64_t> per_row;  // r(x), x = 0 .. n - 1
};

// Throws as validate_square("monotone range", "matrix", ...) and
// "[monotone range] matrix must be at least 2 x 2, got 1 x 1".
MonotoneRange monotone_range(const Matrix& s);

}  // namespace posenc::analysis
