// The experiments' section (experiments.h) on hand-made summaries of both
// suites (tests/report/data): every encoding and task named, n/a cells with
// their reasons, best means in bold, p < 0.05 cells marked, the figures
// decoded back (one line, or one group of dots, per encoding in its colour),
// malformed summaries refused word for word, and the main report's
// --experiments section.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>

#include "plot_test_util.h"
#include "posenc/report/experiments.h"
#include "posenc/report/report.h"
#include "report_test_support.h"

namespace posenc::report {
namespace {

namespace fs = std::filesystem;
using plot::Rgb;
using plot::testing::channel_distance;
using plot::testing::Image;
using plot::testing::Rect;
using test::message_of;
using Json = nlohmann::ordered_json;

constexpr const char* kSource = "suite/summary.json";

Json fixture(const std::string& name) {
  std::ifstream in(std::string(POSENC_REPORT_TEST_DATA) + "/" + name);
  return Json::parse(in);
}

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

// The plot area's right edge: the rightmost column dark from 30% to 50% of
// the height (the frame; the legend, right of it, has no such run).
int frame_right(const Image& image) {
  for (int x = image.width() - 1; x >= 0; --x) {
    bool run = true;
    for (int y = image.height() * 3 / 10; run && y < image.height() / 2; ++y) run = plot::testing::dark(image.at(x, y));
    if (run) return x;
  }
  throw std::runtime_error("no plot frame");
}

// Pixels of (about) colour c left of the frame's right edge: in the plot area,
// not in the legend. 10 levels: a line's or dot's core is its colour to within
// rounding; bands (16% tints), the grid and text are far from every palette colour.
int pixels_of(const Figure& figure, Rgb c) {
  const Image image(figure.png);
  const Rect left{0, 0, frame_right(image), image.height()};
  return image.count(left, [&](Rgb p) { return channel_distance(p, c) <= 10; });
}

ExperimentSection extrapolation() {
  static const ExperimentSection s = render_experiment(fixture("extrapolation_summary.json"), kSource, "ext", "ext");
  return s;
}

ExperimentSection properties() {
  static const ExperimentSection s = render_experiment(fixture("properties_summary.json"), kSource, "prop", "prop");
  return s;
}

TEST(ExperimentsExtrapolation, TableNamesEveryEncodingAndLength) {
  const ExperimentSection s = extrapolation();
  EXPECT_EQ(s.suite, "extrapolation");
  ASSERT_TRUE(s.html.starts_with("<section id=\"ext\" class=\"experiment\">"));
  for (const char* e : {"none", "sinusoidal", "learned", "rope", "rope+yarn", "alibi"}) {
    EXPECT_EQ(occurrences(s.html, std::string("</span>") + e + "</td>"), 1u) << e;
  }
  for (const char* l : {"<th>64<br><small>training length</small></th>", "<th>128</th>", "<th>256</th>"}) {
    EXPECT_EQ(occurrences(s.html, l), 1u) << l;
  }
  // mean +- sd with about 4 significant digits; a cell with fewer seeds than the others says so.
  EXPECT_NE(s.html.find(">220.5 &plusmn; 3.1</td>"), std::string::npos);
  EXPECT_NE(s.html.find(">1210.0 &plusmn; 150.0</td>"), std::string::npos);
  EXPECT_NE(s.html.find(">190.0 &plusmn; 6.0 <small>(2 seeds)</small></td>"), std::string::npos);
}

TEST(ExperimentsExtrapolation, NotApplicableCellsCarryTheirReason) {
  const std::string& h = extrapolation().html;
  const std::string reason = "[learned] position 64 is outside the table of 64 rows (valid 0..63)";
  EXPECT_EQ(occurrences(h, "<td class=\"na\" title=\"" + reason + "\">n/a<sup><a href=\"#ext-na-1\">1</a></sup></td>"),
            2u);
  // One footnote for the two cells that share the reason.
  EXPECT_EQ(occurrences(h, "<li id=\"ext-na-1\">n/a: " + reason + "</li>"), 1u);
  EXPECT_EQ(occurrences(h, "ext-na-2"), 0u);
}

TEST(ExperimentsExtrapolation, FigureHasOneLinePerEncodingColouredByFamily) {
  const ExperimentSection s = extrapolation();
  ASSERT_EQ(s.figures.size(), 1u);
  EXPECT_EQ(s.figures[0].file, "figures/ext-perplexity.png");
  EXPECT_EQ(occurrences(s.html, "<img "), 1u);
  EXPECT_EQ(occurrences(s.html, "src=\"data:image/png;base64,"), 1u);
  EXPECT_EQ(encoding_family("rope+yarn"), "rotary");
  EXPECT_EQ(encoding_family("learned"), "absolute");
  // Rows in order, each the next shade of its family.
  const std::pair<const char*, int> lines[] = {{"none", 0},   {"absolute", 0}, {"absolute", 1},
                                               {"rotary", 0}, {"rotary", 1},   {"bias", 0}};
  for (const auto& [family, member] : lines) {
    // The learned line is one point (n/a beyond the training length): a dot of radius 3.5, ~30 pixels.
    EXPECT_GE(pixels_of(s.figures[0], family_color(family, member)), 20) << family << " " << member;
  }
  // No seventh line: the next shades are nowhere.
  for (const auto& [family, member] :
       std::vector<std::pair<const char*, int>>{{"bias", 1}, {"rotary", 2}, {"relative", 0}}) {
    EXPECT_EQ(pixels_of(s.figures[0], family_color(family, member)), 0) << family << " " << member;
  }
  // Deterministic: the same summary, the same bytes.
  EXPECT_EQ(render_experiment(fixture("extrapolation_summary.json"), kSource, "ext", "ext").figures[0].png,
            s.figures[0].png);
}

// The paired comparisons: at each length the lowest mean perplexity against the
// next, the ratio lowest / next (flipped where the summary tested next - lowest),
// p marked below 0.05; a summary without comparisons has no such table.
TEST(ExperimentsExtrapolation, LowestAgainstNextFromThePairedComparisons) {
  const std::string& h = extrapolation().html;
  EXPECT_EQ(occurrences(h, "<p class=\"how\">Lowest against next:"), 1u);
  EXPECT_EQ(occurrences(h, "<tr><td>64</td><td class=\"name\">rope</td><td class=\"name\">rope+yarn</td>"
                           "<td>1.000</td><td title=\"rope / rope+yarn\">1.000</td><td>3</td></tr>"),
            1u);
  EXPECT_EQ(occurrences(h, "<tr><td>128</td><td class=\"name\">alibi</td><td class=\"name\">rope+yarn</td>"
                           "<td>0.921</td><td class=\"significant\" title=\"alibi / rope+yarn\">0.004 *</td><td>3</td></tr>"),
            1u);
  EXPECT_EQ(occurrences(h, "<tr><td>256</td><td class=\"name\">alibi</td><td class=\"name\">rope+yarn</td>"
                           "<td>0.795</td><td class=\"significant\" title=\"alibi / rope+yarn\">&lt;0.001 *</td><td>2</td></tr>"),
            1u);
  Json j = fixture("extrapolation_summary.json");
  j.erase("comparisons");
  EXPECT_EQ(render_experiment(j, kSource, "ext", "ext").html.find("Lowest against next"), std::string::npos);
}

// A summary with Holm's adjusted p: a pair that stays below 0.05 is marked † (class "holm"), one that does not
// keeps its *, and both carry the adjusted value in their title; an adjusted p outside [0, 1] is refused.
TEST(ExperimentsExtrapolation, HolmAdjustedPMarksAndTitles) {
  Json j = fixture("extrapolation_summary.json");
  for (Json& c : j["comparisons"]) c["p_holm"] = std::min(1.0, c["p"].get<double>() * 20);
  const std::string h = render_experiment(j, kSource, "ext", "ext").html;
  EXPECT_EQ(occurrences(h, "<td class=\"significant\" title=\"alibi / rope+yarn, Holm&#39;s adjusted p = 0.0"), 1u)
      << h;
  EXPECT_EQ(occurrences(h, "<td class=\"holm\" title=\"alibi / rope+yarn, Holm&#39;s adjusted p = 0.0"), 1u) << h;
  EXPECT_EQ(occurrences(h, "&lt;0.001 &dagger;</td>"), 1u) << h;
  j["comparisons"][0]["p_holm"] = 1.5;
  try {
    render_experiment(j, kSource, "ext", "ext");
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("missing or invalid field 'comparisons[0].p_holm'"), std::string::npos)
        << e.what();
  }
}

TEST(ExperimentsExtrapolation, NoRowsIsANoteNotAnError) {
  Json j = fixture("extrapolation_summary.json");
  j["rows"] = Json::array();
  j["lengths"] = Json::array();
  j["comparisons"] = Json::array();
  const ExperimentSection s = render_experiment(j, kSource, "ext", "ext");
  EXPECT_TRUE(s.figures.empty());
  EXPECT_NE(s.html.find("No run has a result yet."), std::string::npos);
}

TEST(ExperimentsProperties, TablesNameEveryEncodingAndTaskGroupedByGroup) {
  const ExperimentSection s = properties();
  EXPECT_EQ(s.suite, "properties");
  for (const char* t : {"lexname", "definition"}) {
    EXPECT_NE(s.html.find(std::string("\">") + t + " <small class=\"meta\">"), std::string::npos) << t;
  }
  EXPECT_NE(s.html.find("classification, accuracy, 45 classes"), std::string::npos);
  for (const char* e : {"none", "learned", "shaw", "learned+shaw"}) {
    // Score tables (2), indicators (1; "none" is also the group there); the
    // p-value matrices name each twice (row and column header).
    EXPECT_EQ(occurrences(s.html, std::string("<td class=\"name\">") + e + "</td>"), e == std::string("none") ? 4u : 3u)
        << e;
    EXPECT_EQ(occurrences(s.html, std::string("<th>") + e + "</th>"), 2u) << e;
  }
  // Groups in the paper's order (none, absolute, relative, both), whatever the summary's order.
  const std::string first_table = s.html.substr(0, s.html.find("</table>"));
  size_t last = 0;
  for (const char* g : {"none", "absolute", "relative", "absolute+relative"}) {
    const size_t at = first_table.find(std::string("</span>") + g + "</th></tr>");
    ASSERT_NE(at, std::string::npos) << g;
    EXPECT_GT(at, last) << g;
    last = at;
  }
}

TEST(ExperimentsProperties, BestMeanInBoldAndNotApplicable) {
  const std::string& h = properties().html;
  // lexname: shaw 0.64 is the best accuracy; pretraining: learned+shaw's 39.9 the lowest perplexity.
  EXPECT_NE(h.find("<td class=\"best\" title=\"per seed: 0.6300, 0.6400, 0.6500\">0.640 &plusmn; 0.010</td>"),
            std::string::npos);
  EXPECT_EQ(occurrences(h, "<td class=\"best\">39.90 &plusmn; 0.70</td>"), 2u);  // one per task table
  // definition: learned 0.24; learned+shaw has no score there.
  EXPECT_NE(h.find("<td class=\"best\" title=\"per seed: 0.2100, 0.2400, 0.2700\">0.240 &plusmn; 0.030</td>"),
            std::string::npos);
  EXPECT_EQ(occurrences(h, "<td class=\"best\""), 4u);
  EXPECT_NE(h.find("<td class=\"name\">learned+shaw</td><td>n/a</td><td>0</td>"), std::string::npos);
  // Indicators of the encodings without a table (none, shaw): 3 each.
  EXPECT_EQ(occurrences(h, "<td class=\"na\" title=\"the encoding has no table\">n/a</td>"), 6u);
}

TEST(ExperimentsProperties, SignificantPValuesAreMarked) {
  const std::string& h = properties().html;
  // lexname: 4 pairs with p < 0.05, definition: 1; each shown twice (the matrix is symmetric).
  EXPECT_EQ(occurrences(h, "class=\"significant\""), 10u);
  EXPECT_NE(h.find("<td class=\"significant\" title=\"shaw &minus; none = 0.1200, t = 9.20, 3 seeds\">0.012 *</td>"),
            std::string::npos);
  // The other direction: the difference and t change sign.
  EXPECT_NE(h.find("<td class=\"significant\" title=\"none &minus; shaw = -0.1200, t = -9.20, 3 seeds\">0.012 *"),
            std::string::npos);
  EXPECT_NE(h.find(">0.727</td>"), std::string::npos);  // not marked
  EXPECT_EQ(occurrences(h, "<td class=\"na\" title=\"p undefined\">n/a</td>"), 2u);
  // definition: the pairs with learned+shaw were not compared (3 pairs, twice).
  EXPECT_EQ(occurrences(h, "<td class=\"na\" title=\"no comparison\">n/a</td>"), 6u);
  EXPECT_NE(h.find("paired t-test"), std::string::npos);  // the paragraph on how to read it
}

// Holm's adjusted p, where the summary has it: joins each cell's title; † where it stays below 0.05.
TEST(ExperimentsProperties, HolmAdjustedPMarked) {
  Json j = fixture("properties_summary.json");
  for (Json& c : j["comparisons"]) {
    if (c["p"].is_number()) c["p_holm"] = c["p"].get<double>() < 0.02 ? 0.03 : 1.0;
  }
  const std::string h = render_experiment(j, kSource, "props", "props").html;
  EXPECT_NE(h.find("<td class=\"holm\" title=\"shaw &minus; none = 0.1200, t = 9.20, 3 seeds, Holm&#39;s adjusted "
                   "p = 0.030\">0.012 &dagger;</td>"),
            std::string::npos)
      << h;
  EXPECT_NE(h.find("Holm&#39;s adjusted p = 1.000\">0.727</td>"), std::string::npos) << h;
  EXPECT_NE(h.find("&dagger; marks the pairs"), std::string::npos);  // the paragraph on how to read it
}

// The group comparison, where the summary has it: the two means with their encoding counts, b - a, the p cell.
TEST(ExperimentsProperties, GroupTable) {
  Json j = fixture("properties_summary.json");
  EXPECT_EQ(properties().html.find("<h4>By group</h4>"), std::string::npos);  // an older summary: no table
  j["group_comparisons"] = Json::parse(R"([{"task": "lexname", "a": "absolute", "b": "relative", "encodings_a": 1,
    "encodings_b": 1, "mean_a": 0.61, "mean_b": 0.64, "mean_difference": -0.03, "t": -5.2, "p": 0.035, "seeds": 3,
    "p_holm": 0.105}])");
  const std::string h = render_experiment(j, kSource, "props", "props").html;
  EXPECT_NE(h.find("<h4>By group</h4>"), std::string::npos);
  EXPECT_NE(h.find("<tr><td class=\"name\">lexname</td><td class=\"name\">absolute</td><td>0.610 (1)</td>"
                   "<td class=\"name\">relative</td><td>0.640 (1)</td><td>0.030</td><td class=\"significant\" "
                   "title=\"relative &minus; absolute, Holm&#39;s adjusted p = 0.105\">0.035 *</td><td>3</td></tr>"),
            std::string::npos)
      << h;
  j["group_comparisons"][0]["p_holm"] = -0.5;
  try {
    render_experiment(j, kSource, "props", "props");
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("missing or invalid field 'group_comparisons[0].p_holm'"), std::string::npos)
        << e.what();
  }
}

