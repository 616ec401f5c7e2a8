// The properties suite's summary: scores and probes per encoding (mean, sd
// over seeds), paired t-tests between encodings per task, and correlations of
// the probes with the task scores across encodings.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <tuple>
#include <utility>

#include "posenc/analysis/statistics.h"
#include "posenc/error.h"
#include "posenc/experiments/properties.h"
#include "posenc/nn/encoding_registry.h"
#include "posenc/training/experiment.h"
#include "holm_family.h"
#include "json_numbers.h"
#include "properties_format.h"
#include "properties_groups.h"

namespace posenc::experiments {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;
constexpr const char* kOp = "experiment";
constexpr const char* kProbeFields[] = {"monotonicity", "translation_invariance", "symmetry"};

double field_of(const Probe& p, int i) { return i == 0 ? p.monotonicity : i == 1 ? p.translation_invariance : p.symmetry; }

// "none" | "absolute" (only input tables) | "relative" | "absolute+relative".
std::string group_of(const std::string& encoding) {
  bool absolute = false, relative = false;
  for (const std::string& part : nn::parse_encoding(encoding).parts) {
    const nn::EncodingPoint point = nn::find_encoding_family(part)->point;
    if (point != nn::EncodingPoint::kNone) (point == nn::EncodingPoint::kInput ? absolute : relative) = true;
  }
  return absolute && relative ? "absolute+relative" : absolute ? "absolute" : relative ? "relative" : "none";
}

ordered_json stats_json(const std::vector<double>& v) {
  if (v.empty()) return nullptr;
  const analysis::MeanSd s = analysis::mean_sd(v);
  return {{"mean", s.mean}, {"sd", s.sd}, {"seeds", s.n}};
}

// How a stage ended across runs: the evidence for "trained to a plateau".
struct StageStops {
  std::string stage;
  int64_t most_steps = 0;  // the stage's step cap (the largest when runs differ)
  int64_t runs = 0;
  int64_t stopped_early = 0;  // patience ran out before the cap
  int64_t best_at_most_steps = 0;  // still improving at the cap: the best checkpoint is the last step
  std::vector<double> best_steps;
  std::vector<double> last_gains;  // of the runs with their best at the cap and a validation record
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// A stage's curve file (metrics.jsonl, validation.jsonl): (step, value of `field`) per line, in file order;
// none when the run's curves were not kept (a suite copied with its results only). A line that is not a JSON
// object with an integer step and a numeric field is refused with its file and line, never read as a score.
std::optional<std::vector<std::pair<int64_t, double>>> read_curve(const fs::path& file, const char* field,
                                                                  const char* what) {
  std::ifstream in(file);
  if (!in) return std::nullopt;
  std::vector<std::pair<int64_t, double>> curve;
  for (std::string line; std::getline(in, line);) {
    const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("step") || !j["step"].is_number_integer() ||
        !j.contains(field) || !j[field].is_number()) {
      fail_runtime(kOp, file.string(), ":", curve.size() + 1, ": not a ", what, " line (a JSON object with step and ",
                   field, ")");
    }
    curve.emplace_back(j["step"].get<int64_t>(), j[field].get<double>());
  }
  return curve;
}

// How much a stage's validation score rose over its last evaluation interval (its validation.jsonl's last two
// lines; scores are higher-is-better, the masked-LM one a negated loss): how far from a plateau a stage cut at
// its cap still was. None without the record or with one evaluation.
std::optional<double> last_interval_gain(const fs::path& record) {
  const auto curve = read_curve(record, "score", "validation");
  if (!curve || curve->size() < 2) return std::nullopt;
  return curve->back().second - (*curve)[curve->size() - 2].second;
}

// The step cap of each stage of a run, in its stages' order, from its recorded configuration.
std::vector<int64_t> stage_caps(const json& result) {
  std::vector<int64_t> caps;
  if (!result.contains("config") || !result["config"].contains("stages")) return caps;
  for (const json& stage : result["config"]["stages"]) caps.push_back(stage.value("steps", int64_t{0}));
  return caps;
}

// The fine-tuning stages' evaluation interval from a run's recorded
// configuration ("finetune_stopping": [every, patience]); none when absent.
std::optional<int64_t> finetune_interval(const json& result) {
  const json* config = result.contains("config") ? &result["config"] : nullptr;
  if (config == nullptr || !config->contains("finetune_stopping")) return std::nullopt;
  const json& stopping = (*config)["finetune_stopping"];
  if (!stopping.is_array() || stopping.empty() || !stopping[0].is_number_integer()) return std::nullopt;
  const int64_t every = stopping[0].get<int64_t>();
  return every > 0 ? std::optional<int64_t>(every) : std::nullopt;
}

// The training-batch score the stage logged over the evaluation interval that
// ends at its best step (the mean of its metrics.jsonl lines with step in
// (best - interval, best]): how well the reported checkpoint fits the data it
// was trained on, to read beside its validation score. None when the run's
// curves were not kept (a suite copied with its results only).
std::optional<double> training_score_at(const fs::path& metrics, int64_t best_step, int64_t interval) {
  const auto curve = read_curve(metrics, "accuracy", "metrics");
  if (!curve) return std::nullopt;
  double sum = 0;
  int64_t used = 0;
  for (const auto& [step, accuracy] : *curve) {
    if (step <= best_step - interval || step > best_step) continue;
    sum += accuracy;
    ++used;
  }
  if (used == 0) return std::nullopt;
  return sum / static_cast<double>(used);
}

// One run's fit per fine-tuning stage: task -> (training score at the best step, validation score).
using RunFit = std::map<std::string, std::pair<double, double>>;

RunFit run_fit(const nn::StoredResult& r, const PropertiesOutcome& o) {
  RunFit fit;
  const std::optional<int64_t> interval = finetune_interval(r.json);
  if (!interval) return fit;
  for (const StageOutcome& st : o.stages) {
    if (st.stage == "pretrain") continue;
    const std::optional<double> training =
        training_score_at(r.path.parent_path() / st.stage / "metrics.jsonl", st.best_step, *interval);
    if (training) fit[st.stage] = {*training, st.validation};
  }
  return fit;
}

struct Row {
  std::string encoding;
  std::vector<double> perplexity;                    // per seed (in seed order)
  std::map<std::string, std::map<uint64_t, double>> scores;  // task -> seed -> test accuracy
  std::map<std::string, std::vector<double>> fit_training, fit_validation;  // task -> over the runs with curves
  std::vector<Probe> table, attention;
};

// The encoding a Pearson correlation rests on most, and r without it; null below 4 encodings.
ordered_json without_most_influential(const std::vector<double>& x, const std::vector<double>& y,
                                      const std::vector<std::string>& names) {
  if (x.size() < 4) return nullptr;
  const analysis::LeaveOneOut l = analysis::most_influential_pair(x, y);
  return {{"encoding", names[l.index]}, {"pearson", number_or_null(l.r_without)}};
}

}  // namespace

