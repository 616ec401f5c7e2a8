// The cos/sin cache: rebuilt whenever the frequencies it would use for the
// requested length differ (in any bit) from those it holds, or the length
// exceeds it. Tables are always built whole from position 0, so a cache's
// contents depend only on (config, frequencies, length), never on history.
#include "posenc/kernels/rope_cache.h"

#include <algorithm>
#include <optional>

#include "posenc/error.h"
#include "posenc/kernels/positions.h"  // kMaxTableValues
#include "posenc/kernels/rope.h"

namespace posenc::kernels {
namespace {

constexpr const char* kOp = "rope";

// What seq_len changes in the frequencies: the effective length of dynamic
// (max(seq_len, L0)), the long/short choice of longrope, nothing otherwise.
// Equal keys under one configuration mean equal frequencies.
int64_t regime_key(const RopeScaling& s, int64_t seq_len) {
  switch (s.type) {
    case RopeType::kDynamic: return std::max(seq_len, *s.original_max_position_embeddings);
    case RopeType::kLongrope: return seq_len > *s.original_max_position_embeddings ? 1 : 0;
    default: return 0;
  }
}

bool same_frequencies(const RopeFrequencies& a, const RopeFrequencies& b) {
  return a.attention_factor == b.attention_factor && a.inv_freq == b.inv_freq;
}

}  // namespace

template <class T>
RopeCache<T>::RopeCache(RopeConfig config) : config_(std::move(config)) {
  validate(config_.scaling, config_.dim, config_.base, kOp);
}

template <class T>
void RopeCache<T>::reconfigure(RopeConfig config) {
  validate(config.scaling, config.dim, config.base, kOp);
  config_ = std::move(config);
  config_changed_ = true;
}

template <class T>
bool RopeCache<T>::ensure(int64_t seq_len) {
  require(seq_len >= 1, kOp, "seq_len must be positive, got ", seq_len);
  const int64_t key = regime_key(config_.scaling, seq_len);
  std::optional<RopeFrequencies> changed;  // set when the table must be rebuilt with other frequencies
  if (version_ == 0 || config_changed_ || key != regime_key_) {
    RopeFrequencies wanted = rope_frequencies(config_.dim, config_.base, config_.scaling, seq_len, kOp);
    // A new precision changes the table even when the frequencies agree.
    if (version_ == 0 || config_.precision != built_precision_ || !same_frequencies(wanted, frequencies_)) {
      changed = std::move(wanted);
    } else {
      config_changed_ = false;
      regime_key_ = key;
    }
  }
  if (!changed && seq_len <= length_) return false;

  // Growth alone doubles (amortized O(1) per position over a decode loop);
  // new frequencies invalidate every row, so build exactly what is asked.
  const int64_t length = changed ? seq_len : std::max(seq_len, 2 * length_);
  const RopeFrequencies& f = changed ? *changed : frequencies_;
  const int64_t half = config_.dim / 2;
  require(length <= kMaxTableValues / half, kOp, "cache length x dim/2 must be at most ", kMaxTableValues,
          " values, got ", length, " x ", half);
  RopeTableSpec spec;
  spec.omega = f.inv_freq;
  spec.attention_factor = f.attention_factor;
  spec.precision = config_.precision;
  // Fresh buffers, committed only after the build: a throw (bad_alloc)
  // leaves the cache exactly as it was, never half updated.
  std::vector<T> cos(static_cast<size_t>(length * half));
  std::vector<T> sin(cos.size());
  rope_cos_sin_range<T>(spec, 0, length, cos.data(), sin.data());
  if (changed) {
    frequencies_ = std::move(*changed);
    config_changed_ = false;
    regime_key_ = key;
    built_precision_ = config_.precision;
  }
  cos_ = std::move(cos);
  sin_ = std::move(sin);
  length_ = length;
  ++version_;
  return true;
}

template class RopeCache<float>;
template class RopeCache<double>;

}  // namespace posenc::kernels
