// Shared by the RoPE kernel tests.
#pragma once

#include <cstdint>
#include <span>

#include "posenc/kernels/rope.h"

namespace posenc::test {

// A spec with the given frequencies (and axes); everything else default.
inline kernels::RopeTableSpec spec_of(std::span<const double> omega, std::span<const int32_t> axis_of = {},
                                      int64_t n_axes = 1) {
  kernels::RopeTableSpec spec;
  spec.omega = omega;
  spec.axis_of = axis_of;
  spec.n_axes = n_axes;
  return spec;
}

}  // namespace posenc::test
