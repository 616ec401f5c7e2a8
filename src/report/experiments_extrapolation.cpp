// The "extrapolation" suite (summary_json in src/training/experiment.cpp,
// comparisons in src/experiments/extrapolation_summary.cpp): the table of test
// perplexity per encoding and length, the figure of perplexity against length,
// one line and +-1 sd band per encoding, and where the summary has paired
// comparisons, the lowest perplexity at each length against the next.
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "experiments_internal.h"
#include "html_text.h"
#include "posenc/plot/charts.h"

namespace posenc::report::detail {
namespace {

struct Cell {
  int64_t seq_len = 0;
  Stat perplexity;
  std::string not_applicable;  // the reason, where seeds == 0
};

struct Row {
  std::string encoding;
  std::vector<Cell> cells;  // one per length, in the summary's order
};

// A paired t-test on log perplexity between rows a and b at one length.
struct Comparison {
  int64_t seq_len = 0;
  std::string a, b;
  double mean_log_ratio = 0;  // mean over seeds of log(perplexity_a / perplexity_b)
  std::optional<double> p;
  int64_t seeds = 0;
  std::optional<double> p_holm;  // absent from summaries written before Holm's correction
};

struct Extrapolation {
  int64_t train_seq_len = 0;
  int64_t runs = 0;
  std::vector<int64_t> lengths;
  std::vector<Row> rows;
  std::vector<Comparison> comparisons;  // empty for a summary written before they were
};

Extrapolation parse(const Json& j, const SummaryReader& r) {
  Extrapolation e;
  e.train_seq_len = r.count(j, "train_seq_len", "");
  e.runs = r.count(j, "runs", "");
  const Json& lengths = r.array(j, "lengths", "");
  for (size_t k = 0; k < lengths.size(); ++k) {
    const Json& l = lengths[k];
    if (!l.is_number_integer() || l.get<int64_t>() < 1) r.invalid(item_path("lengths", k));
    e.lengths.push_back(l.get<int64_t>());
  }
  const Json& rows = r.array(j, "rows", "");
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::string row_path = item_path("rows", i);
    Row row;
    row.encoding = r.text(rows[i], "encoding", row_path);
    const std::string cells_path = field_path(row_path, "test_perplexity");
    const Json& cells = r.array(rows[i], "test_perplexity", row_path);
    if (cells.size() != e.lengths.size()) r.invalid(cells_path);
    for (size_t k = 0; k < cells.size(); ++k) {
      const std::string path = item_path(cells_path, k);
      Cell c;
      c.seq_len = r.count(cells[k], "seq_len", path);
      if (c.seq_len != e.lengths[k]) r.invalid(field_path(path, "seq_len"));
      if (cells[k].is_object() && cells[k].contains("not_applicable")) {
        c.not_applicable = r.text(cells[k], "not_applicable", path);
      } else {
        c.perplexity.seeds = r.count(cells[k], "seeds", path);
        if (c.perplexity.seeds > 0) {
          c.perplexity.mean = r.number(cells[k], "perplexity_mean", path);
          // Perplexity is exp(loss) >= 1 > 0: the figure's log axis relies on it.
          if (!(c.perplexity.mean > 0)) r.invalid(field_path(path, "perplexity_mean"));
          if (c.perplexity.seeds > 1) c.perplexity.sd = r.number_or_null(cells[k], "perplexity_sd", path, true);
        } else {
          c.not_applicable = "no result";
        }
      }
      row.cells.push_back(std::move(c));
    }
    e.rows.push_back(std::move(row));
  }
  if (!j.is_object() || !j.contains("comparisons")) return e;
  const auto is_row = [&e](const std::string& name) {
    return std::any_of(e.rows.begin(), e.rows.end(), [&name](const Row& row) { return row.encoding == name; });
  };
  const Json& comparisons = r.array(j, "comparisons", "");
  for (size_t k = 0; k < comparisons.size(); ++k) {
    const std::string path = item_path("comparisons", k);
    const Json& c = comparisons[k];
    Comparison cmp{r.count(c, "seq_len", path),    r.text(c, "a", path),
                   r.text(c, "b", path),           r.number(c, "mean_log_ratio", path),
                   r.probability_or_null(c, "p", path), r.count(c, "seeds", path),
                   r.probability_or_null(c, "p_holm", path, true)};
    if (std::find(e.lengths.begin(), e.lengths.end(), cmp.seq_len) == e.lengths.end()) {
      r.invalid(field_path(path, "seq_len"));
    }
    if (!is_row(cmp.a)) r.invalid(field_path(path, "a"));
    if (!is_row(cmp.b)) r.invalid(field_path(path, "b"));
    e.comparisons.push_back(std::move(cmp));
  }
  return e;
}

// At each length, the row of lowest mean perplexity against the next lowest:
// their perplexity ratio (geometric mean over the shared seeds) and paired p.
std::string lowest_against_next(const Extrapolation& e) {
  if (e.comparisons.empty()) return "";  // one seed each, or a summary from before the comparisons
  std::string h;
  for (size_t k = 0; k < e.lengths.size(); ++k) {
    std::vector<std::pair<double, std::string>> ranked;
    for (const Row& row : e.rows) {
      if (row.cells[k].perplexity.seeds > 0) ranked.emplace_back(row.cells[k].perplexity.mean, row.encoding);
    }
    if (ranked.size() < 2) continue;
    std::partial_sort(ranked.begin(), ranked.begin() + 2, ranked.end());
    const std::string &lowest = ranked[0].second, &next = ranked[1].second;
    const Comparison* found = nullptr;
    double sign = 1;
    for (const Comparison& c : e.comparisons) {
      if (c.seq_len != e.lengths[k]) continue;
      if (c.a == lowest && c.b == next) found = &c, sign = 1;
      if (c.a == next && c.b == lowest) found = &c, sign = -1;
    }
    h += "<tr><td>" + std::to_string(e.lengths[k]) + "</td><td class=\"name\">" + escape_html(lowest) +
         "</td><td class=\"name\">" + escape_html(next) + "</td>";
    if (found == nullptr) {
      h += "<td class=\"na\" title=\"no shared seeds\">n/a</td><td class=\"na\">n/a</td><td></td></tr>\n";
      continue;
    }
    h += "<td>" + fixed_text(std::exp(sign * found->mean_log_ratio), 3) + "</td>" +
         p_cell(found->p, found->p_holm, escape_html(lowest) + " / " + escape_html(next)) + "<td>" +
         std::to_string(found->seeds) + "</td></tr>\n";
  }
  if (h.empty()) return h;
  return "<p class=\"how\">Lowest against next: at each length, the encoding of lowest mean perplexity against "
         "the runner-up, by a paired t-test on the test loss (log perplexity) over the seeds both have (runs of one "
         "seed share their data order, so most of the spread over seeds is shared). Ratio: the geometric mean over "
         "seeds of lowest / next; p two-sided, * p &lt; 0.05, &dagger; also below 0.05 after Holm's correction over all "
         "pairs at that length (hover for its value). Every pair is in summary.json (comparisons).</p>\n<table>\n<tr><th>length</th><th class=\"name\">lowest</th><th "
         "class=\"name\">next</th><th>ratio</th><th>p</th><th>seeds</th></tr>\n" +
         h + "</table>\n";
}

struct Style {
  std::string family;
  plot::Rgb color;
  bool dashed;  // a combination or a RoPE extension ("rope+yarn"): drawn dashed beside its base
};

std::vector<Style> styles_of(const Extrapolation& e) {
  std::map<std::string, int> members;
  std::vector<Style> styles;
  for (const Row& row : e.rows) {
    const std::string family(encoding_family(row.encoding));
    styles.push_back({family, family_color(family, members[family]++), row.encoding.find('+') != std::string::npos});
  }
  return styles;
}

std::optional<Figure> perplexity_figure(const Extrapolation& e, const std::vector<Style>& styles,
                                        const std::string& id) {
  plot::BandFigure f;
  f.title = "Test perplexity against evaluation length";
  f.x_label = "evaluation length (tokens, log scale)";
  f.y_label = "test perplexity (log scale)";
  f.x_scale = plot::AxisScale::kLog2;
  f.y_scale = plot::AxisScale::kLog10;
  if (e.train_seq_len > 0) {
    f.marker_x = static_cast<double>(e.train_seq_len);
    f.marker_label = "training length " + std::to_string(e.train_seq_len);
  }
  bool any = false;
  for (size_t i = 0; i < e.rows.size(); ++i) {
    plot::BandSeries s;
    s.label = e.rows[i].encoding;
    s.color = styles[i].color;
    s.dashed = styles[i].dashed;
    for (const Cell& c : e.rows[i].cells) {
      const bool has = c.perplexity.seeds > 0;
      const double sd = c.perplexity.sd.value_or(NAN);
      any = any || has;
      s.x.push_back(static_cast<double>(c.seq_len));
      s.y.push_back(has ? c.perplexity.mean : NAN);
      s.lo.push_back(has ? c.perplexity.mean - sd : NAN);
      s.hi.push_back(has ? c.perplexity.mean + sd : NAN);
    }
    f.series.push_back(std::move(s));
  }
  if (!any) return std::nullopt;
  // Room for every legend row (18 px each) beside the plot area.
  f.height = std::max(520, 120 + 18 * static_cast<int>(f.series.size()));
  return Figure{"figures/" + id + "-perplexity.png",
                "Test perplexity (mean over seeds, log scale) against evaluation length (log scale); shaded: "
                "±1 sd over seeds; dashed lines: RoPE extensions and combinations; dashed vertical line: the "
                "training length; a missing point is n/a (see the table).",
                plot::render_bands(f)};
}

}  // namespace

