// Internal to the descriptors: how a descriptor file enters the catalog, and
// the builders of parameters and the small helpers the family files share.
#pragma once

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "posenc/nn/encoding_family.h"

namespace posenc::nn::families {

// A file that defines families registers them at load time with one
// namespace-scope `const Registration registered(rank, add);`, so adding a
// family edits no list. add appends the file's families; rank orders the
// files in `posenc encodings` (ascending, each rank once; none 10, input 20-21,
// query/key 30, logit bias 40-80, relative vectors 90-100).
using AddFamilies = void (*)(std::vector<EncodingFamily>&);
struct Registration {
  Registration(int rank, AddFamilies add);
};

// A real setting in [lower, upper] (open ends as flagged); no upper bound by default.
EncodingParameter real(std::string name, double default_value, std::string meaning, double lower, bool lower_open,
                       double upper = 1e300, bool upper_open = false);
// An integer setting >= lower.
EncodingParameter integer(std::string name, int64_t default_value, std::string meaning, int64_t lower);

// The grid biases live on one grid: both lengths must be its cell count,
// "[AlibiBias2d] q_len and k_len must both be height*width = 6, got 5 and 6".
inline void check_grid_lengths(const char* module, const FamilySettings& s, int64_t q_len, int64_t k_len) {
  const int64_t cells = s.integer("height") * s.integer("width");
  TORCH_CHECK_VALUE(q_len == cells && k_len == cells, "[", module, "] q_len and k_len must both be height*width = ",
                    cells, ", got ", q_len, " and ", k_len);
}

// Offsets -(n-1) .. n-1 along one grid axis, int64.
inline at::Tensor axis_offsets(int64_t n) { return at::arange(-(n - 1), n, at::kLong); }

// Decoders: "[FireBias] causal attention needs every query to see a key: q_len must be <= k_len, got 4 and 3".
inline void check_causal_lengths(const char* module, int64_t q_len, int64_t k_len) {
  TORCH_CHECK_VALUE(q_len <= k_len, "[", module,
                    "] causal attention needs every query to see a key: q_len must be <= k_len, got ", q_len, " and ",
                    k_len);
}

// The dense form of offset rows [H, q_len + k_len - 1] (column d + k_len - 1 for d = j - i'):
// [H, q_len, k_len], read at j - i + q_len - 1, -inf on the keys after the query when causal.
inline at::Tensor spread_offset_rows(const at::Tensor& rows, int64_t q_len, int64_t k_len, bool causal) {
  const at::Tensor i = at::arange(q_len, at::kLong).unsqueeze(1), j = at::arange(k_len, at::kLong).unsqueeze(0);
  const at::Tensor column = j - i + (q_len - 1);
  at::Tensor out = rows.index_select(1, column.flatten()).view({rows.size(0), q_len, k_len});
  // Keys after the query: d = column - (k_len - 1) > 0.
  if (causal) out = out.masked_fill(column > k_len - 1, -std::numeric_limits<double>::infinity());
  return out;
}

// Adds a term to what another family may have written in the same slot.
inline void accumulate(at::Tensor& slot, const at::Tensor& value) { slot = slot.defined() ? slot + value : value; }

// Settings several families read.
EncodingParameter base_parameter(std::string meaning);  // "base", > 0
EncodingParameter init_std_parameter();                 // "init_std", >= 0
EncodingParameter max_distance_parameter();             // "max_distance", >= 0
EncodingParameter input_scale_parameter();              // "input_scale", > 0: the sinusoids' amplitude

}  // namespace posenc::nn::families