std::string summarize_properties(const fs::path& suite_dir) {
  // Each result once, in the plan's order, so rows list encodings as the suite does.
  std::vector<PropertiesOutcome> results;
  std::vector<RunFit> fits;  // per result
  std::vector<StageStops> stops;  // in stage order
  for (const nn::StoredResult& r : nn::read_run_results(suite_dir)) {
    check_result_format(r.json, r.path);
    results.push_back(outcome_from_result(r.json, r.path));
    fits.push_back(run_fit(r, results.back()));
    const std::vector<int64_t> caps = stage_caps(r.json);
    const std::vector<StageOutcome>& stages = results.back().stages;
    for (size_t k = 0; k < stages.size(); ++k) {
      auto it = std::find_if(stops.begin(), stops.end(), [&](const StageStops& s) { return s.stage == stages[k].stage; });
      if (it == stops.end()) {
        StageStops first;
        first.stage = stages[k].stage;
        it = stops.insert(stops.end(), std::move(first));
      }
      const int64_t cap = k < caps.size() ? caps[k] : 0;
      it->most_steps = std::max(it->most_steps, cap);
      it->runs += 1;
      it->stopped_early += cap > 0 && stages[k].last_step < cap;
      it->best_at_most_steps += cap > 0 && stages[k].best_step >= cap;
      it->best_steps.push_back(static_cast<double>(stages[k].best_step));
      if (cap > 0 && stages[k].best_step >= cap) {
        const fs::path record = r.path.parent_path() / stages[k].stage / "validation.jsonl";
        if (const std::optional<double> gain = last_interval_gain(record)) it->last_gains.push_back(*gain);
      }
    }
  }
  std::vector<Row> rows;
  std::vector<std::string> tasks;
  std::set<uint64_t> seeds;
  for (size_t k = 0; k < results.size(); ++k) {
    const PropertiesOutcome& o = results[k];
    auto it = std::find_if(rows.begin(), rows.end(), [&](const Row& r) { return r.encoding == o.encoding; });
    if (it == rows.end()) it = rows.insert(rows.end(), Row{o.encoding, {}, {}, {}, {}, {}, {}});
    for (const auto& [task, fit] : fits[k]) {
      it->fit_training[task].push_back(fit.first);
      it->fit_validation[task].push_back(fit.second);
    }
    seeds.insert(o.seed);
    for (const StageOutcome& st : o.stages) {
      if (st.stage == "pretrain") {
        it->perplexity.push_back(std::exp(st.test));
        continue;
      }
      if (std::find(tasks.begin(), tasks.end(), st.stage) == tasks.end()) tasks.push_back(st.stage);
      it->scores[st.stage][o.seed] = st.test;
    }
    if (o.table) it->table.push_back(*o.table);
    if (o.attention) it->attention.push_back(*o.attention);
  }

  ordered_json j;
  j["suite"] = "properties";
  j["runs"] = results.size();
  j["seeds"] = seeds.size();
  j["pretraining"] = {{"metric", "test masked-LM perplexity"}};
  ordered_json task_list = ordered_json::array();
  for (const std::string& t : tasks) {
    const bool span = t == "definition";
    task_list.push_back({{"name", t}, {"kind", span ? "span" : "classification"},
                         {"metric", span ? "exact match" : "accuracy"}});
  }
  j["tasks"] = task_list;
  ordered_json out_rows = ordered_json::array();
  for (const Row& r : rows) {
    ordered_json row;
    row["encoding"] = r.encoding;
    row["group"] = group_of(r.encoding);
    row["pretraining"] = stats_json(r.perplexity);
    ordered_json scores = ordered_json::array();
    for (const std::string& t : tasks) {
      std::vector<double> v;
      const auto found = r.scores.find(t);
      if (found != r.scores.end()) {
        for (const auto& [seed, score] : found->second) v.push_back(score);
      }
      ordered_json cell = stats_json(v);
      if (cell.is_null()) cell = ordered_json::object();
      cell["task"] = t;
      cell["values"] = v;
      const auto fit = r.fit_training.find(t);
      if (fit != r.fit_training.end()) {
        cell["training_at_best"] = stats_json(fit->second);
        cell["validation_at_best"] = stats_json(r.fit_validation.at(t));
      }
      scores.push_back(cell);
    }
    row["scores"] = scores;
    ordered_json indicators;
    for (int i = 0; i < 3; ++i) {
      std::vector<double> v;
      for (const Probe& p : r.table) v.push_back(field_of(p, i));
      indicators[kProbeFields[i]] = stats_json(v);
    }
    ordered_json attention;
    for (int i = 0; i < 3; ++i) {
      std::vector<double> v;
      for (const Probe& p : r.attention) v.push_back(field_of(p, i));
      attention[kProbeFields[i]] = stats_json(v);
    }
    indicators["identical_word_attention"] = attention;
    row["indicators"] = indicators;
    out_rows.push_back(row);
  }
  j["rows"] = out_rows;

  ordered_json stopping = ordered_json::array();
  for (const StageStops& s : stops) {
    const ordered_json gain = s.last_gains.empty() ? ordered_json(nullptr) : ordered_json(median(s.last_gains));
    stopping.push_back({{"stage", s.stage}, {"most_steps", s.most_steps}, {"runs", s.runs},
                        {"stopped_early", s.stopped_early}, {"best_at_most_steps", s.best_at_most_steps},
                        {"median_best_step", median(s.best_steps)}, {"last_interval_gain", gain}});
  }
  j["stopping"] = stopping;

  // Paired t-tests over the seeds both encodings have.
  ordered_json comparisons = ordered_json::array();
  for (const std::string& t : tasks) {
    for (size_t a = 0; a < rows.size(); ++a) {
      for (size_t b = a + 1; b < rows.size(); ++b) {
        const auto fa = rows[a].scores.find(t), fb = rows[b].scores.find(t);
        if (fa == rows[a].scores.end() || fb == rows[b].scores.end()) continue;
        std::vector<double> x, y;
        for (const auto& [seed, score] : fa->second) {
          const auto other = fb->second.find(seed);
          if (other == fb->second.end()) continue;
          x.push_back(score);
          y.push_back(other->second);
        }
        if (x.size() < 2) continue;
        const analysis::PairedTTest test = analysis::paired_t_test(x, y);
        comparisons.push_back({{"task", t}, {"a", rows[a].encoding}, {"b", rows[b].encoding},
                               {"mean_difference", test.mean_difference}, {"t", number_or_null(test.t)},
                               {"p", number_or_null(test.p)}, {"seeds", test.n}});
      }
    }
  }
  add_holm_p(comparisons, "task");
  j["comparisons"] = comparisons;

  std::vector<GroupMember> members;
  for (const Row& r : rows) members.push_back({r.encoding, group_of(r.encoding), &r.scores});
  j["group_comparisons"] = group_comparisons(members, tasks);

  // Across encodings: a probe's mean against a task's mean score (encodings that have both).
  ordered_json correlations = ordered_json::array();
  for (const std::string& t : tasks) {
    for (const bool from_table : {true, false}) {
      for (int i = 0; i < 3; ++i) {
        std::vector<double> x, y;
        std::vector<std::string> names;
        for (const Row& r : rows) {
          const std::vector<Probe>& probes = from_table ? r.table : r.attention;
          const auto found = r.scores.find(t);
          if (probes.empty() || found == r.scores.end() || found->second.empty()) continue;
          double px = 0, sy = 0;
          for (const Probe& p : probes) px += field_of(p, i);
          for (const auto& [seed, score] : found->second) sy += score;
          x.push_back(px / static_cast<double>(probes.size()));
          y.push_back(sy / static_cast<double>(found->second.size()));
          names.push_back(r.encoding);
        }
        if (x.size() < 3) continue;  // two points always correlate perfectly
        const double pearson = analysis::pearson_correlation(x, y), spearman = analysis::spearman_correlation(x, y);
        const auto n = static_cast<int64_t>(x.size());
        correlations.push_back(
            {{"task", t},
             {"property", std::string(from_table ? "" : "identical_word_attention.") + kProbeFields[i]},
             {"pearson", number_or_null(pearson)},
             {"pearson_p", number_or_null(analysis::correlation_p(pearson, n))},
             {"spearman", number_or_null(spearman)},
             {"spearman_p", number_or_null(analysis::spearman_p(x, y))},
             {"encodings", x.size()},
             {"pearson_without", without_most_influential(x, y, names)}});
      }
    }
  }
  j["correlations"] = correlations;
  return j.dump(2) + "\n";
}

