// The properties suite's question at the level of Wang et al.'s claim
// (absolute encodings better at classification, relative ones at spans):
// per task and seed, the mean score of each group's encodings, and paired
// t-tests over seeds between the groups. Private to posenc::experiments.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace posenc::experiments {

struct GroupMember {
  std::string encoding;
  std::string group;  // "none" | "absolute" | "relative" | "absolute+relative"
  const std::map<std::string, std::map<uint64_t, double>>* scores;  // task -> seed -> test score
};

// For each task and each two groups other than "none" (absolute, relative, absolute+relative, in that
// order): {"task", "a", "b", "encodings_a", "encodings_b", "mean_a", "mean_b", "mean_difference" (a - b),
// "t", "p", "seeds", "left_out", "p_holm"}. A seed counts when every encoding of both groups has it; a group
// mean is over its encodings for that seed. The encodings with the fewest seeds are left out (named in
// "left_out": a sweep still running) while that gives more common seeds and leaves both groups an encoding;
// pairs with fewer than 2 common seeds are not compared. Holm's correction runs over the pairs of a task.
nlohmann::ordered_json group_comparisons(const std::vector<GroupMember>& members, const std::vector<std::string>& tasks);

}  // namespace posenc::experiments
