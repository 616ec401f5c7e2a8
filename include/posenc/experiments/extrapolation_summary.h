// The extrapolation suite's summary.json: the table of nn::summary_json (test
// perplexity per encoding and length, mean and sd over seeds) and, since the
// spread over seeds is mostly a shift that every encoding of one seed shares
// (the same data order), paired comparisons: at each length, a paired t-test
// between every two rows on the test loss (log perplexity) over the seeds both
// have evaluated there.
#pragma once

#include <string>

#include "posenc/training/experiment.h"

namespace posenc::experiments {

// "comparisons": [{"seq_len", "a", "b", "mean_log_ratio" (mean over seeds of
// loss_a - loss_b), "perplexity_ratio" (its exp: the geometric mean of
// perplexity_a / perplexity_b), "t", "p" (two-sided; null when undefined),
// "seeds"}], rows in the summary's order, a before b; pairs with fewer than
// two shared seeds are left out.
std::string extrapolation_summary_json(const nn::SuiteSummary& summary);

}  // namespace posenc::experiments
