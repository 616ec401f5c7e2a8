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
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "posenc/analysis/indicators.h"
#include "posenc/analysis/monotone_range.h"
#include "posenc/analysis/probes.h"
#include "posenc/analysis/proximity.h"
#include "posenc/analysis/translation_fit.h"
#include "posenc/report/sources.h"

namespace posenc::report {

struct TableAnalysisOptions {
  analysis::ProximityKind proximity = analysis::ProximityKind::kDot;
  std::optional<int64_t> window;  // indicators' W; default n - 1
  int64_t translation_folds = 5;  // least squares only
  uint64_t seed = 0;              // least-squares folds and probes
  bool probes = false;
  analysis::ProbeOptions probe;   // folds, pairs (its seed is `seed`)
};

struct MatrixAnalysis {
  analysis::Indicators indicators;
  analysis::MonotoneRange monotone;
};

struct TableAnalysis {
  analysis::ProximityKind proximity = analysis::ProximityKind::kDot;
  analysis::Matrix similarity;  // S [n, n]
  MatrixAnalysis properties;
  // Absent when the table is too short to translate: n - 1 < 1 (exact) or
  // n - 1 < folds (least squares) for delta = 1.
  std::optional<analysis::TranslationResidual> translation;
  std::optional<analysis::ProbeResult> probes;
};

// S square, n >= 2. Throws the analysis layer's messages.
MatrixAnalysis analyze_matrix(const analysis::Matrix& s, std::optional<int64_t> window = std::nullopt);

// Throws the analysis layer's messages ("[proximity] ...", "[indicators] ...",
// "[probe] ...") and "[analyze] the table must have at least 2 positions, got 1".
TableAnalysis analyze_table(const TableSource& source, const TableAnalysisOptions& options = {});

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