TEST(ExperimentsProperties, CorrelationsTable) {
  const std::string& h = properties().html;
  EXPECT_NE(h.find("<tr><td class=\"name\">lexname</td><td class=\"name\">identical-word attention</td>"
                   "<td>0.930</td><td>0.070</td><td>0.800</td><td>0.200</td><td>4</td>"
                   "<td>0.250 (learned+shaw)</td></tr>"),
            std::string::npos);
  // A summary written before the p values and the leave-one-out field (the second correlation has neither), and a
  // null Spearman.
  EXPECT_NE(h.find("<td>0.710</td><td>n/a</td><td>n/a</td><td>n/a</td><td>3</td><td>n/a</td></tr>"),
            std::string::npos);
}

TEST(ExperimentsProperties, HowEachStageEndedTable) {
  const std::string& h = properties().html;
  EXPECT_NE(h.find("<h4>How each stage ended</h4>"), std::string::npos);
  // The last gain of the runs cut at the cap where the summary has it; a summary from before it: n/a.
  EXPECT_NE(h.find("<tr><td class=\"name\">pretrain</td><td>3000</td><td>12</td><td>0</td><td>12</td><td>3000</td>"
                   "<td>0.0035</td></tr>"),
            std::string::npos)
      << h;
  EXPECT_NE(h.find("<tr><td class=\"name\">lexname</td><td>3000</td><td>12</td><td>3</td><td>2</td><td>2400</td>"
                   "<td>n/a</td></tr>"),
            std::string::npos)
      << h;
  // Older summaries have no "stopping": no table, no error.
  Json j = fixture("properties_summary.json");
  j.erase("stopping");
  EXPECT_EQ(render_experiment(j, kSource, "prop", "prop").html.find("How each stage ended"), std::string::npos);
}

