// A suite's summary.json (properties or extrapolation) as Markdown tables, for
// publishing results as docs/experiments.md does: `posenc experiment report
// DIR --markdown`.
#pragma once

#include <string>

namespace posenc::experiments {

// properties: the scores with the probes of each encoding (mean ± sd over
// seeds), paired t-tests of every encoding against the reference, and the
// probe-score correlations. extrapolation: test perplexity per evaluation
// length, each n/a cell's reason as a numbered note, and where the summary
// has its paired comparisons, the lowest perplexity at each length against
// the next and every row against the reference (perplexity ratios, p).
// The reference is `reference`, or the first row's encoding when empty.
// Throws std::invalid_argument naming a summary it cannot read, or a
// reference that is not one of its encodings:
// "[experiment] reference must be an encoding of the summary (none, rope), got 'alibi'".
std::string summary_markdown(const std::string& summary_json, const std::string& reference = "");

}  // namespace posenc::experiments
