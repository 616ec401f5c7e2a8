// The analyses of one encoding, bundled as `posenc analyze`, `posenc probe`
// and the report show them, and their JSON form.
//
// A position table gets everything: its proximity matrix S (dot or cosine),
// the indicators of Wang et al. on S, the monotone range of S, the residual
// of PE[p + delta] = T(delta) PE[p] (the exact operator when the source has
// one, else least squares, judged out of sample), and optionally the probes of
// Wang & Chen. A matrix indexed by positions that is not a table's proximity
// (an attention bias averaged over heads, an identical-word attention map)
// gets the indicators and the monotone range only.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "posenc/analysis/indicators.h"
#include "posenc/analysis/monotone_range.h"
#include "posenc/analysis/probes.h"
#include "posenc/analysis/proximity.h"
#include "posenc/analysis/translation_fit.h"
#include "posenc/report/sources.h"

namespace posenc::report {

// Called before each step with a short label ("proximity", "translation delta
// 64 (7 of 12)") and the share of the estimated work already done, in [0, 1].
using AnalysisProgress = std::function<void(std::string_view step, double done)>;

struct TableAnalysisOptions {
  analysis::ProximityKind proximity = analysis::ProximityKind::kDot;
  std::optional<int64_t> window;  // indicators' W; default n - 1
  int64_t translation_folds = 5;  // least squares only
  uint64_t seed = 0;              // least-squares folds and probes
  bool probes = false;
  analysis::ProbeOptions probe;   // folds, pairs (its seed is `seed`)
  AnalysisProgress progress;      // optional; the library prints nothing
};

struct MatrixAnalysis {
  analysis::Indicators indicators;
  analysis::MonotoneRange monotone;
};

struct TableAnalysis {
  analysis::ProximityKind proximity = analysis::ProximityKind::kDot;
  // S [n, n] of the table, or, when that does not fit float64 (dot proximity of
  // a table beyond ~1e150 or below ~1e-135), of the table scaled by 2^-e:
  // S = similarity * 2^similarity_exponent (0 for every ordinary table).
  analysis::Matrix similarity;
  int similarity_exponent = 0;
  MatrixAnalysis properties;
  // Absent when the table is too short to translate: n - 1 < 1 (exact) or
  // n - 1 < folds (least squares) for delta = 1.
  std::optional<analysis::TranslationResidual> translation;
  std::optional<analysis::ProbeResult> probes;
};

// S square, n >= 2. Throws the analysis layer's messages.
MatrixAnalysis analyze_matrix(const analysis::Matrix& s, std::optional<int64_t> window = std::nullopt);

// Degenerate tables (docs/analysis.md, "Degenerate tables") are refused,
// naming why, rather than read as a perfect sinusoid:
//   "[analyze] table has a non-finite value at (3, 7): nan"   (row 3, column 7)
//   "[analyze] the table must have at least 2 positions, got 1"
//   "[analyze] table is all zeros: the indicators are undefined"
//   "[analyze] table has all rows equal (a constant table): the indicators are undefined"
//   "[analyze] the cosine proximity of the table is the same for every pair of positions 1 .. 7 apart: the
//    indicators are undefined"   (one line; e.g. rows that are positive multiples of one another)
// A table with some duplicated rows is analysed: its statistics are defined.
// The numbers do not depend on the table's scale: a table beyond 2^+-200 is
// analysed scaled by a power of two (exact). Also throws the analysis layer's
// messages ("[probe] ...").
TableAnalysis analyze_table(const TableSource& source, const TableAnalysisOptions& options = {});

// What analyze_table will cost, estimated from the shape before it starts:
// peak bytes held at once (the table, S, and the largest step's working set)
// and multiply-adds (the unit of the progress fractions). Each step's
// complexity is in docs/analysis.md.
struct AnalysisCost {
  double bytes = 0;
  double multiply_adds = 0;
  double similarity_bytes = 0;  // S alone: 8 n^2
};
AnalysisCost estimate_table_analysis(int64_t positions, int64_t dim, bool exact_operator,
                                     const TableAnalysisOptions& options = {});

// The deltas the translation residual uses for n positions: default_deltas(n)
// restricted to those leaving at least `min_pairs` pairs (p, p + delta).
std::vector<int64_t> translation_deltas(int64_t positions, int64_t min_pairs);

// JSON, keys in a fixed order (nlohmann::ordered_json):
//   matrix:  monotonicity, translation_invariance, symmetry, window, monotone_range,
//            monotone_range_distribution {min, max, mean, all_censored, uncensored_rows}
//   table:   the matrix keys, then proximity, translation_residual (max over deltas or null),
//            translation {method, deltas, residuals} (or null), and with probes
//            absolute_mae, relative_error, probe {folds, seed, pairs}
//   probes:  absolute_mae, relative_error, folds, seed, pairs
nlohmann::ordered_json matrix_json(const MatrixAnalysis& analysis);
nlohmann::ordered_json table_json(const TableAnalysis& analysis);
nlohmann::ordered_json probe_json(const analysis::ProbeResult& probes);

}  // namespace posenc::report