// The fit of the reported checkpoints (training-batch score at the best step / validation), where a summary
// has it: a column of the task's table, "n/a" for rows whose runs kept no curves; absent otherwise.
TEST(ExperimentsProperties, FitColumnWhereTheCurvesWereKept) {
  EXPECT_EQ(properties().html.find("fit at the best step"), std::string::npos);
  Json j = fixture("properties_summary.json");
  j["rows"][0]["scores"][1]["training_at_best"] = {{"mean", 0.714}, {"sd", 0.2}, {"seeds", 3}};
  j["rows"][0]["scores"][1]["validation_at_best"] = {{"mean", 0.396}, {"sd", 0.1}, {"seeds", 3}};
  const std::string h = render_experiment(j, kSource, "prop", "prop").html;
  EXPECT_EQ(occurrences(h, "<th>fit at the best step<br><small>training / validation</small></th>"), 1u);
  EXPECT_EQ(occurrences(h, "<td>0.71 / 0.40</td>"), 1u);
  // The other three rows of the definition table, beside the n/a cells the section had before.
  EXPECT_EQ(occurrences(h, "<td>n/a</td>"), occurrences(properties().html, "<td>n/a</td>") + 3u);
  EXPECT_NE(h.find("<th colspan=\"5\">"), std::string::npos);
}