std::string properties_table(const std::string& summary) {
  const json j = json::parse(summary);
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "test scores (mean +- sd over seeds), %d runs\n", j.value("runs", 0));
  out += line;
  std::snprintf(line, sizeof line, "%-48s %-17s %16s", "encoding", "group", "pretrain ppl");
  out += line;
  for (const json& t : j.at("tasks")) {
    std::snprintf(line, sizeof line, " %16s", t.at("name").get<std::string>().c_str());
    out += line;
  }
  out += "\n";
  const auto cell = [](const json& c, double scale) {
    char text[64];
    if (c.is_null() || !c.contains("mean")) return std::string("n/a");
    std::snprintf(text, sizeof text, "%.3f +- %.3f", c.at("mean").get<double>() * scale,
                  c.at("sd").get<double>() * scale);
    return std::string(text);
  };
  for (const json& r : j.at("rows")) {
    std::snprintf(line, sizeof line, "%-48s %-17s %16s", r.at("encoding").get<std::string>().c_str(),
                  r.at("group").get<std::string>().c_str(), cell(r.at("pretraining"), 1).c_str());
    out += line;
    for (const json& s : r.at("scores")) {
      std::snprintf(line, sizeof line, " %16s", cell(s, 1).c_str());
      out += line;
    }
    out += "\n";
  }
  int64_t significant = 0, after_holm = 0;
  for (const json& c : j.at("comparisons")) significant += below_005(c, "p"), after_holm += below_005(c, "p_holm");
  std::snprintf(line, sizeof line,
                "paired t-tests: %zu, p < 0.05 in %lld, %lld after Holm's correction per task (summary.json: "
                "comparisons, correlations)\n",
                j.at("comparisons").size(), static_cast<long long>(significant), static_cast<long long>(after_holm));
  out += line;
  for (const json& g : j.value("group_comparisons", json::array())) {
    std::snprintf(line, sizeof line, "groups: %s, %s %.3f vs %s %.3f (means over their encodings), b - a %+.3f, "
                  "p %.3g\n", g.at("task").get<std::string>().c_str(), g.at("a").get<std::string>().c_str(),
                  g.at("mean_a").get<double>(), g.at("b").get<std::string>().c_str(), g.at("mean_b").get<double>(),
                  -g.at("mean_difference").get<double>(), g.at("p").is_number() ? g.at("p").get<double>() : NAN);
    out += line;
  }
  for (const json& s : j.value("stopping", json::array())) {
    std::snprintf(line, sizeof line, "stopping: %s stopped early in %lld of %lld runs, best at its %lld-step cap in %lld",
                  s.at("stage").get<std::string>().c_str(), static_cast<long long>(s.at("stopped_early").get<int64_t>()),
                  static_cast<long long>(s.at("runs").get<int64_t>()),
                  static_cast<long long>(s.at("most_steps").get<int64_t>()),
                  static_cast<long long>(s.at("best_at_most_steps").get<int64_t>()));
    out += line;
    if (s.contains("last_interval_gain") && s.at("last_interval_gain").is_number()) {
      std::snprintf(line, sizeof line, " (median gain over their last evaluation interval %.4g)",
                    s.at("last_interval_gain").get<double>());
      out += line;
    }
    out += "\n";
  }
  return out;
}

}  // namespace posenc::experiments
