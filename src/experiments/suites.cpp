#include "posenc/experiments/suites.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <system_error>

#include "posenc/error.h"
#include "posenc/experiments/extrapolation_summary.h"
#include "posenc/experiments/properties.h"
#include "posenc/io/atomic_file.h"
#include "posenc/training/experiment.h"

namespace posenc::experiments {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
constexpr const char* kOp = "experiment";

nn::TrainCallbacks train_callbacks(const std::string& stage, const RunProgress& progress) {
  nn::TrainCallbacks c;
  c.warning = progress.warning;
  if (progress.step) c.progress = [stage, &progress](const nn::TrainProgress& p) { progress.step(stage, p); };
  return c;
}

std::string perplexity_line(const std::vector<nn::EvalLength>& lengths) {
  std::string line;
  char cell[64];
  for (const nn::EvalLength& l : lengths) {
    if (l.error.empty()) {
      std::snprintf(cell, sizeof cell, "ppl@%lld %.2f", static_cast<long long>(l.seq_len), std::exp(l.loss));
    } else {
      std::snprintf(cell, sizeof cell, "ppl@%lld n/a", static_cast<long long>(l.seq_len));
    }
    line += (line.empty() ? "" : ", ") + std::string(cell);
  }
  return line;
}

std::string extrapolation_table(const nn::SuiteSummary& s) {
  std::string out;
  char text[128];
  std::snprintf(text, sizeof text, "test perplexity (mean +- sd over seeds), trained at seq_len %lld, %lld runs\n",
                static_cast<long long>(s.train_seq_len), static_cast<long long>(s.runs));
  out += text;
  std::snprintf(text, sizeof text, "%-18s", "encoding");
  out += text;
  for (int64_t L : s.lengths) {
    std::snprintf(text, sizeof text, " %19lld", static_cast<long long>(L));
    out += text;
  }
  out += "\n";
  for (const nn::SummaryRow& r : s.rows) {
    std::snprintf(text, sizeof text, "%-18s", r.encoding.c_str());
    out += text;
    for (const nn::SummaryCell& c : r.cells) {
      char cell[64];
      if (c.seeds == 0) {
        std::snprintf(cell, sizeof cell, "n/a");
      } else if (c.seeds == 1) {
        std::snprintf(cell, sizeof cell, "%.2f", c.mean);
      } else {
        std::snprintf(cell, sizeof cell, "%.2f +- %.2f", c.mean, c.sd);
      }
      std::snprintf(text, sizeof text, " %19s", cell);
      out += text;
    }
    out += "\n";
  }
  return out;
}

// "paired t-tests on log perplexity: 765, p < 0.05 in 212, 40 after Holm's correction per length (...)": how many
// pairs the summary compared.
std::string comparisons_line(const std::string& summary_json) {
  int64_t n = 0, significant = 0, after_holm = 0;
  const json summary = json::parse(summary_json);  // named: a range-for would not keep a temporary alive
  const auto below = [](const json& c, const char* key) {
    return c.contains(key) && c.at(key).is_number() && c.at(key).get<double>() < 0.05;
  };
  for (const json& c : summary.at("comparisons")) ++n, significant += below(c, "p"), after_holm += below(c, "p_holm");
  char text[200];
  std::snprintf(text, sizeof text,
                "paired t-tests on log perplexity: %lld, p < 0.05 in %lld, %lld after Holm's correction per length "
                "(summary.json: comparisons)\n",
                static_cast<long long>(n), static_cast<long long>(significant), static_cast<long long>(after_holm));
  return text;
}

class ExtrapolationSuite final : public Suite {
 public:
  explicit ExtrapolationSuite(const SuiteOptions& o) : plan_(nn::extrapolation_plan(o.quick)) {
    if (o.seeds) plan_.seeds = *o.seeds;
    if (!o.encodings.empty()) plan_.encodings = o.encodings;
    if (o.steps) plan_.train.steps = *o.steps;
    plan_.train.threads = o.threads;
    runs_ = nn::plan_runs(plan_);  // validates before anything is written
    quick_ = o.quick;
  }
  std::string name() const override { return "extrapolation"; }
  std::string corpus_sources() const override { return quick_ ? "wordnet" : "wordnet,gcide,fortunes"; }
  std::vector<std::string> run_names() const override {
    std::vector<std::string> names;
    for (const nn::ExperimentRun& r : runs_) names.push_back(r.name);
    return names;
  }
  int64_t run_steps() const override { return plan_.train.steps; }
  RunReport run(const std::string& name, const fs::path& dir, const RunProgress& progress) const override {
    for (nn::ExperimentRun r : runs_) {
      if (r.name != name) continue;
      r.config.task_options.data = (dir / "corpus").string();
      const nn::RunOutcome o = nn::run_experiment(r, dir, plan_.lengths, plan_.eval_batches, plan_.rope_extensions,
                                                  train_callbacks("train", progress));
      return {perplexity_line(o.lengths), o.reused, o.tokens_per_second};
    }
    fail_argument(kOp, "no run of this plan is named '", name, "'");
  }