TEST(ExperimentsProperties, OneDotFigurePerTaskColouredByGroup) {
  const ExperimentSection s = properties();
  ASSERT_EQ(s.figures.size(), 2u);
  EXPECT_EQ(s.figures[0].file, "figures/prop-1-scores.png");
  EXPECT_EQ(occurrences(s.html, "<img "), 2u);
  for (const char* g : {"none", "absolute", "relative", "absolute+relative"}) {
    EXPECT_GE(pixels_of(s.figures[0], family_color(g, 0)), 30) << g;  // a dot of radius 4.5: ~60 pixels
  }
  // definition: learned+shaw has no score, so its group has no dot.
  EXPECT_EQ(pixels_of(s.figures[1], family_color("absolute+relative", 0)), 0);
  EXPECT_GE(pixels_of(s.figures[1], family_color("relative", 0)), 30);
}

// The suite's own writer (src/experiments) nests the three indicators of the
// identical-word attention and may leave a pretraining null.
TEST(ExperimentsProperties, NestedAttentionIndicatorsAndNulls) {
  Json j = fixture("properties_summary.json");
  j["pretraining"].erase("seq_len");
  for (Json& row : j["rows"]) {
    row["indicators"]["identical_word_attention"] = {
        {"monotonicity", {{"mean", 0.5}, {"sd", 0.1}, {"seeds", 3}}}, {"translation_invariance", nullptr},
        {"symmetry", {{"mean", 0.25}, {"sd", nullptr}, {"seeds", 3}}}};
  }
  j["rows"][1]["pretraining"] = nullptr;
  j["correlations"][0]["property"] = "identical_word_attention.symmetry";
  const ExperimentSection s = render_experiment(j, kSource, "prop", "prop");
  EXPECT_NE(s.html.find("<th>identical-word attention:<br>monotonicity</th><th>identical-word attention:<br>"
                        "translation invariance</th><th>identical-word attention:<br>symmetry</th>"),
            std::string::npos);
  EXPECT_EQ(occurrences(s.html, "<td>0.500 &plusmn; 0.100</td>"), 4u);
  EXPECT_EQ(occurrences(s.html, "<td>0.250</td>"), 4u);  // sd null: no spread shown
  EXPECT_EQ(occurrences(s.html, "<td class=\"na\" title=\"not measured\">n/a</td>"), 4u);
  EXPECT_NE(s.html.find("<td class=\"name\">identical-word attention: symmetry</td>"), std::string::npos);
  EXPECT_NE(s.html.find("<td class=\"name\">none</td><td title=\"per seed: 0.5000, 0.5200, 0.5400\">0.520 &plusmn; "
                        "0.020</td><td>3</td><td>n/a</td>"),
            std::string::npos);
}

