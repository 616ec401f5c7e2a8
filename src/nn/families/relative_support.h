// Internal to the relative-vector family files (shaw.cpp, sinusoidal_relative.cpp, transformer_xl.cpp,
// relative_2d.cpp): the checks of their sizes and the shapes of their tables, in one wording.
#pragma once

#include <c10/util/Exception.h>

#include <cmath>
#include <cstdint>
#include <iomanip>
#include <sstream>
#include <string>
#include <vector>

#include "posenc/kernels/positions.h"
#include "posenc/nn/family_contract.h"

namespace posenc::nn::families {

inline void check_init_std(const char* module, double init_std) {
  TORCH_CHECK_VALUE(std::isfinite(init_std) && init_std >= 0, "[", module, "] init_std must be finite and >= 0, got ",
                    init_std);
}

// A tensor of tables x rows x dim values must stay within the kernels' table limit; long double holds
// 2k+1 exactly for any int64 k.
inline void check_table_size(const char* module, const char* what, int64_t tables, long double rows, int64_t dim) {
  const long double values = static_cast<long double>(tables) * rows * static_cast<long double>(dim);
  std::ostringstream got;
  got << tables << " x " << std::fixed << std::setprecision(0) << rows << " x " << dim;
  TORCH_CHECK_VALUE(values <= static_cast<long double>(kernels::kMaxTableValues), "[", module, "] ", what,
                    " must have at most ", kernels::kMaxTableValues, " values, got ", got.str());
}

// 2k+1 rows for offsets -k..k.
inline long double rows_for(int64_t max_distance) { return 2.0L * static_cast<long double>(max_distance) + 1.0L; }

// [rows, dim] shared by the heads (num_heads 0), or [num_heads, rows, dim].
inline std::vector<int64_t> table_shape(int64_t num_heads, int64_t rows, int64_t dim) {
  if (num_heads == 0) return {rows, dim};
  return {num_heads, rows, dim};
}

// The settings the families share, in their words.
inline SettingSpec max_distance_setting() {
  SettingSpec s = size_setting("max_distance", "K: offsets clipped to [-K, K]");
  s.minimum = 0;
  return s;
}

inline SettingSpec shared_heads_setting() {
  return integer_setting("num_heads", 0, "0: one table shared by the heads; else one per head", kAnyInteger);
}

inline void check_shared_heads(const char* module, int64_t num_heads) {
  TORCH_CHECK_VALUE(num_heads >= 0, "[", module, "] num_heads must be >= 0 (0: one table shared by the heads), got ",
                    num_heads);
}

// values: the setting is `values_enabled` in Python, where values() is the method.
inline SettingSpec values_setting(bool default_value, std::string meaning) {
  SettingSpec s = flag_setting("values", default_value, std::move(meaning));
  s.python_name = "values_enabled";
  return s;
}

}  // namespace posenc::nn::families