ExperimentSection render_extrapolation(const Json& summary, const SummaryReader& reader, ExperimentSection section) {
  const Extrapolation e = parse(summary, reader);
  const std::vector<Style> styles = styles_of(e);
  int64_t most_seeds = 0;
  for (const Row& row : e.rows) {
    for (const Cell& c : row.cells) most_seeds = std::max(most_seeds, c.perplexity.seeds);
  }
  std::string h = "<section id=\"" + section.id + "\" class=\"experiment\">\n<h3>" + escape_html(section.title) +
                  " <small class=\"meta\">length extrapolation</small></h3>\n";
  h += "<p class=\"meta\">trained at length " + std::to_string(e.train_seq_len) + "; " + std::to_string(e.runs) +
       " runs; up to " + std::to_string(most_seeds) + " seed" + (most_seeds == 1 ? "" : "s") +
       " per encoding</p>\n";
  h += "<p class=\"how\">Each encoding's causal language model was trained at length " +
       std::to_string(e.train_seq_len) +
       " and evaluated on the test split at every length: test perplexity = exp(mean loss per token), the mean "
       "&plusmn; the sample standard deviation over seeds (one seed: no spread). Lower is better; a line that "
       "stays flat right of the training length extrapolates. <i>n/a</i>: the model cannot take that length "
       "(hover for the reason, or see the notes under the table).</p>\n";
  if (e.rows.empty()) {
    h += "<p class=\"note\">No run has a result yet.</p>\n</section>\n";
    section.html = std::move(h);
    return section;
  }
  if (std::optional<Figure> f = perplexity_figure(e, styles, section.id)) {
    h += figure_html(*f, section.title + ": test perplexity against evaluation length");
    section.figures.push_back(std::move(*f));
  }

  h += "<table>\n<tr><th class=\"name\">encoding</th><th class=\"name\">family</th>";
  for (const int64_t L : e.lengths) {
    h += "<th>" + std::to_string(L) + (L == e.train_seq_len ? "<br><small>training length</small>" : "") + "</th>";
  }
  h += "</tr>\n";
  std::vector<std::string> reasons;  // footnotes, numbered in order of first use
  for (size_t i = 0; i < e.rows.size(); ++i) {
    const Row& row = e.rows[i];
    h += "<tr><td class=\"name\"><span class=\"swatch\" style=\"background:" + css_color(styles[i].color) +
         "\"></span>" + escape_html(row.encoding) + "</td><td class=\"name\">" + styles[i].family + "</td>";
    for (const Cell& c : row.cells) {
      if (c.perplexity.seeds == 0) {
        size_t n = 0;
        while (n < reasons.size() && reasons[n] != c.not_applicable) ++n;
        if (n == reasons.size()) reasons.push_back(c.not_applicable);
        h += "<td class=\"na\" title=\"" + escape_html(c.not_applicable) + "\">n/a<sup><a href=\"#" + section.id +
             "-na-" + std::to_string(n + 1) + "\">" + std::to_string(n + 1) + "</a></sup></td>";
      } else {
        const std::string seeds = std::to_string(c.perplexity.seeds) + " seed" + (c.perplexity.seeds == 1 ? "" : "s");
        h += "<td title=\"" + seeds + "\">" + stat_text(c.perplexity, perplexity_decimals(c.perplexity.mean)) +
             (c.perplexity.seeds < most_seeds ? " <small>(" + seeds + ")</small>" : "") + "</td>";
      }
    }
    h += "</tr>\n";
  }
  h += "</table>\n";
  if (!reasons.empty()) {
    h += "<ol class=\"footnotes\">\n";
    for (size_t n = 0; n < reasons.size(); ++n) {
      h += "<li id=\"" + section.id + "-na-" + std::to_string(n + 1) + "\">n/a: " + escape_html(reasons[n]) +
           "</li>\n";
    }
    h += "</ol>\n";
  }
  h += lowest_against_next(e);
  h += "</section>\n";
  section.html = std::move(h);
  return section;
}

}  // namespace posenc::report::detail
