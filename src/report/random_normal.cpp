#include "random_normal.h"

#include <cmath>
#include <numbers>

namespace posenc::report::detail {
namespace {

struct SplitMix64 {
  uint64_t state;
  uint64_t next() noexcept {
    uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  // Uniform in (0, 1]: 53 random bits, never 0, so log() stays finite.
  double uniform() noexcept { return (static_cast<double>(next() >> 11) + 1.0) * 0x1.0p-53; }
};

}  // namespace

std::vector<double> normal_values(size_t count, double std, uint64_t seed) {
  std::vector<double> v(count);
  SplitMix64 rng{seed};
  for (size_t k = 0; k < count; k += 2) {
    const double r = std * std::sqrt(-2.0 * std::log(rng.uniform()));
    const double angle = 2.0 * std::numbers::pi * rng.uniform();
    v[k] = r * std::cos(angle);
    if (k + 1 < count) v[k + 1] = r * std::sin(angle);
  }
  return v;
}

}  // namespace posenc::report::detail
