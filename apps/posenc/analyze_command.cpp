#include "analyze_command.h"

#include <cstdio>
#include <iostream>
#include <sstream>

#include "posenc/error.h"
#include "posenc/report/table_analysis.h"

namespace posenc::cli {
namespace {

std::string shape_text(const analysis::Matrix& m) {
  return "[" + std::to_string(m.rows) + ", " + std::to_string(m.cols) + "]";
}

std::string format(const char* f, double v) {
  char text[64];
  std::snprintf(text, sizeof text, f, v);
  return text;
}

void print_summary(const report::TableSource& source, const report::TableAnalysis& a) {
  const analysis::Indicators& i = a.properties.indicators;
  const analysis::MonotoneRange& m = a.properties.monotone;
  std::ostringstream out;
  out << source.name << ": table " << shape_text(source.table) << ", " << analysis::proximity_kind_name(a.proximity)
      << " proximity, window " << i.window << '\n';
  out << "monotonicity            " << format("%.4f", i.monotonicity) << "   (-1..1; 1: proximity falls with the offset)\n";
  out << "translation invariance  " << format("%.4f", i.translation_invariance)
      << "   (0..1; 1: proximity depends on j - i only)\n";
  out << "symmetry                " << format("%.4f", i.symmetry) << "   (-1..1; 1: S[x, x+m] = S[x, x-m])\n";
  out << "violation rate          " << format("%.4f", i.monotonicity_violation_rate)
      << "   (0..1; share of offset pairs m < m' with S[x, x+-m'] > S[x, x+-m]; 0.5: no trend)\n";
  // %g: the share of a sinusoid is ~1e-30, which 1 - TI would print as 0.
  out << "within-diagonal share   " << format("%.4g", i.within_diagonal_variance_share)
      << "   (0..1; variance the offset does not explain, 1 - TI; 0: Toeplitz)\n";
  out << "monotone range          ";
  if (m.all_censored) {
    out << ">= " << m.range << "   (proximity still falls at the table's end in every row)\n";
  } else {
    out << m.range << "   (median over " << m.uncensored_rows << " rows; min " << m.min << ", max " << m.max
        << ", mean " << format("%.1f", m.mean) << ")\n";
  }
  out << "translation residual    ";
  if (a.translation) {
    out << format("%.3g", a.translation->max_residual) << "   (" << a.translation->method << ", max over deltas ";
    for (size_t k = 0; k < a.translation->deltas.size(); ++k) out << (k ? ", " : "") << a.translation->deltas[k];
    out << ")\n";
  } else {
    out << "n/a   (too few positions to translate)\n";
  }
  std::cout << out.str();
}

}  // namespace

analysis::ProximityKind parse_proximity_option(const std::string& name, std::string_view op) {
  if (name == "dot") return analysis::ProximityKind::kDot;
  if (name == "cosine") return analysis::ProximityKind::kCosine;
  fail_argument(op, "--proximity must be dot or cosine, got '", name, "'");
}

AnalyzeCommand::AnalyzeCommand(CLI::App& parent) {
  app_ = parent.add_subcommand("analyze", "Indicators, monotone range and translation residual of one table");
  app_->footer(
      "SOURCE is a kind with the posenc table options (default 256 positions, dim 128) or a .npy / .safetensors "
      "file. The numbers are defined in docs/report.md.");
  source_.add_source(*app_);
  app_->add_option("--proximity", proximity_, "dot | cosine: S[i, j] between rows i and j")->capture_default_str();
  window_opt_ = app_->add_option("--window", window_, "Largest offset W the indicators look at (default N - 1)");
  app_->add_flag("--json", json_, "Print one JSON object");
  resources_.add(*app_);
  source_.add_table(*app_);
}

void AnalyzeCommand::run() const {
  const char* op = "analyze";
  report::TableAnalysisOptions options;
  options.proximity = parse_proximity_option(proximity_, op);
  const report::TableSource source = source_.load(op);
  if (window_opt_->count() > 0) {
    const int64_t n = source.table.rows;
    require(window_ >= 1 && window_ <= n - 1, op, "--window must be in [1, ", n - 1, "] for a table of ", n,
            " positions, got ", window_);
    options.window = window_;
  }
  // S is n x n and the translation fit D x D per fold: estimate, and refuse
  // before allocating what the machine does not have.
  const report::AnalysisCost cost = report::estimate_table_analysis(
      source.table.rows, source.table.cols, static_cast<bool>(source.exact_operator), options);
  resources_.check(op, cost.bytes, cost.multiply_adds,
                   "S alone: " + memory_text(cost.similarity_bytes) + " for " + std::to_string(source.table.rows) +
                       " positions");
  ProgressLine progress(op);
  if (progress.active()) options.progress = [&progress](std::string_view step, double done) { progress.update(step, done); };
  const report::TableAnalysis a = report::analyze_table(source, options);
  progress.finish();
  if (json_) {
    nlohmann::ordered_json j;
    j["source"] = source.name;
    j["shape"] = {source.table.rows, source.table.cols};
    j["description"] = source.description;
    const nlohmann::ordered_json numbers = report::table_json(a);  // a named object: items() refers into it
    for (const auto& [key, value] : numbers.items()) j[key] = value;
    // Appended: the keys before them are a stable prefix that scripts index.
    j["monotonicity_violation_rate"] = a.properties.indicators.monotonicity_violation_rate;
    j["within_diagonal_variance_share"] = a.properties.indicators.within_diagonal_variance_share;
    std::cout << j.dump(2) << '\n';
  } else {
    print_summary(source, a);
  }
}

}  // namespace posenc::cli
