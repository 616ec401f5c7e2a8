#include "properties_groups.h"

#include <algorithm>
#include <cstdint>
#include <set>

#include "holm_family.h"
#include "json_numbers.h"
#include "posenc/analysis/statistics.h"

namespace posenc::experiments {

using nlohmann::ordered_json;

namespace {

constexpr const char* kCompared[] = {"absolute", "relative", "absolute+relative"};

std::vector<const GroupMember*> members_of(const std::vector<GroupMember>& members, const std::string& group) {
  std::vector<const GroupMember*> out;
  for (const GroupMember& m : members) {
    if (m.group == group) out.push_back(&m);
  }
  return out;
}

// The seeds every member has a score of `task` for.
std::set<uint64_t> common_seeds(const std::vector<const GroupMember*>& members, const std::string& task) {
  std::set<uint64_t> seeds;
  bool first = true;
  for (const GroupMember* m : members) {
    std::set<uint64_t> own;
    const auto found = m->scores->find(task);
    if (found != m->scores->end()) {
      for (const auto& [seed, score] : found->second) own.insert(seed);
    }
    if (first) {
      seeds = own;
      first = false;
      continue;
    }
    std::set<uint64_t> both;
    for (const uint64_t s : seeds) {
      if (own.contains(s)) both.insert(s);
    }
    seeds = both;
  }
  return seeds;
}

size_t seed_count(const GroupMember& m, const std::string& task) {
  const auto found = m.scores->find(task);
  return found == m.scores->end() ? 0 : found->second.size();
}

size_t fewest_seeds(const std::vector<const GroupMember*>& members, const std::string& task) {
  size_t fewest = SIZE_MAX;
  for (const GroupMember* m : members) fewest = std::min(fewest, seed_count(*m, task));
  return fewest;
}

std::vector<const GroupMember*> joined(const std::vector<const GroupMember*>& a,
                                       const std::vector<const GroupMember*>& b) {
  std::vector<const GroupMember*> both = a;
  both.insert(both.end(), b.begin(), b.end());
  return both;
}

double group_mean(const std::vector<const GroupMember*>& members, const std::string& task, uint64_t seed) {
  double sum = 0;
  for (const GroupMember* m : members) sum += m->scores->at(task).at(seed);
  return sum / static_cast<double>(members.size());
}

}  // namespace

ordered_json group_comparisons(const std::vector<GroupMember>& members, const std::vector<std::string>& tasks) {
  ordered_json out = ordered_json::array();
  for (const std::string& task : tasks) {
    for (size_t a = 0; a < std::size(kCompared); ++a) {
      for (size_t b = a + 1; b < std::size(kCompared); ++b) {
        std::vector<const GroupMember*> in_a = members_of(members, kCompared[a]);
        std::vector<const GroupMember*> in_b = members_of(members, kCompared[b]);
        if (in_a.empty() || in_b.empty()) continue;
        // An encoding with fewer seeds than the others (a sweep still running) cuts the common seeds to its
        // own: the encodings with the fewest seeds are left out, and named, while that gives more seeds.
        std::vector<std::string> left_out;
        std::set<uint64_t> seeds = common_seeds(joined(in_a, in_b), task);
        while (true) {
          const size_t fewest = fewest_seeds(joined(in_a, in_b), task);
          std::vector<const GroupMember*> kept_a, kept_b;
          std::vector<std::string> dropped;
          for (auto [group, kept] : {std::pair{&in_a, &kept_a}, std::pair{&in_b, &kept_b}}) {
            for (const GroupMember* m : *group) {
              if (seed_count(*m, task) == fewest) dropped.push_back(m->encoding);
              else kept->push_back(m);
            }
          }
          if (kept_a.empty() || kept_b.empty()) break;
          const std::set<uint64_t> more = common_seeds(joined(kept_a, kept_b), task);
          if (more.size() <= seeds.size()) break;
          in_a = kept_a, in_b = kept_b, seeds = more;
          left_out.insert(left_out.end(), dropped.begin(), dropped.end());
        }
        if (in_a.empty() || in_b.empty()) continue;
        std::vector<double> x, y;
        for (const uint64_t seed : seeds) {
          x.push_back(group_mean(in_a, task, seed));
          y.push_back(group_mean(in_b, task, seed));
        }
        if (x.size() < 2) continue;
        const analysis::PairedTTest test = analysis::paired_t_test(x, y);
        const analysis::MeanSd mean_a = analysis::mean_sd(x), mean_b = analysis::mean_sd(y);
        out.push_back({{"task", task}, {"a", kCompared[a]}, {"b", kCompared[b]}, {"encodings_a", in_a.size()},
                       {"encodings_b", in_b.size()}, {"mean_a", mean_a.mean}, {"mean_b", mean_b.mean},
                       {"mean_difference", test.mean_difference}, {"t", number_or_null(test.t)},
                       {"p", number_or_null(test.p)}, {"seeds", test.n}, {"left_out", left_out}});
      }
    }
  }
  add_holm_p(out, "task");
  return out;
}

}  // namespace posenc::experiments
