// JSON numbers of the suites' summaries: a statistic that is not finite (a t
// of constant differences, a correlation of a constant sample) is written null.
#pragma once

#include <nlohmann/json.hpp>

#include <cmath>

namespace posenc::experiments {

inline nlohmann::ordered_json number_or_null(double v) {
  return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr);
}

// A comparison whose `key` ("p", "p_holm") is a number below 0.05; null or absent counts as not.
template <class Json>
bool below_005(const Json& comparison, const char* key) {
  return comparison.contains(key) && comparison.at(key).is_number() && comparison.at(key).template get<double>() < 0.05;
}

}  // namespace posenc::experiments
