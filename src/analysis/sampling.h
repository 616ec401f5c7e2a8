// Seeded randomness of posenc::analysis (private). std::mt19937_64, whose
// output the C++ standard fixes, with our own bounded draw and shuffles (the
// standard distributions and std::shuffle differ between libraries), so a
// seed gives the same folds and pairs everywhere. docs/analysis.md spells
// the rules out so that a test or another language can reproduce them.
#pragma once

#include <cstdint>
#include <random>
#include <unordered_map>
#include <utility>
#include <vector>

namespace posenc::analysis::detail {

// Uniform in [0, bound), bound >= 1: draw r until r >= 2^64 mod bound, return r mod bound.
inline uint64_t uniform_below(std::mt19937_64& rng, uint64_t bound) {
  const uint64_t threshold = (uint64_t{0} - bound) % bound;
  for (;;) {
    const uint64_t r = rng();
    if (r >= threshold) return r % bound;
  }
}

// fold[p] for p = 0 .. count-1: 0 .. count-1 shuffled by Fisher-Yates driven by
// mt19937_64(seed) (for i = count-1 down to 1: swap entries i and
// uniform_below(i + 1)); the t-th entry of the shuffled order goes to fold t mod folds.
inline std::vector<int64_t> assign_folds(int64_t count, int64_t folds, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> order(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) order[i] = i;
  for (int64_t i = count - 1; i >= 1; --i) std::swap(order[i], order[uniform_below(rng, static_cast<uint64_t>(i + 1))]);
  std::vector<int64_t> fold(static_cast<size_t>(count));
  for (int64_t t = 0; t < count; ++t) fold[order[t]] = t % folds;
  return fold;
}

// The first `count` entries of a uniform random permutation of 0 .. total-1:
// partial Fisher-Yates (for t = 0 .. count-1: swap entries t and
// t + uniform_below(total - t)) over a virtual array, storing only the entries it moved.
inline std::vector<int64_t> sample_without_replacement(int64_t total, int64_t count, std::mt19937_64& rng) {
  std::unordered_map<int64_t, int64_t> moved;
  auto at = [&](int64_t i) {
    const auto it = moved.find(i);
    return it == moved.end() ? i : it->second;
  };
  std::vector<int64_t> sample(static_cast<size_t>(count));
  for (int64_t t = 0; t < count; ++t) {
    const int64_t j = t + static_cast<int64_t>(uniform_below(rng, static_cast<uint64_t>(total - t)));
    const int64_t value_j = at(j);
    moved[j] = at(t);
    moved[t] = value_j;
    sample[t] = value_j;
  }
  return sample;
}

}  // namespace posenc::analysis::detail
