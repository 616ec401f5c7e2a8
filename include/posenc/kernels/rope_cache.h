// A cos/sin cache for positions [0, length) that can never be silently stale:
// it remembers the frequencies (and attention factor) it was built with and
// rebuilds whenever the configuration (dim, base, scaling, precision) or the
// regime that seq_len selects (dynamic base, longrope short/long) gives other
// frequencies, or when seq_len exceeds its length.
//
// Unlike Hugging Face's grow-only dynamic cache, the frequencies always are
// those of rope_frequencies(dim, base, scaling, seq_len): the same sequence
// length gives the same numbers whatever was computed before.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "posenc/kernels/rope_scaling.h"
#include "posenc/kernels/sinusoidal.h"  // Precision

namespace posenc::kernels {

struct RopeConfig {
  int64_t dim = 0;  // rotary dimension R
  double base = 10000.0;
  RopeScaling scaling;
  Precision precision = Precision::kExact;
};

template <class T>  // float or double
class RopeCache {
 public:
  // Validates; builds nothing yet.
  explicit RopeCache(RopeConfig config);

  // Replaces the configuration (validated); the next ensure() rebuilds if the
  // frequencies differ.
  void reconfigure(RopeConfig config);

  // Makes cos()/sin() cover positions [0, seq_len) in the regime of seq_len
  // (> 0). Returns true when it rebuilt. When only the length grows (same
  // frequencies), the new length is max(seq_len, 2 * length()) to amortize.
  bool ensure(int64_t seq_len);

  const RopeConfig& config() const noexcept { return config_; }
  const RopeFrequencies& frequencies() const noexcept { return frequencies_; }
  int64_t length() const noexcept { return length_; }
  // [length, R/2] each, attention factor included.
  std::span<const T> cos() const noexcept { return cos_; }
  std::span<const T> sin() const noexcept { return sin_; }
  // Incremented on every rebuild, so a holder of an older span can tell.
  uint64_t version() const noexcept { return version_; }

 private:
  RopeConfig config_;
  RopeFrequencies frequencies_;
  int64_t length_ = 0;
  std::vector<T> cos_, sin_;
  uint64_t version_ = 0;
  // What the table was built under, to tell cheaply whether ensure() must
  // recompute the frequencies: reconfigure() since, and the seq_len regime.
  bool config_changed_ = false;
  int64_t regime_key_ = 0;
  Precision built_precision_ = Precision::kExact;
};

extern template class RopeCache<float>;
extern template class RopeCache<double>;

}  // namespace posenc::kernels
