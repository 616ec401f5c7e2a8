// The "properties" suite: per task the scores grouped by the encoding's
// group beside the pretraining perplexity, a dot plot, and the paired t-test
// p-values of every pair; then the indicators and their correlations with
// the scores.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "experiments_internal.h"
#include "html_text.h"
#include "posenc/plot/charts.h"

namespace posenc::report::detail {
namespace {

// The indicators of a table, and the identical-word attention: one number
// ({"mean", ..}) or the same three read on the attention (keys
// "identical_word_attention.monotonicity", ..., as the correlations name them).
constexpr const char* kTableIndicators[] = {"monotonicity", "translation_invariance", "symmetry"};
constexpr const char* kAttention = "identical_word_attention";
constexpr const char* kGroupOrder[] = {"none", "absolute", "relative", "absolute+relative"};

struct Task {
  std::string name, kind, metric;
  std::optional<int64_t> classes;
};

struct Score {
  Stat stat;
  std::vector<double> values;  // per seed, when given
  // The fit of the reported checkpoints, where the runs' curves were kept:
  // training-batch score over the evaluation interval ending at the best step, and validation there.
  std::optional<Stat> training_at_best, validation_at_best;
};

struct Row {
  std::string encoding, group;
  Stat pretraining;
  std::vector<Score> scores;  // by task, in the tasks' order
  std::map<std::string, Stat> indicators;  // by key; absent: null in the summary (no table, not measured)
};

struct Comparison {
  std::string task, a, b;
  std::optional<double> mean_difference, t, p;
  int64_t seeds = 0;
  std::optional<double> p_holm;  // absent from summaries written before Holm's correction
};

struct Correlation {
  std::string task, property;
  std::optional<double> pearson, spearman;
  int64_t encodings = 0;
  std::optional<double> pearson_p, spearman_p;  // optional in the summary: older ones lack them
  // The encoding r rests on most and r without it (absent below 4 encodings and in older summaries).
  std::optional<std::string> influential;
  std::optional<double> pearson_without;
};

// How a stage ended across runs (optional in the summary: older ones lack it).
struct StageStops {
  std::string stage;
  int64_t most_steps = 0, runs = 0, stopped_early = 0, best_at_most_steps = 0;
  double median_best_step = 0;
  std::optional<double> last_interval_gain;  // null when no run has its curves; absent from older summaries
};

// Wang et al.'s comparison by group: per seed the mean score of each group's encodings, paired over seeds.
struct GroupComparison {
  std::string task, a, b;
  int64_t encodings_a = 0, encodings_b = 0;
  double mean_a = 0, mean_b = 0, mean_difference = 0;  // a - b
  std::optional<double> p;
  int64_t seeds = 0;
  std::optional<double> p_holm;
};

struct Properties {
  int64_t runs = 0, seeds = 0;
  std::string pretraining_metric;
  std::optional<int64_t> pretraining_seq_len;
  std::vector<std::string> indicator_keys;  // the columns: every key some row has, table ones first
  std::vector<Task> tasks;
  std::vector<Row> rows;  // grouped: kGroupOrder, then other groups as first met; the summary's order inside
  std::vector<Comparison> comparisons;
  std::vector<Correlation> correlations;
  std::vector<StageStops> stopping;
  std::vector<GroupComparison> groups;  // empty for summaries written before them
};

bool known(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

Properties parse(const Json& j, const SummaryReader& r) {
  Properties p;
  p.runs = r.count(j, "runs", "");
  p.seeds = r.count(j, "seeds", "");
  const Json& pre = r.object(j, "pretraining", "");
  p.pretraining_metric = r.text(pre, "metric", "pretraining");
  if (pre.contains("seq_len")) p.pretraining_seq_len = r.count(pre, "seq_len", "pretraining");
  p.indicator_keys.assign(std::begin(kTableIndicators), std::end(kTableIndicators));
  const Json& tasks = r.array(j, "tasks", "");
  std::vector<std::string> task_names;
  for (size_t k = 0; k < tasks.size(); ++k) {
    const std::string path = item_path("tasks", k);
    Task t{r.text(tasks[k], "name", path), r.text(tasks[k], "kind", path), r.text(tasks[k], "metric", path), {}};
    if (tasks[k].contains("classes")) t.classes = r.count(tasks[k], "classes", path);
    if (known(task_names, t.name)) r.invalid(field_path(path, "name"));
    task_names.push_back(t.name);
    p.tasks.push_back(std::move(t));
  }
  const Json& rows = r.array(j, "rows", "");
  std::vector<Row> read;
  std::vector<std::string> encodings;
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::string path = item_path("rows", i);
    Row row;
    row.encoding = r.text(rows[i], "encoding", path);
    if (known(encodings, row.encoding)) r.invalid(field_path(path, "encoding"));
    encodings.push_back(row.encoding);
    row.group = r.text(rows[i], "group", path);
    row.pretraining = read_stat(r, r.field(rows[i], "pretraining", path), field_path(path, "pretraining"));
    const std::string scores_path = field_path(path, "scores");
    const Json& scores = r.array(rows[i], "scores", path);
    if (scores.size() != p.tasks.size()) r.invalid(scores_path);
    for (size_t k = 0; k < scores.size(); ++k) {
      const std::string score_path = item_path(scores_path, k);
      if (r.text(scores[k], "task", score_path) != p.tasks[k].name) r.invalid(field_path(score_path, "task"));
      Score s{read_stat(r, scores[k], score_path), {}, {}, {}};
      if (scores[k].contains("training_at_best") && scores[k].contains("validation_at_best")) {
        s.training_at_best = read_stat(r, scores[k].at("training_at_best"), field_path(score_path, "training_at_best"));
        s.validation_at_best =
            read_stat(r, scores[k].at("validation_at_best"), field_path(score_path, "validation_at_best"));
      }
      if (scores[k].contains("values")) {
        const Json& values = r.array(scores[k], "values", score_path);
        for (size_t v = 0; v < values.size(); ++v) {
          if (!values[v].is_number()) r.invalid(item_path(field_path(score_path, "values"), v));
          s.values.push_back(values[v].get<double>());
        }
      }
      row.scores.push_back(std::move(s));
    }
    const std::string ind_path = field_path(path, "indicators");
    const Json& indicators = r.object(rows[i], "indicators", path);
    auto take = [&](const std::string& key, const Json& v, const std::string& at) {
      if (!known(p.indicator_keys, key)) p.indicator_keys.push_back(key);
      if (!v.is_null()) row.indicators[key] = read_stat(r, v, at);
    };
    for (const char* key : kTableIndicators) take(key, r.field(indicators, key, ind_path), field_path(ind_path, key));
    const std::string attention_path = field_path(ind_path, kAttention);
    const Json& attention = r.field(indicators, kAttention, ind_path);
    if (attention.is_object() && !attention.contains("mean") && !attention.contains("seeds")) {
      for (const char* key : kTableIndicators) {
        take(std::string(kAttention) + "." + key, r.field(attention, key, attention_path),
             field_path(attention_path, key));
      }
    } else {
      take(kAttention, attention, attention_path);
    }
    read.push_back(std::move(row));
  }
  // Grouped as the paper's tables are: no position, absolute, relative, both.
  std::vector<std::string> groups(std::begin(kGroupOrder), std::end(kGroupOrder));
  for (const Row& row : read) {
    if (!known(groups, row.group)) groups.push_back(row.group);
  }
  for (const std::string& g : groups) {
    for (const Row& row : read) {
      if (row.group == g) p.rows.push_back(row);
    }
  }
  const Json& comparisons = r.array(j, "comparisons", "");
  for (size_t k = 0; k < comparisons.size(); ++k) {
    const std::string path = item_path("comparisons", k);
    const Json& c = comparisons[k];
    Comparison cmp{r.text(c, "task", path),
                   r.text(c, "a", path),
                   r.text(c, "b", path),
                   r.number_or_null(c, "mean_difference", path),
                   r.number_or_null(c, "t", path),
                   r.probability_or_null(c, "p", path),
                   r.count(c, "seeds", path),
                   r.probability_or_null(c, "p_holm", path, true)};
    if (!known(task_names, cmp.task)) r.invalid(field_path(path, "task"));
    if (!known(encodings, cmp.a)) r.invalid(field_path(path, "a"));
    if (!known(encodings, cmp.b)) r.invalid(field_path(path, "b"));
    p.comparisons.push_back(std::move(cmp));
  }
  const Json& correlations = r.array(j, "correlations", "");
  for (size_t k = 0; k < correlations.size(); ++k) {
    const std::string path = item_path("correlations", k);
    const Json& c = correlations[k];
    Correlation cor{r.text(c, "task", path), r.text(c, "property", path), r.number_or_null(c, "pearson", path),
                    r.number_or_null(c, "spearman", path), r.count(c, "encodings", path),
                    r.probability_or_null(c, "pearson_p", path, true),
                    r.probability_or_null(c, "spearman_p", path, true), {}, {}};
    if (!known(task_names, cor.task)) r.invalid(field_path(path, "task"));
    if (c.contains("pearson_without") && !c.at("pearson_without").is_null()) {
      const std::string without = field_path(path, "pearson_without");
      const Json& w = r.object(c, "pearson_without", path);
      cor.influential = r.text(w, "encoding", without);
      if (!known(encodings, *cor.influential)) r.invalid(field_path(without, "encoding"));
      cor.pearson_without = r.number_or_null(w, "pearson", without);
    }
    p.correlations.push_back(std::move(cor));
  }
  if (j.contains("group_comparisons")) {
    const Json& groups = r.array(j, "group_comparisons", "");
    for (size_t k = 0; k < groups.size(); ++k) {
      const std::string path = item_path("group_comparisons", k);
      const Json& g = groups[k];
      GroupComparison c{r.text(g, "task", path),           r.text(g, "a", path),
                        r.text(g, "b", path),              r.count(g, "encodings_a", path),
                        r.count(g, "encodings_b", path),   r.number(g, "mean_a", path),
                        r.number(g, "mean_b", path),       r.number(g, "mean_difference", path),
                        r.probability_or_null(g, "p", path), r.count(g, "seeds", path),
                        r.probability_or_null(g, "p_holm", path, true)};
      if (!known(task_names, c.task)) r.invalid(field_path(path, "task"));
      p.groups.push_back(std::move(c));
    }
  }
  if (j.contains("stopping")) {
    const Json& stopping = r.array(j, "stopping", "");
    for (size_t k = 0; k < stopping.size(); ++k) {
      const std::string path = item_path("stopping", k);
      const Json& s = stopping[k];
      p.stopping.push_back({r.text(s, "stage", path), r.count(s, "most_steps", path), r.count(s, "runs", path),
                            r.count(s, "stopped_early", path), r.count(s, "best_at_most_steps", path),
                            r.number(s, "median_best_step", path),
                            r.number_or_null(s, "last_interval_gain", path, true)});
    }
  }
  return p;
}

// Scores are accuracies and exact-match rates: higher is better, unless the
// metric names a perplexity, a loss or an error.
bool lower_is_better(std::string_view metric) {
  return metric.find("perplexity") != std::string_view::npos || metric.find("loss") != std::string_view::npos ||
         metric.find("error") != std::string_view::npos;
}

// The best mean among measured rows (ties: all of them are bold).
std::optional<double> best_of(const std::vector<const Stat*>& stats, bool lower) {
  std::optional<double> best;
  for (const Stat* s : stats) {
    if (s->seeds == 0 || !std::isfinite(s->mean)) continue;
    if (!best || (lower ? s->mean < *best : s->mean > *best)) best = s->mean;
  }
  return best;
}

// "translation_invariance" -> "translation invariance";
// "identical_word_attention.symmetry" -> "identical-word attention: symmetry".
std::string indicator_name(std::string_view key) {
  std::string name(key);
  if (name.starts_with(kAttention)) name = "identical-word attention" + name.substr(std::string_view(kAttention).size());
  std::replace(name.begin(), name.end(), '_', ' ');
  const size_t dot = name.find('.');
  if (dot != std::string::npos) name.replace(dot, 1, ": ");
  return name;
}

// The colour of a group's dots and swatches: its family's first shade.
plot::Rgb group_color(const std::string& group) {
  return family_color(known({std::begin(kGroupOrder), std::end(kGroupOrder)}, group) ? group : "other", 0);
}

std::string task_id(const std::string& section_id, size_t task) {
  return section_id + "-task-" + std::to_string(task + 1);
}

std::string score_table(const Properties& p, size_t task) {
  const Task& t = p.tasks[task];
  std::vector<const Stat*> scores, pretraining;
  for (const Row& row : p.rows) scores.push_back(&row.scores[task].stat), pretraining.push_back(&row.pretraining);
  const std::optional<double> best = best_of(scores, lower_is_better(t.metric));
  const std::optional<double> best_pre = best_of(pretraining, true);
  const bool fit = std::any_of(p.rows.begin(), p.rows.end(),
                               [&](const Row& row) { return row.scores[task].training_at_best.has_value(); });
  std::string h = "<table>\n<tr><th class=\"name\">encoding</th><th>" + escape_html(t.metric) +
                  "<br><small>test, mean &plusmn; sd</small></th><th>seeds</th><th>pretraining<br><small>" +
                  escape_html(p.pretraining_metric) + "</small></th>" +
                  (fit ? "<th>fit at the best step<br><small>training / validation</small></th>" : "") + "</tr>\n";
  std::string group;
  for (const Row& row : p.rows) {
    if (row.group != group || &row == &p.rows.front()) {
      group = row.group;
      h += "<tr class=\"group\"><th colspan=\"" + std::to_string(fit ? 5 : 4) +
           "\"><span class=\"swatch\" style=\"background:" +
           css_color(group_color(group)) + "\"></span>" + escape_html(group) + "</th></tr>\n";
    }
    const Score& s = row.scores[task];
    std::string values;
    for (size_t v = 0; v < s.values.size(); ++v) values += (v ? ", " : "per seed: ") + fixed_text(s.values[v], 4);
    const bool is_best = s.stat.seeds > 0 && best && s.stat.mean == *best;
    const bool is_best_pre = row.pretraining.seeds > 0 && best_pre && row.pretraining.mean == *best_pre;
    h += "<tr><td class=\"name\">" + escape_html(row.encoding) + "</td><td" + (is_best ? " class=\"best\"" : "") +
         (values.empty() ? "" : " title=\"" + values + "\"") + ">" + stat_text(s.stat, 3) + "</td><td>" +
         std::to_string(s.stat.seeds) + "</td><td" + (is_best_pre ? " class=\"best\"" : "") + ">" +
         stat_text(row.pretraining, perplexity_decimals(row.pretraining.mean)) + "</td>";
    if (fit) {
      h += "<td>" + (s.training_at_best ? fixed_text(s.training_at_best->mean, 2) + " / " +
                                              fixed_text(s.validation_at_best->mean, 2)
                                        : std::string("n/a")) + "</td>";
    }
    h += "</tr>\n";
  }
  return h + "</table>\n";
}

std::optional<Figure> score_figure(const Properties& p, size_t task, const std::string& id) {
  const Task& t = p.tasks[task];
  plot::DotFigure f;
  f.title = t.name + ": test " + t.metric + " (mean ± 1 sd; rings: each seed)";
  f.y_label = t.metric;
  std::vector<std::string> groups;
  for (const Row& row : p.rows) {
    const Stat& s = row.scores[task].stat;
    if (s.seeds == 0) continue;
    const double sd = s.sd.value_or(NAN);
    f.dots.push_back({row.encoding, s.mean, s.mean - sd, s.mean + sd, group_color(row.group), row.scores[task].values});
    if (!known(groups, row.group)) groups.push_back(row.group);
  }
  if (f.dots.empty()) return std::nullopt;
  for (const std::string& g : groups) f.legend.push_back({g, group_color(g)});
  return Figure{"figures/" + id + "-" + std::to_string(task + 1) + "-scores.png",
                t.name + ": test " + t.metric + " per encoding, mean and ±1 sd over seeds (left) and each seed's score "
                "(rings, right), coloured by group.",
                plot::render_dots(f)};
}

// Row encoding r against column encoding c: the p-value of their paired test,
// and the mean difference written r - c (the summary may list the pair either way).
std::string p_matrix(const Properties& p, size_t task) {
  const std::string& name = p.tasks[task].name;
  std::map<std::pair<std::string, std::string>, const Comparison*> by_pair;
  for (const Comparison& c : p.comparisons) {
    if (c.task == name) by_pair[{c.a, c.b}] = &c;
  }
  std::string h = "<table class=\"pvalues\">\n<tr><th class=\"name\">p</th>";
  for (const Row& col : p.rows) h += "<th>" + escape_html(col.encoding) + "</th>";
  h += "</tr>\n";
  for (const Row& row : p.rows) {
    h += "<tr><th class=\"name\">" + escape_html(row.encoding) + "</th>";
    for (const Row& col : p.rows) {
      if (&row == &col) {
        h += "<td class=\"self\">&mdash;</td>";
        continue;
      }
      double sign = 1;
      auto it = by_pair.find({row.encoding, col.encoding});
      if (it == by_pair.end()) it = by_pair.find({col.encoding, row.encoding}), sign = -1;
      if (it == by_pair.end()) {
        h += "<td class=\"na\" title=\"no comparison\">n/a</td>";
        continue;
      }
      const Comparison& c = *it->second;
      const std::string title = escape_html(row.encoding) + " &minus; " + escape_html(col.encoding) +
                                " = " + (c.mean_difference ? fixed_text(sign * *c.mean_difference, 4) : "n/a") +
                                ", t = " + (c.t ? fixed_text(sign * *c.t, 2) : "n/a") + ", " +
                                std::to_string(c.seeds) + " seeds";
      h += p_cell(c.p, c.p_holm, title);
    }
    h += "</tr>\n";
  }
  return h + "</table>\n";
}

std::string indicator_table(const Properties& p) {
  std::string h = "<table>\n<tr><th class=\"name\">encoding</th><th class=\"name\">group</th>";
  for (const std::string& key : p.indicator_keys) {
    std::string name = escape_html(indicator_name(key));
    const size_t colon = name.find(": ");
    if (colon != std::string::npos) name.replace(colon, 2, ":<br>");
    h += "<th>" + name + "</th>";
  }
  h += "</tr>\n";
  for (const Row& row : p.rows) {
    h += "<tr><td class=\"name\">" + escape_html(row.encoding) + "</td><td class=\"name\">" + escape_html(row.group) +
         "</td>";
    for (const std::string& key : p.indicator_keys) {
      const auto found = row.indicators.find(key);
      const bool table = !key.starts_with(kAttention);
      h += found != row.indicators.end() && found->second.seeds > 0
               ? "<td>" + stat_text(found->second, 3) + "</td>"
               : "<td class=\"na\" title=\"" + std::string(table ? "the encoding has no table" : "not measured") +
                     "\">n/a</td>";
    }
    h += "</tr>\n";
  }
  return h + "</table>\n";
}

std::string correlation_table(const Properties& p) {
  if (p.correlations.empty()) return "<p class=\"meta\">No correlations in the summary.</p>\n";
  std::string h = "<table>\n<tr><th class=\"name\">task</th><th class=\"name\">property</th><th>Pearson r</th>"
                  "<th>p</th><th>Spearman &rho;</th><th>p</th><th>encodings</th>"
                  "<th>r without the encoding it rests on most</th></tr>\n";
  const auto number = [](const std::optional<double>& v, const std::string& text) { return v ? text : "n/a"; };
  for (const Correlation& c : p.correlations) {
    h += "<tr><td class=\"name\">" + escape_html(c.task) + "</td><td class=\"name\">" +
         escape_html(indicator_name(c.property)) + "</td><td>" +
         number(c.pearson, fixed_text(c.pearson.value_or(0), 3)) + "</td><td>" +
         number(c.pearson_p, p_text(c.pearson_p.value_or(0))) + "</td><td>" +
         number(c.spearman, fixed_text(c.spearman.value_or(0), 3)) + "</td><td>" +
         number(c.spearman_p, p_text(c.spearman_p.value_or(0))) + "</td><td>" + std::to_string(c.encodings) +
         "</td><td>" +
         (c.influential ? number(c.pearson_without, fixed_text(c.pearson_without.value_or(0), 3)) + " (" +
                              escape_html(*c.influential) + ")"
                        : std::string("n/a")) +
         "</td></tr>\n";
  }
  return h + "</table>\n";
}

// Whether each stage trained to a plateau: stopped by its patience, or cut at its most steps (and then
// whether its best checkpoint was the last one, i.e. it was still improving).
std::string stopping_table(const Properties& p) {
  std::string h = "<h4>How each stage ended</h4>\n<p class=\"meta\">Early stopping on validation, else at the "
                  "stage's most steps; a best checkpoint at the most steps means the stage was still improving "
                  "when it stopped, and <i>their last gain</i> by how much: the median over those runs of the "
                  "validation score's rise over their last evaluation interval (the masked-LM score is the negated "
                  "loss, in nats).</p>\n<table>\n<tr><th class=\"name\">stage</th><th>most steps</th><th>runs</th>"
                  "<th>stopped early</th><th>best at the most steps</th><th>median best step</th>"
                  "<th>their last gain</th></tr>\n";
  for (const StageStops& s : p.stopping) {
    h += "<tr><td class=\"name\">" + escape_html(s.stage) + "</td><td>" + std::to_string(s.most_steps) + "</td><td>" +
         std::to_string(s.runs) + "</td><td>" + std::to_string(s.stopped_early) + "</td><td>" +
         std::to_string(s.best_at_most_steps) + "</td><td>" + fixed_text(s.median_best_step, 0) + "</td><td>" +
         (s.last_interval_gain ? fixed_text(*s.last_interval_gain, 4) : "n/a") + "</td></tr>\n";
  }
  return h + "</table>\n";
}

// Per task, each pair of groups: their means over their encodings and the paired test of the difference.
std::string group_table(const Properties& p) {
  std::string h = "<h4>By group</h4>\n<p class=\"meta\">Wang et al.'s comparison: per seed, the mean test score "
                  "of each group's encodings (how many in parentheses), and a paired t-test over the seeds every "
                  "encoding of both groups has (a test of these encodings' average, not of every absolute or "
                  "relative encoding there could be); * p &lt; 0.05, &dagger; also after Holm's correction over the "
                  "task's group pairs.</p>\n<table>\n<tr><th class=\"name\">task</th><th class=\"name\">a</th>"
                  "<th>mean a</th><th class=\"name\">b</th><th>mean b</th><th>b &minus; a</th><th>p</th>"
                  "<th>seeds</th></tr>\n";
  for (const GroupComparison& g : p.groups) {
    h += "<tr><td class=\"name\">" + escape_html(g.task) + "</td><td class=\"name\">" + escape_html(g.a) +
         "</td><td>" + fixed_text(g.mean_a, 3) + " (" + std::to_string(g.encodings_a) + ")</td><td class=\"name\">" +
         escape_html(g.b) + "</td><td>" + fixed_text(g.mean_b, 3) + " (" + std::to_string(g.encodings_b) +
         ")</td><td>" + fixed_text(-g.mean_difference, 3) + "</td>" +
         p_cell(g.p, g.p_holm, escape_html(g.b) + " &minus; " + escape_html(g.a)) + "<td>" + std::to_string(g.seeds) +
         "</td></tr>\n";
  }
  return h + "</table>\n";
}

constexpr const char* kHowToRead = R"(<div class="how"><p><b>How to read this.</b> Every encoding was
pretrained once per seed as a masked language model, then each task was learned on top of it; a score is
the test-split score, the mean &plusmn; the sample standard deviation over seeds, the best of each column in
bold. The p-values are <i>paired t-tests over seeds</i>: the runs of two encodings with the same seed share
their data order and every initialisation but the encoding's, so the test looks at the per-seed differences
d = score(row) &minus; score(column), t = mean(d) / (sd(d) / &radic;n) with n &minus; 1 degrees of freedom.
A marked cell (* p &lt; 0.05) says a difference that large would be rare if the two encodings were equal; with
many pairs about one in twenty is marked by chance. &dagger; marks the pairs that stay below 0.05 after Holm's
correction over all pairs of the task (the chance of any false mark among them is then at most 5 %); with few
seeds a real difference often goes unmarked. Hover a cell for the difference, t and Holm's adjusted p.
The indicators (docs/analysis.md) are read on the trained encoding: <i>monotonicity</i> (&minus;1 .. 1:
does proximity fall as the offset grows), <i>translation invariance</i> (0 .. 1: the share of the proximity
matrix explained by the offset j &minus; i alone) and <i>symmetry</i> (&minus;1 .. 1: is looking m ahead
the same as m back) are read on the proximity of the position table, so they are n/a for encodings without
one; <i>identical-word attention</i> reads them on the trained model's first-layer attention when every
position holds the same word (identical-word probing, Wang &amp; Chen 2020), which every encoding has. The
correlations are over encodings, between a task's mean score and an indicator's mean (Pearson on the values,
Spearman on their ranks), each with its two-sided p (Pearson's from the t test with encodings &minus; 2 degrees
of freedom; Spearman's exact, over every ordering of the ranks, up to 10 encodings, the same t test beyond):
with a handful of encodings only a large |r| means much, and one encoding far from the others can make it;
the last column says which one moves r the most and what r is without it.</p></div>
)";

}  // namespace

ExperimentSection render_properties(const Json& summary, const SummaryReader& reader, ExperimentSection section) {
  const Properties p = parse(summary, reader);
  const std::string& id = section.id;
  std::string h = "<section id=\"" + id + "\" class=\"experiment\">\n<h3>" + escape_html(section.title) +
                  " <small class=\"meta\">encoding properties and downstream tasks</small></h3>\n";
  h += "<p class=\"meta\">" + std::to_string(p.runs) + " runs, " + std::to_string(p.seeds) +
       " seeds per encoding; pretraining: " + escape_html(p.pretraining_metric) +
       (p.pretraining_seq_len ? " at length " + std::to_string(*p.pretraining_seq_len) : "") + "; tasks:";
  for (size_t k = 0; k < p.tasks.size(); ++k) {
    h += std::string(k ? "," : "") + " <a href=\"#" + task_id(id, k) + "\">" + escape_html(p.tasks[k].name) + "</a>";
  }
  h += "</p>\n";
  h += kHowToRead;
  if (p.rows.empty()) {
    h += "<p class=\"note\">No encoding has a result yet.</p>\n</section>\n";
    section.html = std::move(h);
    return section;
  }
  for (size_t k = 0; k < p.tasks.size(); ++k) {
    const Task& t = p.tasks[k];
    h += "<h4 id=\"" + task_id(id, k) + "\">" + escape_html(t.name) + " <small class=\"meta\">" +
         escape_html(t.kind) + ", " + escape_html(t.metric) +
         (t.classes ? ", " + std::to_string(*t.classes) + " classes" : "") + "</small></h4>\n";
    h += score_table(p, k);
    if (std::optional<Figure> f = score_figure(p, k, id)) {
      h += figure_html(*f, section.title + ": " + t.name + " scores");
      section.figures.push_back(std::move(*f));
    }
    h += "<p class=\"meta\">Paired t-test p-values, row against column (marked: p &lt; 0.05):</p>\n";
    h += p_matrix(p, k);
  }
  if (!p.groups.empty()) h += group_table(p);
  h += "<h4>Indicators</h4>\n<p class=\"meta\">Mean &plusmn; sd over seeds; n/a: the encoding has no "
       "position table to read them from.</p>\n";
  h += indicator_table(p);
  h += "<h4>Correlations of the scores with the indicators</h4>\n" + correlation_table(p);
  if (!p.stopping.empty()) h += stopping_table(p);
  h += "</section>\n";
  section.html = std::move(h);
  return section;
}

}  // namespace posenc::report::detail
