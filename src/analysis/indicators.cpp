#include "posenc/analysis/indicators.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "parallel.h"
#include "posenc/error.h"
#include "scaling.h"

namespace posenc::analysis {
namespace {

constexpr double kConstantBand = 1e-12;  // relative spread below which the band counts as constant

// "a" or "an" before n read aloud: an 8, an 11, an 18, an 80..89, an 800..899
// (and the same leading groups of thousands: an 8000, an 11000).
const char* article(int64_t n) {
  int64_t lead = n;
  while (lead >= 1000) lead /= 1000;
  const bool vowel =
      lead == 8 || lead == 11 || lead == 18 || (lead >= 80 && lead <= 89) || (lead >= 800 && lead <= 899);
  return vowel ? "an" : "a";
}

// Spearman's rho of (i, v[i]), i = 0 .. L-1, L >= 2; ties in v take their mean
// rank, 0 when v is constant. Ranks are multiples of 1/2, so every sum below
// is exact and a strictly monotone v gives exactly -1 or 1.
double spearman_with_index(const std::vector<double>& v, std::vector<int64_t>& order, std::vector<double>& rank) {
  const auto length = static_cast<int64_t>(v.size());
  order.resize(v.size());
  rank.resize(v.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return v[a] < v[b]; });
  for (int64_t start = 0; start < length;) {
    int64_t end = start + 1;
    while (end < length && v[order[end]] == v[order[start]]) ++end;
    const double mean_rank = 0.5 * static_cast<double>(start + 1 + end);  // of ranks start+1 .. end
    for (int64_t k = start; k < end; ++k) rank[order[k]] = mean_rank;
    start = end;
  }
  const double centre = 0.5 * static_cast<double>(length + 1);
  double cross = 0.0, spread_m = 0.0, spread_v = 0.0;
  for (int64_t m = 0; m < length; ++m) {
    const double dm = static_cast<double>(m + 1) - centre;
    const double dv = rank[m] - centre;
    cross += dm * dv;
    spread_m += dm * dm;
    spread_v += dv * dv;
  }
  if (spread_v == 0.0) return 0.0;
  return cross / std::sqrt(spread_m * spread_v);
}

// Pairs i < j of v with v[j] > v[i] ("rises") and with v[j] == v[i] ("ties"),
// counted by a bottom-up merge sort in O(L log L): a row of 8192 offsets has
// 3e7 pairs. Sorts v.
struct PairCounts {
  int64_t rises = 0, ties = 0;
};
PairCounts count_rising_pairs(std::vector<double>& v, std::vector<double>& buffer) {
  const size_t length = v.size();
  buffer.resize(length);
  PairCounts counts;
  for (size_t width = 1; width < length; width *= 2) {
    for (size_t lo = 0; lo + width < length; lo += 2 * width) {
      const size_t mid = lo + width, hi = std::min(lo + 2 * width, length);
      size_t i = lo, out = lo;
      for (size_t j = mid; j < hi; ++j) {
        // Left-run entries come from smaller offsets; those below v[j] rise to it.
        while (i < mid && v[i] < v[j]) buffer[out++] = v[i++];
        counts.rises += static_cast<int64_t>(i - lo);
        buffer[out++] = v[j];
      }
      while (i < mid) buffer[out++] = v[i++];
      std::copy(buffer.begin() + static_cast<std::ptrdiff_t>(lo), buffer.begin() + static_cast<std::ptrdiff_t>(hi),
                v.begin() + static_cast<std::ptrdiff_t>(lo));
    }
  }
  for (size_t start = 0; start < length;) {
    size_t end = start + 1;
    while (end < length && v[end] == v[start]) ++end;
    const auto group = static_cast<int64_t>(end - start);
    counts.ties += group * (group - 1) / 2;
    start = end;
  }
  return counts;
}

struct MonotoneReadings {
  double monotonicity = 0.0;
  double violation_rate = 0.5;
};

// Offsets start at m = 1: S[x, x] (|PE[x]|^2, or 1 under cosine) tops its row
// by construction, and ranking it gave every row a free "fall" (+0.05 .. +0.09
// on i.i.d. Gaussian tables, where the ranks of m >= 1 are exchangeable).
MonotoneReadings monotonicity(const Matrix& s, int64_t window) {
  const int64_t n = s.rows;
  // rho per (row, direction); NaN marks a sequence that does not exist (M < 2).
  std::vector<double> rho(static_cast<size_t>(2 * n), std::nan(""));
  // 2 rises + ties per (row, direction): integers, so the pooled rate is exact.
  std::vector<int64_t> doubled_violations(static_cast<size_t>(2 * n), 0);
  [[maybe_unused]] const bool threads = detail::worth_threads(16.0 * n * n);  // ~ sorting 2n rows of n, twice
#pragma omp parallel if (threads)
  {
    std::vector<double> v;
    std::vector<int64_t> order;
    std::vector<double> rank, buffer;
#pragma omp for schedule(dynamic, 8)
    for (int64_t x = 0; x < n; ++x) {
      for (int64_t dir = 0; dir < 2; ++dir) {
        const int64_t sign = dir == 0 ? 1 : -1;
        const int64_t reach = dir == 0 ? n - 1 - x : x;
        const int64_t last = std::min(window, reach);
        if (last < 2) continue;
        v.resize(static_cast<size_t>(last));
        for (int64_t m = 1; m <= last; ++m) v[m - 1] = s(x, x + sign * m);
        rho[2 * x + dir] = spearman_with_index(v, order, rank);
        const PairCounts counts = count_rising_pairs(v, buffer);  // sorts v: after rho
        doubled_violations[2 * x + dir] = 2 * counts.rises + counts.ties;
      }
    }
  }
  double sum = 0.0;
  int64_t count = 0, doubled_pairs = 0, doubled_violated = 0;
  for (int64_t k = 0; k < 2 * n; ++k) {
    if (std::isnan(rho[k])) continue;
    const int64_t x = k / 2;
    const int64_t length = std::min(window, k % 2 == 0 ? n - 1 - x : x);
    sum += rho[k];
    ++count;
    doubled_pairs += length * (length - 1);
    doubled_violated += doubled_violations[k];
  }
  MonotoneReadings readings;
  // No sequence (W = 1, or n = 2): nothing to rank, no evidence of a trend.
  if (count == 0) return readings;
  readings.monotonicity = 0.0 - sum / static_cast<double>(count);  // 0 - x: never -0
  readings.violation_rate = static_cast<double>(doubled_violated) / static_cast<double>(doubled_pairs);
  return readings;
}

// Sums of squares over the band B: within the diagonals, and about B's mean.
struct BandSpread {
  double within = 0.0, total = 0.0;
};

// Sums are shifted by a value of the group, so a constant group has exactly zero spread.
BandSpread band_spread(const Matrix& m, double scale, int64_t window) {
  const int64_t n = m.rows;
  auto s = [&m, scale](int64_t x, int64_t y) { return m(x, y) * scale; };
  double total_shift = s(0, 1);
  double shifted_sum = 0.0;
  int64_t count = 0;
  double within = 0.0;
  for (int64_t d = -window; d <= window; ++d) {
    if (d == 0) continue;
    const int64_t x0 = std::max<int64_t>(0, -d);
    const int64_t x1 = std::min(n, n - d);
    const double shift = s(x0, x0 + d);
    double diagonal_sum = 0.0;
    for (int64_t x = x0; x < x1; ++x) {
      diagonal_sum += s(x, x + d) - shift;
      shifted_sum += s(x, x + d) - total_shift;
    }
    const double mean = shift + diagonal_sum / static_cast<double>(x1 - x0);
    for (int64_t x = x0; x < x1; ++x) within += (s(x, x + d) - mean) * (s(x, x + d) - mean);
    count += x1 - x0;
  }
  const double mean = total_shift + shifted_sum / static_cast<double>(count);
  double total = 0.0;
  for (int64_t d = -window; d <= window; ++d) {
    if (d == 0) continue;
    for (int64_t x = std::max<int64_t>(0, -d); x < std::min(n, n - d); ++x)
      total += (s(x, x + d) - mean) * (s(x, x + d) - mean);
  }
  return {within, total};
}

// Lin's concordance of a = S[x, x + m] and b = S[x, x - m].
double symmetry(const Matrix& m, double scale, int64_t window) {
  const int64_t n = m.rows;
  auto s = [&m, scale](int64_t x, int64_t y) { return m(x, y) * scale; };
  if (n < 3) return 1.0;  // no pair exists: nothing contradicts symmetry
  const double a0 = s(1, 2), b0 = s(1, 0);
  double sum_a = 0.0, sum_b = 0.0;
  int64_t count = 0;
  for (int64_t x = 1; x < n - 1; ++x) {
    const int64_t last = std::min({window, x, n - 1 - x});
    for (int64_t m = 1; m <= last; ++m) {
      sum_a += s(x, x + m) - a0;
      sum_b += s(x, x - m) - b0;
      ++count;
    }
  }
  const double mean_a = a0 + sum_a / static_cast<double>(count);
  const double mean_b = b0 + sum_b / static_cast<double>(count);
  double var_a = 0.0, var_b = 0.0, cov = 0.0;
  for (int64_t x = 1; x < n - 1; ++x) {
    const int64_t last = std::min({window, x, n - 1 - x});
    for (int64_t m = 1; m <= last; ++m) {
      const double da = s(x, x + m) - mean_a;
      const double db = s(x, x - m) - mean_b;
      var_a += da * da;
      var_b += db * db;
      cov += da * db;
    }
  }
  const double c = static_cast<double>(count);
  const double gap = mean_a - mean_b;
  const double denominator = var_a / c + var_b / c + gap * gap;
  if (denominator == 0.0) return 1.0;
  return std::clamp(2.0 * (cov / c) / denominator, -1.0, 1.0);
}

}  // namespace

