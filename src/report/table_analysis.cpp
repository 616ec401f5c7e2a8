#include "posenc/report/table_analysis.h"

#include <algorithm>
#include <cmath>

#include "posenc/error.h"

namespace posenc::report {
namespace {

// JSON has no NaN or infinity: such a number becomes null.
nlohmann::ordered_json number(double v) {
  return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr);
}

}  // namespace

std::vector<int64_t> translation_deltas(int64_t positions, int64_t min_pairs) {
  std::vector<int64_t> deltas;
  for (int64_t d : analysis::default_deltas(positions)) {
    if (d >= 1 && positions - d >= min_pairs) deltas.push_back(d);
  }
  return deltas;
}

MatrixAnalysis analyze_matrix(const analysis::Matrix& s, std::optional<int64_t> window) {
  MatrixAnalysis a;
  a.indicators = analysis::indicators(s, window);
  a.monotone = analysis::monotone_range(s);
  return a;
}

TableAnalysis analyze_table(const TableSource& source, const TableAnalysisOptions& options) {
  const analysis::Matrix& table = source.table;
  analysis::validate_table("analyze", "table", table);
  require(table.rows >= 2, "analyze", "the table must have at least 2 positions, got ", table.rows);

  TableAnalysis a;
  a.proximity = options.proximity;
  a.similarity = analysis::proximity(table, options.proximity);
  a.properties = analyze_matrix(a.similarity, options.window);

  if (source.exact_operator) {
    const std::vector<int64_t> deltas = translation_deltas(table.rows, 1);
    if (!deltas.empty()) a.translation = analysis::translation_residual_exact(table, deltas, source.exact_operator);
  } else {
    const std::vector<int64_t> deltas = translation_deltas(table.rows, options.translation_folds);
    if (!deltas.empty()) {
      a.translation = analysis::translation_residual_fitted(table, deltas, options.translation_folds, options.seed);
    }
  }
  if (options.probes) {
    analysis::ProbeOptions probe = options.probe;
    probe.seed = options.seed;
    a.probes = analysis::probe(table, probe);
  }
  return a;
}

nlohmann::ordered_json matrix_json(const MatrixAnalysis& analysis) {
  const analysis::Indicators& i = analysis.indicators;
  const analysis::MonotoneRange& m = analysis.monotone;
  nlohmann::ordered_json j;
  j["monotonicity"] = number(i.monotonicity);
  j["translation_invariance"] = number(i.translation_invariance);
  j["symmetry"] = number(i.symmetry);
  j["window"] = i.window;
  j["monotone_range"] = m.range;
  j["monotone_range_distribution"] = {{"min", m.min},
                                      {"max", m.max},
                                      {"mean", number(m.mean)},
                                      {"all_censored", m.all_censored},
                                      {"uncensored_rows", m.uncensored_rows}};
  return j;
}

nlohmann::ordered_json table_json(const TableAnalysis& analysis) {
  nlohmann::ordered_json j = matrix_json(analysis.properties);
  j["proximity"] = std::string(analysis::proximity_kind_name(analysis.proximity));
  if (analysis.translation) {
    const analysis::TranslationResidual& t = *analysis.translation;
    nlohmann::ordered_json residuals = nlohmann::ordered_json::array();
    for (double r : t.residuals) residuals.push_back(number(r));
    j["translation_residual"] = number(t.max_residual);
    j["translation"] = {{"method", t.method}, {"deltas", t.deltas}, {"residuals", std::move(residuals)}};
  } else {
    j["translation_residual"] = nullptr;
    j["translation"] = nullptr;
  }
  if (analysis.probes) {
    const analysis::ProbeResult& p = *analysis.probes;
    j["absolute_mae"] = number(p.absolute_mae);
    j["relative_error"] = number(p.relative_error);
    j["probe"] = {{"folds", p.folds}, {"seed", p.seed}, {"pairs", p.pairs}};
  }
  return j;
}

nlohmann::ordered_json probe_json(const analysis::ProbeResult& probes) {
  return {{"absolute_mae", number(probes.absolute_mae)},
          {"relative_error", number(probes.relative_error)},
          {"folds", probes.folds},
          {"seed", probes.seed},
          {"pairs", probes.pairs}};
}

}  // namespace posenc::report
