// Seeded N(0, std^2) draws that every platform reproduces: splitmix64
// (Steele et al. 2014) and Box-Muller, not std::normal_distribution (whose
// algorithm the C++ standard leaves to the library).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace posenc::report::detail {

std::vector<double> normal_values(size_t count, double std, uint64_t seed);

}  // namespace posenc::report::detail
