// JSON numbers of the suites' summaries: a statistic that is not finite (a t
// of constant differences, a correlation of a constant sample) is written null.
#pragma once

#include <nlohmann/json.hpp>

#include <cmath>

namespace posenc::experiments {

inline nlohmann::ordered_json number_or_null(double v) {
  return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr);
}

}  // namespace posenc::experiments