// Each change of a valid summary, and the one message it must give.
struct Malformed {
  const char* fixture;
  std::function<void(Json&)> change;
  const char* message;
};

TEST(Experiments, MalformedSummariesAreRefusedWordForWord) {
  const std::string prefix = std::string("[report] ") + kSource + ": ";
  const Malformed cases[] = {
      {"extrapolation_summary.json", [](Json& j) { j["suite"] = "x"; }, "unknown suite 'x'"},
      {"extrapolation_summary.json", [](Json& j) { j.erase("suite"); }, "missing or invalid field 'suite'"},
      {"extrapolation_summary.json", [](Json& j) { j = Json::array(); }, "missing or invalid field 'suite'"},
      {"extrapolation_summary.json", [](Json& j) { j.erase("rows"); }, "missing or invalid field 'rows'"},
      {"extrapolation_summary.json", [](Json& j) { j["rows"] = "none"; }, "missing or invalid field 'rows'"},
      {"extrapolation_summary.json", [](Json& j) { j["lengths"][1] = 0; }, "missing or invalid field 'lengths[1]'"},
      {"extrapolation_summary.json", [](Json& j) { j["rows"][2].erase("encoding"); },
       "missing or invalid field 'rows[2].encoding'"},
      {"extrapolation_summary.json", [](Json& j) { j["rows"][0]["test_perplexity"][1]["seq_len"] = 100; },
       "missing or invalid field 'rows[0].test_perplexity[1].seq_len'"},
      {"extrapolation_summary.json", [](Json& j) { j["rows"][0]["test_perplexity"][2]["perplexity_mean"] = -1; },
       "missing or invalid field 'rows[0].test_perplexity[2].perplexity_mean'"},
      {"extrapolation_summary.json", [](Json& j) { j["rows"][0]["test_perplexity"].erase(2); },
       "missing or invalid field 'rows[0].test_perplexity'"},
      {"extrapolation_summary.json", [](Json& j) { j["comparisons"][1]["a"] = "xl"; },
       "missing or invalid field 'comparisons[1].a'"},
      {"extrapolation_summary.json", [](Json& j) { j["comparisons"][0]["seq_len"] = 100; },
       "missing or invalid field 'comparisons[0].seq_len'"},
      {"extrapolation_summary.json", [](Json& j) { j["comparisons"][2]["p"] = 2; },
       "missing or invalid field 'comparisons[2].p'"},
      {"extrapolation_summary.json", [](Json& j) { j["comparisons"] = 1; }, "missing or invalid field 'comparisons'"},
      {"properties_summary.json", [](Json& j) { j.erase("rows"); }, "missing or invalid field 'rows'"},
      {"properties_summary.json", [](Json& j) { j["rows"][1]["scores"][0]["mean"] = "0.5"; },
       "missing or invalid field 'rows[1].scores[0].mean'"},
      {"properties_summary.json", [](Json& j) { std::swap(j["rows"][0]["scores"][0], j["rows"][0]["scores"][1]); },
       "missing or invalid field 'rows[0].scores[0].task'"},
      {"properties_summary.json", [](Json& j) { j["rows"][3]["indicators"].erase("symmetry"); },
       "missing or invalid field 'rows[3].indicators.symmetry'"},
      {"properties_summary.json", [](Json& j) { j["comparisons"][4]["b"] = "rope"; },
       "missing or invalid field 'comparisons[4].b'"},
      {"properties_summary.json", [](Json& j) { j["comparisons"][0]["p"] = 1.5; },
       "missing or invalid field 'comparisons[0].p'"},
      {"properties_summary.json", [](Json& j) { j["correlations"][1]["task"] = "pos"; },
       "missing or invalid field 'correlations[1].task'"},
      {"properties_summary.json", [](Json& j) { j["correlations"][0]["spearman_p"] = 1.5; },
       "missing or invalid field 'correlations[0].spearman_p'"},
      {"properties_summary.json", [](Json& j) { j["correlations"][0]["pearson_without"]["encoding"] = "xl"; },
       "missing or invalid field 'correlations[0].pearson_without.encoding'"},
      {"properties_summary.json", [](Json& j) { j["correlations"][0]["pearson_without"] = 0.5; },
       "missing or invalid field 'correlations[0].pearson_without'"},
      {"properties_summary.json", [](Json& j) { j["stopping"][0]["last_interval_gain"] = "0.1"; },
       "missing or invalid field 'stopping[0].last_interval_gain'"},
      {"properties_summary.json", [](Json& j) { j["pretraining"] = 3; }, "missing or invalid field 'pretraining'"},
      {"properties_summary.json",
       [](Json& j) {
         j["rows"][0]["scores"][1]["training_at_best"] = "0.7";
         j["rows"][0]["scores"][1]["validation_at_best"] = {{"mean", 0.4}, {"sd", 0.1}, {"seeds", 3}};
       },
       "missing or invalid field 'rows[0].scores[1].training_at_best.seeds'"},
  };
  for (const Malformed& c : cases) {
    Json j = fixture(c.fixture);
    c.change(j);
    try {
      render_experiment(j, kSource, "x", "x");
      ADD_FAILURE() << "no exception for " << c.message;
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(e.what(), prefix + c.message);
    }
  }
}

