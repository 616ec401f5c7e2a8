// Holm's correction over the paired comparisons of a suite's summary, one family per task (properties) or per
// evaluation length (extrapolation): the tests a reader scans together when looking for "p < 0.05".
#pragma once

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "json_numbers.h"
#include "posenc/analysis/statistics.h"

namespace posenc::experiments {

// Adds "p_holm" to every comparison: its p adjusted by Holm's step-down procedure within the comparisons that
// share the value of family_key (a null p stays null and is not counted).
inline void add_holm_p(nlohmann::ordered_json& comparisons, const char* family_key) {
  std::map<std::string, std::vector<size_t>> families;
  for (size_t i = 0; i < comparisons.size(); ++i) families[comparisons[i].at(family_key).dump()].push_back(i);
  for (const auto& [key, members] : families) {
    std::vector<double> p;
    for (const size_t i : members) {
      const auto& v = comparisons[i].at("p");
      p.push_back(v.is_number() ? v.get<double>() : std::nan(""));
    }
    const std::vector<double> adjusted = analysis::holm_adjusted(p);
    for (size_t m = 0; m < members.size(); ++m) comparisons[members[m]]["p_holm"] = number_or_null(adjusted[m]);
  }
}

}  // namespace posenc::experiments
