#include "probe_command.h"

#include <cstdio>
#include <iostream>
#include <string>

#include "posenc/analysis/probes.h"
#include "posenc/report/table_analysis.h"

namespace posenc::cli {

ProbeCommand::ProbeCommand(CLI::App& parent) {
  app_ = parent.add_subcommand("probe", "Probes of Wang & Chen: can a linear model read positions and order?");
  app_->footer(
      "absolute_mae: mean |round(p_hat) - p| of a ridge regression from PE[p] to p on held-out positions; "
      "relative_error: held-out error rate of a logistic regression on [PE[i], PE[j]] predicting i < j "
      "(0.5 is chance). --protocol pe-study runs the relative probe as Wang & Chen's released script does "
      "(the first 512 positions, 512 ordered pairs, the table unscaled, sklearn's default regularization); "
      "docs/analysis.md has both protocols. SOURCE as for posenc analyze.");
  source_.add_source(*app_);
  app_->add_option("--folds", options_.folds, "Cross-validation folds")->capture_default_str();
  app_->add_option("--seed", options_.seed, "Seed of the fold split and the pairs")->capture_default_str();
  pairs_opt_ = app_->add_option("--pairs", pairs_, "Pairs drawn for the relative probe (default 4096; pe-study: 512)");
  app_->add_option("--protocol", protocol_, "default | pe-study: how the relative probe is run")
      ->capture_default_str();
  app_->add_flag("--json", json_, "Print one JSON object");
  source_.add_table(*app_);
}

void ProbeCommand::run() const {
  analysis::ProbeOptions options = options_;
  options.protocol = analysis::parse_probe_protocol(protocol_);  // before loading: a bad name fails fast
  if (pairs_opt_->count() > 0) options.pairs = pairs_;
  const report::TableSource source = source_.load("probe");
  const analysis::ProbeResult r = analysis::probe(source.table, options);
  if (json_) {
    nlohmann::ordered_json j;
    j["source"] = source.name;
    j["shape"] = {source.table.rows, source.table.cols};
    const nlohmann::ordered_json numbers = report::probe_json(r);  // a named object: items() refers into it
    for (const auto& [key, value] : numbers.items()) j[key] = value;
    std::cout << j.dump(2) << '\n';
    return;
  }
  const std::string protocol =
      r.protocol == analysis::ProbeProtocol::kDefault ? "" : ", protocol " + analysis::probe_protocol_name(r.protocol);
  char text[640];
  std::snprintf(text, sizeof text,
                "%s: table [%lld, %lld], %lld folds, seed %llu%s\n"
                "absolute MAE    %.3f   (positions; 0: p is linearly readable)\n"
                "relative error  %.4f  (%lld pairs; 0: order is linearly readable, 0.5: chance)\n",
                source.name.c_str(), static_cast<long long>(source.table.rows),
                static_cast<long long>(source.table.cols), static_cast<long long>(r.folds),
                static_cast<unsigned long long>(r.seed), protocol.c_str(), r.absolute_mae, r.relative_error,
                static_cast<long long>(r.pairs));
  std::cout << text;
}

}  // namespace posenc::cli
