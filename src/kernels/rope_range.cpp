#include "posenc/kernels/rope_range.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "posenc/error.h"
#include "posenc/kernels/positions.h"
#include "posenc/kernels/rope.h"
#include "posenc/kernels/rope_seq_len.h"

namespace posenc::kernels {

template <class T>
RopeRangeTable<T> rope_range_rows(const RopeConfig& config, std::optional<int64_t> seq_len, int64_t start,
                                  int64_t count, const char* op, int64_t max_scratch_values) {
  RopeFrequencies f =
      rope_frequencies(config.dim, config.base, config.scaling, range_seq_len(seq_len, start, count), op);
  validate_table_size(op, Positions::range(start, count), config.dim);
  require(max_scratch_values >= 1, op, "max_scratch_values must be positive, got ", max_scratch_values);
  RopeTableSpec spec;
  spec.omega = f.inv_freq;
  spec.attention_factor = f.attention_factor;
  spec.precision = config.precision;

  const int64_t dim = config.dim;
  const int64_t half = dim / 2;
  std::vector<T> out(static_cast<size_t>(count * dim));
  const int64_t batch_rows = std::max<int64_t>(1, max_scratch_values / half);
  std::vector<T> cos(static_cast<size_t>(std::min(count, batch_rows) * half));
  std::vector<T> sin(cos.size());
  for (int64_t first = 0; first < count; first += batch_rows) {
    const int64_t n = std::min(batch_rows, count - first);
    rope_cos_sin_range<T>(spec, start + first, n, cos.data(), sin.data());
    for (int64_t r = 0; r < n; ++r) {
      T* row = out.data() + (first + r) * dim;
      std::copy_n(cos.data() + r * half, half, row);
      std::copy_n(sin.data() + r * half, half, row + half);
    }
  }
  return {std::move(f), std::move(out)};
}

template RopeRangeTable<float> rope_range_rows<float>(const RopeConfig&, std::optional<int64_t>, int64_t, int64_t,
                                                      const char*, int64_t);
template RopeRangeTable<double> rope_range_rows<double>(const RopeConfig&, std::optional<int64_t>, int64_t, int64_t,
                                                        const char*, int64_t);

}  // namespace posenc::kernels
