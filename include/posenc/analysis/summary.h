// A few numbers that describe a position table PE of shape [rows, cols]
// (one row per position): its value range, and how similar neighbouring
// positions are compared with a position and itself.
//
//   self_dot_mean       = mean_p   PE[p] . PE[p]          (p = 0 .. rows-1)
//   neighbour_dot_mean  = mean_p   PE[p] . PE[p+1]        (p = 0 .. rows-2)
//   neighbour_dot_first = PE[0] . PE[1]
//
// For the sinusoidal encoding every row has PE[p] . PE[p] = s^2 D/2 and
// PE[p] . PE[p+1] = s^2 sum_i cos(omega_i), the same for every p (Vaswani et
// al. 2017; Wang et al., ICLR 2021, "translation invariance"); for the index
// encoding both grow with p. Sums run in double.
#pragma once

#include <cstdint>
#include <span>

namespace posenc::analysis {

struct TableSummary {
  int64_t rows = 0;
  int64_t cols = 0;
  double min = 0.0;
  double max = 0.0;
  double mean_abs = 0.0;  // mean |PE[p, j]|
  double self_dot_mean = 0.0;
  double neighbour_dot_mean = 0.0;   // NaN when rows == 1
  double neighbour_dot_first = 0.0;  // NaN when rows == 1
};

// values: rows*cols, row-major. Throws "[summary] rows must be at least 1,
// got 0" (likewise cols) and on a size mismatch.
template <class T>
TableSummary summarize_table(std::span<const T> values, int64_t rows, int64_t cols);

}  // namespace posenc::analysis
