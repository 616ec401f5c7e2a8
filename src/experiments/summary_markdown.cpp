// summary.json as Markdown (posenc/experiments/summary_markdown.h).
#include "posenc/experiments/summary_markdown.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "json_numbers.h"
#include "posenc/error.h"

namespace posenc::experiments {
namespace {

using nlohmann::json;

constexpr const char* kOp = "experiment";

std::string format(const char* spec, double value) {
  char text[64];
  std::snprintf(text, sizeof text, spec, value);
  return text;
}

// "0.728 ± 0.004" (digits: decimals), "0.728" from one seed, "—" without data.
std::string mean_sd(const json& cell, int digits) {
  if (!cell.is_object() || !cell.contains("mean") || !cell.at("mean").is_number()) return "—";
  const std::string spec = "%." + std::to_string(digits) + "f";
  std::string out = format(spec.c_str(), cell.at("mean").get<double>());
  if (cell.value("seeds", 0) > 1) {
    out += " ± ";
    out += format(spec.c_str(), cell.value("sd", 0.0));
  }
  return out;
}

// "0.92 / 1.00 / 1.00": monotonicity / translation invariance / symmetry means.
std::string probe_means(const json& probes) {
  std::string out;
  for (const char* field : {"monotonicity", "translation_invariance", "symmetry"}) {
    const json& cell = probes.is_object() && probes.contains(field) ? probes.at(field) : json();
    if (!cell.is_object() || !cell.contains("mean") || !cell.at("mean").is_number()) return "—";
    if (!out.empty()) out += " / ";
    out += format("%.2f", cell.at("mean").get<double>());
  }
  return out;
}

// " text |": one cell after the row's previous "|".
std::string cell_text(const std::string& text) {
  std::string out = " ";
  out += text;
  out += " |";
  return out;
}

std::string p_value(const json& p) {
  if (!p.is_number()) return "n/a";
  const double v = p.get<double>();
  return v < 0.001 ? "< 0.001" : format("%.3f", v);
}

// "p 0.012, Holm 0.310" (Holm's adjusted p where the summary has it: those written since it was added).
std::string p_text(const json& comparison) {
  std::string text = "p " + p_value(comparison.at("p"));
  if (comparison.contains("p_holm")) text += ", Holm " + p_value(comparison.at("p_holm"));
  return text;
}

// Comparisons whose `key` is below 0.05; a null or missing value counts as not.
int64_t significant_count(const json& comparisons, const char* key) {
  int64_t n = 0;
  for (const json& c : comparisons) n += below_005(c, key);
  return n;
}

bool has_holm(const json& comparisons) {
  return std::any_of(comparisons.begin(), comparisons.end(), [](const json& c) { return c.contains("p_holm"); });
}

// "12 with p < 0.05 (3 after Holm's correction within each task)", the second part where the summary has it.
std::string significant_text(const json& comparisons, const char* family) {
  std::string text = std::to_string(significant_count(comparisons, "p")) + " with p < 0.05";
  if (has_holm(comparisons)) {
    text += " (" + std::to_string(significant_count(comparisons, "p_holm")) +
            " after Holm's correction within each " + family + ")";
  }
  return text;
}

// " t1 | t2 |\n|---|---|---|\n": the rest of a header row that began "| encoding |", and its rule.
std::string task_columns(const std::vector<std::string>& tasks) {
  std::string out;
  for (const std::string& t : tasks) out += " " + t + " |";
  out += "\n|---|";
  for (size_t i = 0; i < tasks.size(); ++i) out += "---|";
  return out + "\n";
}

// The fit of the reported checkpoints, where the runs' curves are kept:
// "0.93 / 0.54" is the training-batch score over the evaluation interval
// ending at the best step / the validation score there (means over seeds).
std::string fit_markdown(const json& rows, const std::vector<std::string>& tasks) {
  const auto has_fit = [](const json& row) {
    for (const json& s : row.at("scores")) {
      if (s.contains("training_at_best")) return true;
    }
    return false;
  };
  if (std::none_of(rows.begin(), rows.end(), has_fit)) return "";
  std::ostringstream out;
  out << "\nFit of the reported checkpoints: the training-batch score logged over the evaluation interval ending at "
         "the best step / the validation score there (means over the seeds whose curves are kept). A training score "
         "far above the validation score is the training split memorized.\n\n| encoding |";
  out << task_columns(tasks);
  for (const json& r : rows) {
    out << "| " << r.at("encoding").get<std::string>() << " |";
    for (const json& s : r.at("scores")) {
      const json training = s.value("training_at_best", json()), validation = s.value("validation_at_best", json());
      const bool both = training.is_object() && validation.is_object();
      out << cell_text(both ? format("%.2f", training.at("mean").get<double>()) + " / " +
                                  format("%.2f", validation.at("mean").get<double>())
                            : "—");
    }
    out << "\n";
  }
  return out.str();
}

// The reference of the "against" tables: `requested`, or the first row's encoding when empty.
std::string reference_row(const json& rows, const std::string& requested) {
  std::string names;
  for (const json& r : rows) {
    const std::string name = r.at("encoding").get<std::string>();
    if (name == requested) return name;
    names += (names.empty() ? "" : ", ") + name;
  }
  if (requested.empty()) return rows.empty() ? "" : rows.front().at("encoding").get<std::string>();
  fail_argument(kOp, "reference must be an encoding of the summary (", names, "), got '", requested, "'");
}

// Wang et al.'s comparison, by group: "| lexname | absolute / relative | 0.803 (3) | 0.806 (6) | +0.003 (p 0.167,
// Holm 0.167) |". Only for summaries that have it.
std::string groups_markdown(const json& groups) {
  if (groups.empty()) return "";
  std::ostringstream out;
  out << "\nBy group: per seed, the mean test score of each group's encodings (how many in parentheses), and a "
         "paired t-test over the seeds every encoding of both groups has: a test of these encodings' average, "
         "not of every absolute or relative encoding there could be. Holm over the group pairs of the task.\n\n"
         "| task | groups a / b | a | b | b − a |\n|---|---|---|---|---|\n";
  for (const json& g : groups) {
    out << "| " << g.at("task").get<std::string>() << " | " << g.at("a").get<std::string>() << " / "
        << g.at("b").get<std::string>() << " | " << format("%.3f", g.at("mean_a").get<double>()) << " ("
        << g.at("encodings_a").get<int64_t>() << ") | " << format("%.3f", g.at("mean_b").get<double>()) << " ("
        << g.at("encodings_b").get<int64_t>() << ") | " << format("%+.3f", -g.at("mean_difference").get<double>())
        << " (" << p_text(g) << ") |\n";
  }
  std::string left;
  for (const json& g : groups) {
    for (const json& name : g.value("left_out", json::array())) {
      left += (left.empty() ? "" : "; ") + g.at("task").get<std::string>() + " " + g.at("a").get<std::string>() +
              " / " + g.at("b").get<std::string>() + ": " + name.get<std::string>();
    }
  }
  if (!left.empty()) out << "\nLeft out of the group means (fewer seeds than the others so far): " << left << ".\n";
  return out.str();
}

// Pearson's r without the encoding it rests on most, "0.21 (p-rope)"; "—" below 4 encodings and in summaries
// written before the field.
std::string without_cell(const json& correlation) {
  const auto w = correlation.find("pearson_without");
  if (w == correlation.end() || !w->is_object()) return "—";
  const json& r = w->at("pearson");
  return (r.is_number() ? format("%.2f", r.get<double>()) : std::string("n/a")) + " (" +
         w->at("encoding").get<std::string>() + ")";
}

// Each run's test score, in seed order: what a mean ± sd over 5 seeds hides (a task that some seeds solve and
// others do not). Only for summaries that keep the values.
std::string per_seed_markdown(const json& rows, const std::vector<std::string>& tasks) {
  const auto has_values = [](const json& row) {
    return std::any_of(row.at("scores").begin(), row.at("scores").end(),
                       [](const json& s) { return s.contains("values"); });
  };
  if (std::none_of(rows.begin(), rows.end(), has_values)) return "";
  std::ostringstream out;
  out << "\nTest scores per run, in seed order.\n\n| encoding |";
  out << task_columns(tasks);
  for (const json& r : rows) {
    out << "| " << r.at("encoding").get<std::string>() << " |";
    for (const json& s : r.at("scores")) {
      std::string cell;
      for (const json& v : s.value("values", json::array())) {
        cell += (cell.empty() ? "" : ", ") + format("%.3f", v.get<double>());
      }
      out << cell_text(cell.empty() ? "—" : cell);
    }
    out << "\n";
  }
  return out.str();
}

std::string properties_markdown(const json& j, const std::string& requested_reference) {
  std::vector<std::string> tasks, metrics;
  for (const json& t : j.at("tasks")) {
    tasks.push_back(t.at("name").get<std::string>());
    metrics.push_back(t.value("metric", "score"));
  }
  std::ostringstream out;
  out << "| encoding | group | seeds | masked-LM perplexity |";
  for (size_t i = 0; i < tasks.size(); ++i) out << " " << tasks[i] << " " << metrics[i] << " |";
  out << " table: mono. / trans. inv. / sym. | identical-word attention: mono. / trans. inv. / sym. "
         "|\n|---|---|---|---|";
  for (size_t i = 0; i < tasks.size(); ++i) out << "---|";
  out << "---|---|\n";
  const json& rows = j.at("rows");
  for (const json& r : rows) {
    const json& indicators = r.at("indicators");
    const json& pretraining = r.at("pretraining");
    out << "| " << r.at("encoding").get<std::string>() << " | " << r.value("group", "") << " | "
        << (pretraining.is_object() ? pretraining.value("seeds", 0) : 0) << " | " << mean_sd(r.at("pretraining"), 1)
        << " |";
    for (const json& s : r.at("scores")) out << cell_text(mean_sd(s, 3));
    out << " " << probe_means(indicators) << " | " << probe_means(indicators.value("identical_word_attention", json()))
        << " |\n";
  }

  const std::string reference = reference_row(rows, requested_reference);
  out << "\nPaired t-tests over shared seeds against " << reference << " (difference of test scores, encoding minus "
      << reference << "; p two-sided"
      << (has_holm(j.at("comparisons")) ? "; Holm: p adjusted by Holm's correction over all pairs of the task" : "")
      << "). " << j.at("comparisons").size() << " pairs in all, " << significant_text(j.at("comparisons"), "task")
      << " (summary.json: comparisons).\n\n| encoding |";
  out << task_columns(tasks);
  for (const json& row : rows) {
    const std::string name = row.at("encoding").get<std::string>();
    if (name == reference) continue;
    out << "| " << name << " |";
    for (const std::string& t : tasks) {
      std::string cell = "—";
      for (const json& c : j.at("comparisons")) {
        if (c.at("task") != t) continue;
        // mean_difference is a - b; the cell shows the encoding minus the reference.
        double sign = 0;
        if (c.at("a") == reference && c.at("b") == name) sign = -1;
        if (c.at("a") == name && c.at("b") == reference) sign = 1;
        if (sign == 0) continue;
        cell = format("%+.3f", sign * c.at("mean_difference").get<double>()) + " (" + p_text(c) + ")";
      }
      out << " " << cell << " |";
    }
    out << "\n";
  }

  if (j.contains("stopping")) {
    out << "\nHow each stage ended (early stopping on validation, else at its most steps). A best checkpoint at the "
           "most steps means the stage was still improving when it stopped; the last column says by how much: the "
           "median over those runs of the validation score's rise over their last evaluation interval (the "
           "masked-LM score is the negated loss, in nats).\n\n| stage | most steps | runs | stopped early | best at "
           "the most steps | median best step | their last gain |\n|---|---|---|---|---|---|---|\n";
    for (const json& s : j.at("stopping")) {
      const json& gain = s.at("last_interval_gain");
      out << "| " << s.at("stage").get<std::string>() << " | " << s.at("most_steps").get<int64_t>() << " | "
          << s.at("runs").get<int64_t>() << " | " << s.at("stopped_early").get<int64_t>() << " | "
          << s.at("best_at_most_steps").get<int64_t>() << " | " << format("%.0f", s.at("median_best_step").get<double>())
          << " | " << (gain.is_number() ? format("%.4f", gain.get<double>()) : "—") << " |\n";
    }
  }

  out << groups_markdown(j.value("group_comparisons", json::array()));
  out << per_seed_markdown(rows, tasks);
  out << fit_markdown(rows, tasks);

  out << "\nProbe means against task means across encodings (p two-sided: Pearson's from the t test with encodings "
         "- 2 degrees of freedom; Spearman's exact, over every ordering, up to 10 encodings, the same t test "
         "beyond; the last column: Pearson's r without the encoding that moves it the most, named).\n\n"
         "| task | property | Pearson | Spearman | encodings | Pearson without |\n|---|---|---|---|---|---|\n";
  for (const json& c : j.at("correlations")) {
    const auto cell = [&](const char* r, const char* p) {
      const json& v = c.at(r);
      return v.is_number() ? format("%.2f", v.get<double>()) + " (p " + p_value(c.at(p)) + ")" : std::string("n/a");
    };
    out << "| " << c.at("task").get<std::string>() << " | " << c.at("property").get<std::string>() << " | "
        << cell("pearson", "pearson_p") << " | " << cell("spearman", "spearman_p") << " | "
        << c.at("encodings").get<int64_t>() << " | " << without_cell(c) << " |\n";
  }
  return out.str();
}

// The comparison of rows a and b at a length, as b / a when flipped; null when not tested.
const json* find_comparison(const json& comparisons, int64_t seq_len, const std::string& a, const std::string& b,
                            bool* flipped) {
  for (const json& c : comparisons) {
    if (c.at("seq_len").get<int64_t>() != seq_len) continue;
    if (c.at("a") == a && c.at("b") == b) {
      *flipped = false;
      return &c;
    }
    if (c.at("a") == b && c.at("b") == a) {
      *flipped = true;
      return &c;
    }
  }
  return nullptr;
}

// "0.87× (p 0.012, Holm 0.310)": perplexity of `a` over `b`, geometric mean over the shared seeds.
std::string ratio_cell(const json& comparisons, int64_t seq_len, const std::string& a, const std::string& b) {
  bool flipped = false;
  const json* c = find_comparison(comparisons, seq_len, a, b, &flipped);
  if (c == nullptr) return "—";
  const double ratio = std::exp((flipped ? -1 : 1) * c->at("mean_log_ratio").get<double>());
  return format("%.2f×", ratio) + " (" + p_text(*c) + ")";
}

// Two tables from the paired t-tests on log perplexity: at each length the
// lowest mean perplexity against the next lowest, and every row against the first.
std::string extrapolation_comparisons_markdown(const json& j, const std::string& reference) {
  const json& comparisons = j.at("comparisons");
  const json& rows = j.at("rows");
  std::ostringstream out;
  out << "\nPaired t-tests over shared seeds on the test loss (log perplexity); a ratio is the geometric mean over "
         "seeds of one perplexity over the other, p two-sided"
      << (has_holm(comparisons) ? "; Holm: p adjusted by Holm's correction over all pairs at that length" : "")
      << ". " << comparisons.size() << " pairs in all, " << significant_text(comparisons, "length")
      << " (summary.json: comparisons).\n\n| length | lowest | next | lowest / next |\n|---|---|---|---|\n";
  const std::vector<int64_t> lengths = j.at("lengths").get<std::vector<int64_t>>();
  for (size_t k = 0; k < lengths.size(); ++k) {
    std::vector<std::pair<double, std::string>> ranked;
    for (const json& r : rows) {
      const json& c = r.at("test_perplexity").at(k);
      if (c.contains("perplexity_mean")) ranked.emplace_back(c.at("perplexity_mean").get<double>(), r.at("encoding").get<std::string>());
    }
    if (ranked.size() < 2) continue;
    std::sort(ranked.begin(), ranked.end());
    out << "| " << lengths[k] << " | " << ranked[0].second << " | " << ranked[1].second << " |"
        << cell_text(ratio_cell(comparisons, lengths[k], ranked[0].second, ranked[1].second)) << "\n";
  }
  if (rows.size() < 2) return out.str();
  out << "\nAgainst " << reference << " (perplexity of the encoding over " << reference << "'s):\n\n| encoding |";
  std::string rule = "|---|";
  for (int64_t L : lengths) {
    out << " " << L << " |";
    rule += "---|";
  }
  out << "\n" << rule << "\n";
  for (const json& row : rows) {
    const std::string name = row.at("encoding").get<std::string>();
    if (name == reference) continue;
    out << "| " << name << " |";
    for (int64_t L : lengths) out << cell_text(ratio_cell(comparisons, L, name, reference));
    out << "\n";
  }
  return out.str();
}

std::string extrapolation_markdown(const json& j, const std::string& requested_reference) {
  const std::string reference = reference_row(j.at("rows"), requested_reference);
  std::ostringstream out;
  out << "| encoding |";
  std::string rule = "|---|";
  for (const json& length : j.at("lengths")) {
    out << " " << length.get<int64_t>() << " |";
    rule += "---|";
  }
  out << "\n" << rule << "\n";
  std::vector<std::string> notes;
  for (const json& r : j.at("rows")) {
    out << "| " << r.at("encoding").get<std::string>() << " |";
    for (const json& c : r.at("test_perplexity")) {
      if (c.contains("not_applicable")) {
        const std::string reason = c.at("not_applicable").get<std::string>();
        size_t n = 0;
        while (n < notes.size() && notes[n] != reason) ++n;
        if (n == notes.size()) notes.push_back(reason);
        out << " n/a [" << n + 1 << "] |";
        continue;
      }
      const json cell = {
          {"mean", c.at("perplexity_mean")}, {"sd", c.value("perplexity_sd", 0.0)}, {"seeds", c.value("seeds", 0)}};
      out << cell_text(mean_sd(cell, 1));
    }
    out << "\n";
  }
  if (!notes.empty()) out << "\n";
  for (size_t n = 0; n < notes.size(); ++n) out << "[" << n + 1 << "] " << notes[n] << "\n";
  // One seed each (as --quick runs) pairs nothing: no tables of dashes.
  if (j.contains("comparisons") && !j.at("comparisons").empty()) out << extrapolation_comparisons_markdown(j, reference);
  return out.str();
}

}  // namespace

std::string summary_markdown(const std::string& summary_json, const std::string& reference) {
  json j;
  try {
    j = json::parse(summary_json);
  } catch (const json::exception& e) {
    fail_argument(kOp, "summary must be the JSON of posenc experiment report, got text that does not parse (", e.what(),
                  ")");
  }
  const std::string suite = j.is_object() ? j.value("suite", "") : "";
  try {
    if (suite == "properties") return properties_markdown(j, reference);
    if (suite == "extrapolation") return extrapolation_markdown(j, reference);
  } catch (const json::exception& e) {
    fail_argument(kOp, "summary of the '", suite, "' suite is missing a field or has the wrong type (", e.what(), ")");
  }
  fail_argument(kOp, "summary must name the suite properties or extrapolation, got '", suite, "'");
}

}  // namespace posenc::experiments