bool constant_on_band(const Matrix& s, int64_t window) {
  // Constant up to round-off: rows equal up to rounding (cosine of rows that are
  // multiples of one another) give a band of 1 +- a few ulps, whose "variance"
  // is noise. Halves keep hi - lo finite for any finite S.
  const int64_t n = s.rows;
  double lo = s(0, 1), hi = s(0, 1);
  for (int64_t x = 0; x < n; ++x) {
    for (int64_t y = std::max<int64_t>(0, x - window); y <= std::min(n - 1, x + window); ++y) {
      if (y == x) continue;
      lo = std::min(lo, s(x, y));
      hi = std::max(hi, s(x, y));
    }
  }
  return 0.5 * hi - 0.5 * lo <= kConstantBand * 0.5 * std::max(std::abs(lo), std::abs(hi));
}

Indicators indicators(const Matrix& s, std::optional<int64_t> window) {
  validate_square("indicators", "matrix", s);
  const int64_t n = s.rows;
  require(n >= 2, "indicators", "matrix must be at least 2 x 2, got ", n, " x ", n);
  const int64_t w = window.value_or(n - 1);
  require(w >= 1 && w <= n - 1, "indicators", "window must be in [1, ", n - 1, "] for ", article(n), " ", n, " x ", n,
          " matrix, got ", w);
  if (constant_on_band(s, w)) {
    fail_argument("indicators", "matrix must vary over the offsets 1 .. ", w, " (1 <= |y - x| <= ", w,
                  "), got S[x, y] = ", s(0, 1), " there to within 1e-12 (relative): the indicators are undefined");
  }
  Indicators result;
  result.window = w;
  const MonotoneReadings monotone = monotonicity(s, w);
  result.monotonicity = monotone.monotonicity;
  result.monotonicity_violation_rate = monotone.violation_rate;
  // The variances below are of S scaled by 2^-e (exact): S of a table times
  // 1e80 has values ~1e160 whose squares would overflow.
  const double scale = detail::normalising_factor(s.values);
  const BandSpread spread = band_spread(s, scale, w);
  // The share is its own quotient, not 1 - TI: 1 - (1 - 1e-20) is 0 in
  // float64. total = 0 is unreachable here (a constant band was refused above).
  const double share = spread.total == 0.0 ? 0.0 : std::clamp(spread.within / spread.total, 0.0, 1.0);
  result.translation_invariance = std::clamp(1.0 - share, 0.0, 1.0);
  result.within_diagonal_variance_share = share;
  result.symmetry = symmetry(s, scale, w);
  return result;
}

}  // namespace posenc::analysis