 private:
  nn::ExtrapolationPlan plan_;
  std::vector<nn::ExperimentRun> runs_;
  bool quick_ = false;
};

class PropertiesSuite final : public Suite {
 public:
  explicit PropertiesSuite(const SuiteOptions& o) : plan_(properties_plan(o.quick)) {
    if (o.seeds) plan_.seeds = *o.seeds;
    if (!o.encodings.empty()) plan_.encodings = o.encodings;
    if (o.steps) {
      require(*o.steps >= 1, kOp, "steps must be >= 1, got ", *o.steps);
      // Each stage's most, rounded down to whole evaluation intervals.
      plan_.pretrain.steps = std::max(*o.steps / plan_.pretrain_stopping.eval_every, int64_t{1}) *
                             plan_.pretrain_stopping.eval_every;
      plan_.finetune.steps = std::max(*o.steps / plan_.finetune_stopping.eval_every, int64_t{1}) *
                             plan_.finetune_stopping.eval_every;
    }
    plan_.pretrain.threads = plan_.finetune.threads = o.threads;
    runs_ = plan_properties_runs(plan_);
  }
  std::string name() const override { return "properties"; }
  std::string corpus_sources() const override { return "wordnet,gcide,fortunes"; }
  std::vector<std::string> run_names() const override {
    std::vector<std::string> names;
    for (const PropertiesRun& r : runs_) names.push_back(r.name);
    return names;
  }
  int64_t run_steps() const override {
    return plan_.pretrain.steps + static_cast<int64_t>(plan_.tasks.size()) * plan_.finetune.steps;
  }
  RunReport run(const std::string& name, const fs::path& dir, const RunProgress& progress) const override {
    for (const PropertiesRun& r : runs_) {
      if (r.name != name) continue;
      std::string stage = "pretrain";
      PropertiesCallbacks callbacks;
      callbacks.train.warning = progress.warning;
      if (progress.step) {
        callbacks.train.progress = [&](const nn::TrainProgress& p) { progress.step(stage, p); };
      }
      callbacks.stage = [&](const std::string& s) { stage = s; };
      const PropertiesOutcome o = run_properties(r, plan_, dir, callbacks);
      RunReport report;
      report.reused = o.reused;
      double seconds = 0, tokens = 0;
      char cell[96];
      for (const StageOutcome& s : o.stages) {
        if (s.stage == "pretrain") {
          std::snprintf(cell, sizeof cell, "mlm ppl %.2f (step %lld)", std::exp(s.test),
                        static_cast<long long>(s.best_step));
        } else {
          std::snprintf(cell, sizeof cell, "%s %.3f (step %lld)", s.stage.c_str(), s.test,
                        static_cast<long long>(s.best_step));
        }
        report.line += (report.line.empty() ? "" : ", ") + std::string(cell);
        seconds += s.seconds;
        tokens += s.tokens_per_second * s.seconds;
      }
      report.tokens_per_second = seconds > 0 ? tokens / seconds : 0;
      return report;
    }
    fail_argument(kOp, "no run of this plan is named '", name, "'");
  }

 private:
  PropertiesPlan plan_;
  std::vector<PropertiesRun> runs_;
};

}  // namespace

std::unique_ptr<Suite> make_suite(const std::string& name, const SuiteOptions& options) {
  if (name == "extrapolation") return std::make_unique<ExtrapolationSuite>(options);
  if (name == "properties") return std::make_unique<PropertiesSuite>(options);
  fail_argument(kOp, "unknown suite '", name, "'; known: extrapolation, properties");
}

std::string suite_of(const fs::path& dir) {
  std::error_code ec;
  const fs::path marker = dir / "suite.json";
  if (fs::exists(marker, ec)) {
    const json j = nn::read_experiment_json(marker);
    if (!j.is_object() || !j.contains("suite") || !j["suite"].is_string()) {
      fail_runtime(kOp, marker.string(), ": not a suite marker ({\"suite\": NAME})");
    }
    return j["suite"].get<std::string>();
  }
  // Directories from before suite.json: their result files say which suite.
  for (const auto& entry : fs::directory_iterator(dir / "runs", ec)) {
    const fs::path r = entry.path() / "result.json";
    if (!fs::exists(r, ec)) continue;
    try {
      const std::string format = json::parse(io::read_regular_file(kOp, r.string())).value("format", "");
      if (format == "posenc-experiment-run-1") return "extrapolation";
      if (format == "posenc-properties-run-1") return "properties";
    } catch (const json::exception&) {
      continue;  // a corrupted result says nothing; the next may
    }
  }
  fail_runtime(kOp, dir.string(), ": no suite.json and no run results: not an experiment directory");
}

void claim_suite_dir(const fs::path& dir, const std::string& suite) {
  std::error_code ec;
  const bool has_marker = fs::exists(dir / "suite.json", ec);
  if (has_marker || fs::is_directory(dir / "runs", ec)) {
    std::string held = suite;  // runs/ with nothing finished yet: nothing to mix
    if (has_marker) {
      held = suite_of(dir);
    } else {
      try {
        held = suite_of(dir);
      } catch (const std::runtime_error&) {
      }
    }
    if (held != suite) {
      fail_argument(kOp, dir.string(), " holds the '", held, "' suite, not '", suite, "': use another --out");
    }
  }
  if (!has_marker) {
    io::write_file_atomically(kOp, (dir / "suite.json").string(), json{{"suite", suite}}.dump() + "\n");
  }
}

std::string summarize_suite(const fs::path& dir, std::string* json_text) {
  const std::string suite = suite_of(dir);
  std::string text, table;
  if (suite == "properties") {
    text = summarize_properties(dir);
    table = properties_table(text);
  } else if (suite == "extrapolation") {
    const nn::SuiteSummary summary = nn::summarize_experiment(dir);
    text = extrapolation_summary_json(summary);
    table = extrapolation_table(summary) + comparisons_line(text);
  } else {
    fail_runtime(kOp, dir.string(), "/suite.json names an unknown suite '", suite, "'");
  }
  io::write_file_atomically(kOp, (dir / "summary.json").string(), text);
  if (json_text != nullptr) *json_text = text;
  return table;
}

}  // namespace posenc::experiments