class TempDir {
 public:
  TempDir() : path_(fs::temp_directory_path() / ("posenc_experiments_" + std::to_string(::getpid()))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

void write(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

TEST(Experiments, ReadsAndWritesASuiteDirectory) {
  const TempDir dir;
  write(dir.path() / "summary.json", fixture("extrapolation_summary.json").dump());
  const ExperimentSection s = read_experiment(dir.path(), "experiment");
  EXPECT_EQ(s.title, "extrapolation: " + dir.path().string());
  const ExperimentFiles files = write_experiment_report(s, dir.path());
  EXPECT_EQ(files.html, dir.path() / "report.html");
  EXPECT_EQ(files.figures, 1);
  EXPECT_TRUE(fs::is_regular_file(dir.path() / "figures" / "experiment-perplexity.png"));
  std::ifstream in(files.html);
  const std::string page((std::istreambuf_iterator<char>(in)), {});
  EXPECT_TRUE(page.starts_with("<!DOCTYPE html>"));
  EXPECT_NE(page.find(s.html), std::string::npos);

  write(dir.path() / "summary.json", "{\"suite\": ");
  EXPECT_TRUE(message_of([&] { read_experiment(dir.path(), "x"); })
                  .starts_with("[report] " + (dir.path() / "summary.json").string() + ": not valid JSON ("));
}

TEST(Experiments, MainReportIncludesEachSuite) {
  const TempDir dir;
  fs::create_directories(dir.path() / "ext" / "runs");
  fs::create_directories(dir.path() / "prop");
  write(dir.path() / "ext" / "summary.json", fixture("extrapolation_summary.json").dump());
  write(dir.path() / "prop" / "summary.json", fixture("properties_summary.json").dump());

  ReportOptions options;
  options.quick = true;
  options.experiments = {dir.path() / "missing"};
  int calls = 0;
  EXPECT_EQ(message_of([&] { build_report(options, [&](const ReportProgress&) { ++calls; }); }),
            "[report] --experiments " + (dir.path() / "missing").string() + ": no summary.json (run posenc "
            "experiment report " + (dir.path() / "missing").string() + " first)");
  EXPECT_EQ(calls, 0);  // refused before any section

  options.experiments = {dir.path() / "ext", dir.path() / "prop/"};
  const Report r = build_report(options);
  ASSERT_EQ(r.experiments.size(), 2u);
  EXPECT_EQ(r.experiments[0].id, "experiment-ext");
  EXPECT_EQ(r.experiments[1].id, "experiment-prop");
  const std::string html = report_html(r);
  EXPECT_NE(html.find("<h2>Experiments</h2>\n<section id=\"experiment-ext\" class=\"experiment\">"),
            std::string::npos);
  EXPECT_NE(html.find("<section id=\"experiment-prop\" class=\"experiment\">"), std::string::npos);
  const nlohmann::ordered_json j = report_json(r);
  ASSERT_EQ(j["experiments"].size(), 2u);
  EXPECT_EQ(j["experiments"][0]["suite"], "extrapolation");
  EXPECT_EQ(j["experiments"][0]["figures"], Json::array({"figures/experiment-ext-perplexity.png"}));
  EXPECT_EQ(j["experiments"][1]["summary"]["rows"].size(), 4u);

  const ReportFiles files = write_report(r, dir.path() / "out");
  EXPECT_TRUE(fs::is_regular_file(dir.path() / "out" / "figures" / "experiment-ext-perplexity.png"));
  EXPECT_TRUE(fs::is_regular_file(dir.path() / "out" / "figures" / "experiment-prop-2-scores.png"));
}

}  // namespace
}  // namespace posenc::report
