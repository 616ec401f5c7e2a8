#include "posenc/report/table_analysis.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <thread>

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

namespace {

constexpr double kDouble = 8.0;  // bytes

// Work (multiply-adds, roughly) and extra bytes of each step, from the shape
// alone; docs/analysis.md states the same complexities.
struct StepCost {
  std::string label;
  double work = 0;
  double bytes = 0;  // held during the step, beyond the table and S
};

double threads_for(int64_t tasks) {
  const unsigned hardware = std::max(1u, std::thread::hardware_concurrency());
  return static_cast<double>(std::min<int64_t>(tasks, hardware));
}

std::vector<StepCost> plan_steps(int64_t n, int64_t d, bool exact_operator, const TableAnalysisOptions& options,
                                 std::vector<int64_t>& deltas) {
  const auto nn = static_cast<double>(n), dd = static_cast<double>(d);
  std::vector<StepCost> steps;
  steps.push_back({"proximity", 0.5 * nn * nn * dd, nn * dd * kDouble});  // S = PE PE^T on a transposed copy
  const double w = static_cast<double>(options.window.value_or(n - 1));
  // Monotonicity sorts 2n sequences of up to W + 1 values; the other two pass over the band.
  steps.push_back({"indicators", 2.0 * nn * (w + 1.0) * std::log2(w + 2.0) + 6.0 * nn * w,
                   threads_for(n) * 3.0 * (w + 1.0) * kDouble});
  steps.push_back({"monotone range", nn * nn / 2.0, nn * kDouble});
  deltas = translation_deltas(n, exact_operator ? 1 : options.translation_folds);
  const auto folds = static_cast<double>(options.translation_folds);
  bool gram_counted = false;
  for (size_t k = 0; k < deltas.size(); ++k) {
    const double count = static_cast<double>(n - deltas[k]);
    StepCost step;
    step.label = "translation delta " + std::to_string(deltas[k]) + " (" + std::to_string(k + 1) + " of " +
                 std::to_string(deltas.size()) + ")";
    if (exact_operator) {
      step.work = count * dd * dd;
      step.bytes = (2.0 * count * dd + 3.0 * dd * dd) * kDouble;
    } else {
      const double held_out = std::ceil(count / folds), train = count - held_out;
      const double parallel = threads_for(options.translation_folds);
      if (dd <= train) {  // primal: partial sums, then per fold a Cholesky and a solve with min(D, held out) columns
        step.work = 2.0 * count * dd * dd +
                    folds * (dd * dd * dd / 3.0 + 2.0 * dd * dd * std::min(dd, held_out) + held_out * dd * dd);
        // partial sums of every fold; per running fold its sums, factor and
        // right-hand side, and its held-out rows (gathered, transposed, predicted)
        step.bytes = ((2.0 * folds + 3.0 * parallel) * dd * dd + (2.0 + 4.0 * parallel) * held_out * dd) * kDouble;
      } else {  // dual: one n x n Gram for all deltas, per fold an N_train x N_train system
        step.work = folds * (train * train * train / 3.0 + 2.0 * train * train * held_out + train * held_out * dd);
        if (!gram_counted) step.work += 0.5 * nn * nn * dd;
        gram_counted = true;
        step.bytes = nn * nn * kDouble + parallel * (2.0 * train * train + train * held_out + 2.0 * count * dd) * kDouble;
      }
    }
    steps.push_back(step);
  }
  if (options.probes) {
    const auto pf = static_cast<double>(options.probe.folds);
    const double small = static_cast<double>(std::min(n, d)), large = static_cast<double>(std::max(n, d));
    // absolute: a min(n, D)^2 max(n, D) ridge solve per fold; relative: <= 100
    // L-BFGS iterations of a few passes over z [n, D] per fold.
    steps.push_back({"probes", pf * (small * small * large + 100.0 * 8.0 * nn * dd),
                     threads_for(options.probe.folds) * (2.0 * nn * dd + small * small * 2.0) * kDouble});
  }
  return steps;
}

bool all_rows_equal(const analysis::Matrix& t) {
  for (int64_t r = 1; r < t.rows; ++r)
    for (int64_t c = 0; c < t.cols; ++c)
      if (t(r, c) != t(0, c)) return false;
  return true;
}

int exponent_of_largest(const std::vector<double>& values) {
  double largest = 0.0;
  for (double v : values) largest = std::max(largest, std::abs(v));
  int e = 0;
  if (largest > 0.0) std::frexp(largest, &e);
  return e;
}

}  // namespace

