// The RoPE table of positions start .. start+count-1 as rows of R values:
// cos(p * w_i) * a in columns [0, R/2), sin(p * w_i) * a in [R/2, R), the
// layout the rope-table command and the report's RoPE source both publish.
// The frequencies are those of `config` at seq_len (range_seq_len when unset:
// Hugging Face's max position + 1), a its attention factor.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "posenc/kernels/rope_cache.h"  // RopeConfig

namespace posenc::kernels {

template <class T>
struct RopeRangeTable {
  RopeFrequencies frequencies;  // what the rows were built from
  std::vector<T> values;        // count * dim, row-major
};

// Validates config and the table size before allocating; `op` names the
// caller in errors. The cos/sin scratch holds at most max_scratch_values
// values each, however long the range.
template <class T>  // float or double
RopeRangeTable<T> rope_range_rows(const RopeConfig& config, std::optional<int64_t> seq_len, int64_t start,
                                  int64_t count, const char* op = "rope",
                                  int64_t max_scratch_values = int64_t{1} << 22);

extern template RopeRangeTable<float> rope_range_rows<float>(const RopeConfig&, std::optional<int64_t>, int64_t,
                                                             int64_t, const char*, int64_t);
extern template RopeRangeTable<double> rope_range_rows<double>(const RopeConfig&, std::optional<int64_t>, int64_t,
                                                               int64_t, const char*, int64_t);

}  // namespace posenc::kernels
