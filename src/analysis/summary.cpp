#include "posenc/analysis/summary.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "posenc/error.h"

namespace posenc::analysis {
namespace {

template <class T>
double dot(const T* a, const T* b, int64_t n) {
  double sum = 0.0;
  for (int64_t j = 0; j < n; ++j) sum += static_cast<double>(a[j]) * static_cast<double>(b[j]);
  return sum;
}

}  // namespace

template <class T>
TableSummary summarize_table(std::span<const T> values, int64_t rows, int64_t cols) {
  require(rows >= 1, "summary", "rows must be at least 1, got ", rows);
  require(cols >= 1, "summary", "cols must be at least 1, got ", cols);
  require(rows <= static_cast<int64_t>(values.size()) / cols && rows * cols == static_cast<int64_t>(values.size()),
          "summary", "rows x cols must equal the number of values ", values.size(), ", got ", rows, " x ", cols);
  TableSummary s;
  s.rows = rows;
  s.cols = cols;
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  s.min = static_cast<double>(*lo);
  s.max = static_cast<double>(*hi);
  double abs_sum = 0.0;
  for (T v : values) abs_sum += std::abs(static_cast<double>(v));
  s.mean_abs = abs_sum / static_cast<double>(values.size());

  const T* data = values.data();
  double self_sum = 0.0;
  double neighbour_sum = 0.0;
  for (int64_t p = 0; p < rows; ++p) {
    self_sum += dot(data + p * cols, data + p * cols, cols);
    if (p + 1 < rows) neighbour_sum += dot(data + p * cols, data + (p + 1) * cols, cols);
  }
  s.self_dot_mean = self_sum / static_cast<double>(rows);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  s.neighbour_dot_mean = rows > 1 ? neighbour_sum / static_cast<double>(rows - 1) : nan;
  s.neighbour_dot_first = rows > 1 ? dot(data, data + cols, cols) : nan;
  return s;
}

template TableSummary summarize_table<float>(std::span<const float>, int64_t, int64_t);
template TableSummary summarize_table<double>(std::span<const double>, int64_t, int64_t);

}  // namespace posenc::analysis