AnalysisCost estimate_table_analysis(int64_t positions, int64_t dim, bool exact_operator,
                                     const TableAnalysisOptions& options) {
  std::vector<int64_t> deltas;
  const std::vector<StepCost> steps = plan_steps(positions, dim, exact_operator, options, deltas);
  AnalysisCost cost;
  const auto n = static_cast<double>(positions);
  cost.similarity_bytes = n * n * kDouble;
  double peak = 0.0;
  for (const StepCost& step : steps) {
    cost.multiply_adds += step.work;
    peak = std::max(peak, step.bytes);
  }
  // The table (and a scaled copy of an extreme one) and S are held throughout.
  cost.bytes = 2.0 * n * static_cast<double>(dim) * kDouble + cost.similarity_bytes + peak;
  return cost;
}

TableAnalysis analyze_table(const TableSource& source, const TableAnalysisOptions& options) {
  const analysis::Matrix& original = source.table;
  analysis::validate_table("analyze", "table", original);
  require(original.rows >= 2, "analyze", "the table must have at least 2 positions, got ", original.rows);
  // Degenerate tables: S constant, so translation invariance and symmetry are 0 / 0.
  if (all_rows_equal(original)) {
    const bool zero = std::all_of(original.values.begin(), original.values.end(), [](double v) { return v == 0.0; });
    if (zero) fail_argument("analyze", "table is all zeros: the indicators are undefined");
    fail_argument("analyze", "table has all rows equal (a constant table): the indicators are undefined");
  }

  std::vector<int64_t> deltas;
  const std::vector<StepCost> steps = plan_steps(original.rows, original.cols, static_cast<bool>(source.exact_operator),
                                                 options, deltas);
  std::vector<double> before(steps.size() + 1, 0.0);  // work done when step k starts
  for (size_t k = 0; k < steps.size(); ++k) before[k + 1] = before[k] + steps[k].work;
  auto starts = [&](size_t k) {
    if (options.progress && k < steps.size())
      options.progress(steps[k].label, before.back() > 0 ? before[k] / before.back() : 0.0);
  };

  // Every number below is scale-free; an extreme table is analysed scaled by a
  // power of two (exact), so that S and its sums neither overflow nor underflow.
  const int exponent = exponent_of_largest(original.values);
  const bool extreme = std::abs(exponent) > 200;
  analysis::Matrix scaled;
  if (extreme) {
    scaled = original;
    for (double& v : scaled.values) v = std::ldexp(v, -exponent);
  }
  const analysis::Matrix& table = extreme ? scaled : original;

  TableAnalysis a;
  a.proximity = options.proximity;
  starts(0);
  a.similarity = analysis::proximity(table, options.proximity);
  const int64_t n = table.rows;
  const int64_t window = options.window.value_or(n - 1);
  if (window >= 1 && window <= n - 1 && analysis::constant_on_band(a.similarity, window)) {
    fail_argument("analyze", "the ", analysis::proximity_kind_name(options.proximity),
                  " proximity of the table is the same for every pair of positions 1 .. ", window,
                  " apart: the indicators are undefined");
  }
  starts(1);
  a.properties.indicators = analysis::indicators(a.similarity, window);
  starts(2);
  a.properties.monotone = analysis::monotone_range(a.similarity);

  const size_t first_delta = 3;
  if (!deltas.empty()) {
    starts(first_delta);
    auto delta_done = [&](size_t count) {
      if (count < deltas.size()) starts(first_delta + count);
    };
    if (source.exact_operator) {
      a.translation = analysis::translation_residual_exact(table, deltas, source.exact_operator, delta_done);
    } else {
      a.translation =
          analysis::translation_residual_fitted(table, deltas, options.translation_folds, options.seed, delta_done);
    }
  }
  if (options.probes) {
    starts(first_delta + deltas.size());
    analysis::ProbeOptions probe = options.probe;
    probe.seed = options.seed;
    a.probes = analysis::probe(table, probe);
  }

  // S in the table's own units where float64 holds them (dot proximity scales
  // by 4^e; cosine is scale-free), else left scaled and the exponent recorded.
  if (extreme && options.proximity == analysis::ProximityKind::kDot) {
    const int largest = exponent_of_largest(a.similarity.values);
    if (largest + 2 * exponent <= 1024 && largest + 2 * exponent >= -900) {
      for (double& v : a.similarity.values) v = std::ldexp(v, 2 * exponent);
    } else {
      a.similarity_exponent = 2 * exponent;
    }
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
          {"pairs", probes.pairs},
          {"protocol", analysis::probe_protocol_name(probes.protocol)}};
}

}  // namespace posenc::report
