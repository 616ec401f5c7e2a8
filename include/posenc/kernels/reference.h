// Slow, plainly written references in long double, sharing no code with the
// fast kernels: the tests and the benchmarks compare against these.
#pragma once

#include <cstdint>
#include <vector>

#include "posenc/kernels/naive.h"
#include "posenc/kernels/sinusoidal.h"
#include "posenc/kernels/sinusoidal_nd.h"

namespace posenc::kernels::reference {

// [N, D] for positions p (may be fractional), same formula as sinusoidal.h.
std::vector<double> sinusoidal(const std::vector<double>& positions, int64_t dim, double base,
                               double scale, SinusoidalLayout layout);
// Same with caller-given frequencies (D/2 of them).
std::vector<double> sinusoidal_with_omega(const std::vector<double>& positions,
                                          const std::vector<double>& omega, double scale,
                                          SinusoidalLayout layout);
std::vector<double> naive(const NaiveParams& params, const std::vector<int64_t>& positions);
std::vector<double> grid(const SinusoidalGridParams& params, bool three_d);

}  // namespace posenc::kernels::reference
