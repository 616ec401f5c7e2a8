// Internal: fills rows of (sin, cos) pairs for given frequencies. Shared by
// the sinusoidal, learnable-frequency and grid encodings, so the angle
// handling of DESIGN.md §3 exists once.
#pragma once

#include <cstdint>
#include <span>

#include "posenc/kernels/sinusoidal.h"

namespace posenc::kernels::detail {

struct SinusoidRows {
  std::span<const double> omega;  // D/2 frequencies
  double scale = 1.0;             // amplitude
  SinusoidalLayout layout = SinusoidalLayout::kInterleaved;
  Precision precision = Precision::kExact;
  int64_t row_stride = 0;         // distance between output rows (>= 2 * omega.size())
};

// Positions start + r*step for r in [0, count). With exact precision this uses
// a double rotation recurrence re-anchored from exact angles every 64 rows.
template <class T>
void sinusoid_rows_arithmetic(const SinusoidRows& rows, double start, double step, int64_t count,
                              T* out);

// Positions given one by one (exactly representable as double).
template <class T>
void sinusoid_rows_list(const SinusoidRows& rows, const double* positions, int64_t count,
                        T* out);

// As above, from int64 positions.
template <class T>
void sinusoid_rows_list(const SinusoidRows& rows, const int64_t* positions, int64_t count,
                        T* out);

}  // namespace posenc::kernels::detail
