// Paired comparisons for the extrapolation summary (posenc/experiments/extrapolation_summary.h).
#include "posenc/experiments/extrapolation_summary.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstddef>
#include <vector>

#include "holm_family.h"
#include "json_numbers.h"
#include "posenc/analysis/statistics.h"

namespace posenc::experiments {

using nlohmann::ordered_json;

std::string extrapolation_summary_json(const nn::SuiteSummary& summary) {
  ordered_json j = ordered_json::parse(nn::summary_json(summary));
  ordered_json comparisons = ordered_json::array();
  for (size_t k = 0; k < summary.lengths.size(); ++k) {
    for (size_t a = 0; a < summary.rows.size(); ++a) {
      for (size_t b = a + 1; b < summary.rows.size(); ++b) {
        const nn::SummaryCell& ca = summary.rows[a].cells[k];
        const nn::SummaryCell& cb = summary.rows[b].cells[k];
        // Both lists are sorted by seed: walk them together for the shared seeds.
        std::vector<double> x, y;
        size_t i = 0, m = 0;
        while (i < ca.seed_losses.size() && m < cb.seed_losses.size()) {
          if (ca.seed_losses[i].first < cb.seed_losses[m].first) {
            ++i;
          } else if (cb.seed_losses[m].first < ca.seed_losses[i].first) {
            ++m;
          } else {
            x.push_back(ca.seed_losses[i++].second);
            y.push_back(cb.seed_losses[m++].second);
          }
        }
        if (x.size() < 2) continue;
        const analysis::PairedTTest test = analysis::paired_t_test(x, y);
        comparisons.push_back({{"seq_len", summary.lengths[k]},
                               {"a", summary.rows[a].encoding},
                               {"b", summary.rows[b].encoding},
                               {"mean_log_ratio", test.mean_difference},
                               {"perplexity_ratio", std::exp(test.mean_difference)},
                               {"t", number_or_null(test.t)},
                               {"p", number_or_null(test.p)},
                               {"seeds", test.n}});
      }
    }
  }
  add_holm_p(comparisons, "seq_len");
  j["comparisons"] = comparisons;
  return j.dump(2) + "\n";
}

}  // namespace posenc::experiments
