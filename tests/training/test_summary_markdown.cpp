// summary_markdown: the published tables' cells and its refusals. The CLI
// tests (test_cli_experiment*.py) check it against real suites' summaries.
#include "posenc/experiments/summary_markdown.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace {

using posenc::experiments::summary_markdown;

std::string message_of(const std::string& summary) {
  try {
    summary_markdown(summary);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no error";
}

std::string message_of_reference(const std::string& summary, const std::string& reference) {
  try {
    summary_markdown(summary, reference);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no error";
}

TEST(SummaryMarkdown, ExtrapolationCellsAndNotes) {
  const std::string summary = R"({"suite": "extrapolation", "lengths": [128, 256],
    "rows": [{"encoding": "rope", "test_perplexity": [
               {"seq_len": 128, "perplexity_mean": 41.234, "perplexity_sd": 0.56, "seeds": 3},
               {"seq_len": 256, "perplexity_mean": 97.0, "perplexity_sd": 0.0, "seeds": 1}]},
             {"encoding": "learned", "test_perplexity": [
               {"seq_len": 128, "not_applicable": "no row"},
               {"seq_len": 256, "not_applicable": "table of 128 rows"}]},
             {"encoding": "xl", "test_perplexity": [
               {"seq_len": 128, "not_applicable": "table of 128 rows"},
               {"seq_len": 256, "perplexity_mean": 12.0, "perplexity_sd": 1.0, "seeds": 2}]}]})";
  EXPECT_EQ(summary_markdown(summary),
            "| encoding | 128 | 256 |\n"
            "|---|---|---|\n"
            "| rope | 41.2 ± 0.6 | 97.0 |\n"
            "| learned | n/a [1] | n/a [2] |\n"
            "| xl | n/a [2] | 12.0 ± 1.0 |\n"
            "\n"
            "[1] no row\n"
            "[2] table of 128 rows\n");
}

// With its comparisons: the lowest perplexity against the next at each length
// (ratios flipped when the summary tested them the other way) and every row
// against the first; a length with fewer than two rows has no line.
TEST(SummaryMarkdown, ExtrapolationPairedComparisons) {
  const std::string summary = R"({"suite": "extrapolation", "lengths": [128, 256],
    "rows": [{"encoding": "none", "test_perplexity": [
               {"seq_len": 128, "perplexity_mean": 40.0, "perplexity_sd": 1.0, "seeds": 2},
               {"seq_len": 256, "perplexity_mean": 50.0, "perplexity_sd": 1.0, "seeds": 2}]},
             {"encoding": "alibi", "test_perplexity": [
               {"seq_len": 128, "perplexity_mean": 30.0, "perplexity_sd": 1.0, "seeds": 2},
               {"seq_len": 256, "not_applicable": "no result"}]},
             {"encoding": "rope", "test_perplexity": [
               {"seq_len": 128, "perplexity_mean": 35.0, "perplexity_sd": 1.0, "seeds": 2},
               {"seq_len": 256, "not_applicable": "no result"}]}],
    "comparisons": [
      {"seq_len": 128, "a": "none", "b": "alibi", "mean_log_ratio": 0.2876820724517809, "perplexity_ratio": 1.3333333333333333, "t": 9.0, "p": 0.0704},
      {"seq_len": 128, "a": "none", "b": "rope", "mean_log_ratio": 0.13353139262452263, "perplexity_ratio": 1.1428571428571428, "t": 30.0, "p": 0.0212},
      {"seq_len": 128, "a": "alibi", "b": "rope", "mean_log_ratio": -0.15415067982725836, "perplexity_ratio": 0.8571428571428571, "t": null, "p": 0.0}]})";
  EXPECT_EQ(summary_markdown(summary),
            "| encoding | 128 | 256 |\n"
            "|---|---|---|\n"
            "| none | 40.0 ± 1.0 | 50.0 ± 1.0 |\n"
            "| alibi | 30.0 ± 1.0 | n/a [1] |\n"
            "| rope | 35.0 ± 1.0 | n/a [1] |\n"
            "\n"
            "[1] no result\n"
            "\n"
            "Paired t-tests over shared seeds on the test loss (log perplexity); a ratio is the geometric mean over "
            "seeds of one perplexity over the other, p two-sided. 3 pairs in all, 2 with p < 0.05 (summary.json: "
            "comparisons).\n"
            "\n"
            "| length | lowest | next | lowest / next |\n"
            "|---|---|---|---|\n"
            "| 128 | alibi | rope | 0.86× (p < 0.001) |\n"
            "\n"
            "Against none (perplexity of the encoding over none's):\n"
            "\n"
            "| encoding | 128 | 256 |\n"
            "|---|---|---|\n"
            "| alibi | 0.75× (p 0.070) | — |\n"
            "| rope | 0.88× (p 0.021) | — |\n");
}

// A summary written since Holm's correction: each p beside its adjusted value, and both counts.
TEST(SummaryMarkdown, ExtrapolationHolmAdjusted) {
  const std::string summary = R"({"suite": "extrapolation", "lengths": [128],
    "rows": [{"encoding": "none", "test_perplexity": [
               {"seq_len": 128, "perplexity_mean": 40.0, "perplexity_sd": 1.0, "seeds": 2}]},
             {"encoding": "alibi", "test_perplexity": [
               {"seq_len": 128, "perplexity_mean": 30.0, "perplexity_sd": 1.0, "seeds": 2}]},
             {"encoding": "rope", "test_perplexity": [
               {"seq_len": 128, "perplexity_mean": 35.0, "perplexity_sd": 1.0, "seeds": 2}]}],
    "comparisons": [
      {"seq_len": 128, "a": "none", "b": "alibi", "mean_log_ratio": 0.2876820724517809, "p": 0.0204, "p_holm": 0.0424},
      {"seq_len": 128, "a": "none", "b": "rope", "mean_log_ratio": 0.13353139262452263, "p": 0.0212, "p_holm": 0.0424},
      {"seq_len": 128, "a": "alibi", "b": "rope", "mean_log_ratio": -0.15415067982725836, "p": 0.0,
       "p_holm": 0.0}]})";
  const std::string md = summary_markdown(summary);
  EXPECT_NE(md.find("p two-sided; Holm: p adjusted by Holm's correction over all pairs at that length. 3 pairs in "
                    "all, 3 with p < 0.05 (3 after Holm's correction within each length)"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| 128 | alibi | rope | 0.86× (p < 0.001, Holm < 0.001) |\n"), std::string::npos) << md;
  EXPECT_NE(md.find("| alibi | 0.75× (p 0.020, Holm 0.042) |\n| rope | 0.88× (p 0.021, Holm 0.042) |\n"),
            std::string::npos)
      << md;
}

TEST(SummaryMarkdown, PropertiesTestsAgainstTheFirstRow) {
  const std::string summary = R"({"suite": "properties", "tasks": [{"name": "pos", "metric": "accuracy"}],
    "rows": [{"encoding": "none", "group": "none", "pretraining": {"mean": 394.56, "sd": 4.23, "seeds": 5},
              "scores": [{"mean": 0.9341, "sd": 0.0062, "seeds": 5}], "indicators": {}},
             {"encoding": "learned", "group": "absolute", "pretraining": {"mean": 100.2, "sd": 17.4, "seeds": 5},
              "scores": [{"mean": 0.977, "sd": 0.002, "seeds": 5, "values": [0.9751, 0.9772, 0.979, 0.975, 0.9787]}],
              "indicators": {"monotonicity": {"mean": 0.62}, "translation_invariance": {"mean": 0.554},
                             "symmetry": {"mean": 0.5},
                             "identical_word_attention": {"monotonicity": {"mean": 0.8},
                                                          "translation_invariance": {"mean": 0.97},
                                                          "symmetry": {"mean": 0.96}}}}],
    "comparisons": [{"task": "pos", "a": "none", "b": "learned", "mean_difference": -0.0429, "t": -9.0,
                     "p": 0.0004, "seeds": 5, "p_holm": 0.0012}],
    "correlations": [],
    "group_comparisons": [{"task": "pos", "a": "absolute", "b": "relative", "encodings_a": 3, "encodings_b": 6,
                           "mean_a": 0.8033, "mean_b": 0.8061, "mean_difference": -0.0028, "t": -1.6, "p": 0.1669,
                           "seeds": 5, "p_holm": 0.1669, "left_out": ["kerple-power"]}],
    "stopping": [{"stage": "pretrain", "most_steps": 3000, "runs": 5, "stopped_early": 0, "best_at_most_steps": 5,
                  "median_best_step": 3000, "last_interval_gain": 0.00412},
                 {"stage": "pos", "most_steps": 3000, "runs": 5, "stopped_early": 5, "best_at_most_steps": 0,
                  "median_best_step": 1200, "last_interval_gain": null}]})";
  const std::string md = summary_markdown(summary);
  EXPECT_NE(md.find("| none | none | 5 | 394.6 ± 4.2 | 0.934 ± 0.006 | — | — |\n"), std::string::npos) << md;
  EXPECT_NE(md.find("| learned | absolute | 5 | 100.2 ± 17.4 | 0.977 ± 0.002 | 0.62 / 0.55 / 0.50 | "
                    "0.80 / 0.97 / 0.96 |\n"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("p two-sided; Holm: p adjusted by Holm's correction over all pairs of the task). 1 pairs in "
                    "all, 1 with p < 0.05 (1 after Holm's correction within each task)"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| learned | +0.043 (p < 0.001, Holm 0.001) |\n"), std::string::npos) << md;
  // By group, where the summary has it: b - a, its p and Holm's.
  EXPECT_NE(md.find("| task | groups a / b | a | b | b − a |\n|---|---|---|---|---|\n"
                    "| pos | absolute / relative | 0.803 (3) | 0.806 (6) | +0.003 (p 0.167, Holm 0.167) |\n"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("\nLeft out of the group means (fewer seeds than the others so far): pos absolute / relative: "
                    "kerple-power.\n"),
            std::string::npos)
      << md;
  // Each run's score where the summary keeps them; a row without them has a dash.
  EXPECT_NE(md.find("Test scores per run, in seed order.\n\n| encoding | pos |\n|---|---|\n| none | — |\n"
                    "| learned | 0.975, 0.977, 0.979, 0.975, 0.979 |\n"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| stage | most steps | runs | stopped early | best at the most steps | median best step | their "
                    "last gain |\n|---|---|---|---|---|---|---|\n| pretrain | 3000 | 5 | 0 | 5 | 3000 | 0.0041 |\n"
                    "| pos | 3000 | 5 | 5 | 0 | 1200 | — |\n"),
            std::string::npos)
      << md;
}

// --reference: every row against the named encoding, turning the pair round where the summary tested it the other
// way; a name that is not a row is refused with the rows it could be.
TEST(SummaryMarkdown, AgainstAChosenReference) {
  const std::string extrapolation = R"({"suite": "extrapolation", "lengths": [128],
    "rows": [{"encoding": "none", "test_perplexity": [
               {"seq_len": 128, "perplexity_mean": 40.0, "perplexity_sd": 1.0, "seeds": 2}]},
             {"encoding": "alibi", "test_perplexity": [
               {"seq_len": 128, "perplexity_mean": 30.0, "perplexity_sd": 1.0, "seeds": 2}]},
             {"encoding": "rope", "test_perplexity": [
               {"seq_len": 128, "perplexity_mean": 35.0, "perplexity_sd": 1.0, "seeds": 2}]}],
    "comparisons": [
      {"seq_len": 128, "a": "none", "b": "alibi", "mean_log_ratio": 0.2876820724517809, "p": 0.0704},
      {"seq_len": 128, "a": "none", "b": "rope", "mean_log_ratio": 0.13353139262452263, "p": 0.0212},
      {"seq_len": 128, "a": "alibi", "b": "rope", "mean_log_ratio": -0.15415067982725836, "p": 0.0}]})";
  const std::string md = summary_markdown(extrapolation, "rope");
  EXPECT_NE(md.find("Against rope (perplexity of the encoding over rope's):\n\n| encoding | 128 |\n|---|---|\n"
                    "| none | 1.14× (p 0.021) |\n| alibi | 0.86× (p < 0.001) |\n"),
            std::string::npos)
      << md;
  EXPECT_EQ(summary_markdown(extrapolation, ""), summary_markdown(extrapolation, "none"));
  EXPECT_EQ(message_of_reference(extrapolation, "xl"),
            "[experiment] reference must be an encoding of the summary (none, alibi, rope), got 'xl'");

  const std::string properties = R"({"suite": "properties", "tasks": [{"name": "pos", "metric": "accuracy"}],
    "rows": [{"encoding": "none", "group": "none", "pretraining": {"mean": 394.56, "sd": 4.23, "seeds": 5},
              "scores": [{"mean": 0.9341, "sd": 0.0062, "seeds": 5}], "indicators": {}},
             {"encoding": "learned", "group": "absolute", "pretraining": {"mean": 100.2, "sd": 17.4, "seeds": 5},
              "scores": [{"mean": 0.977, "sd": 0.002, "seeds": 5}], "indicators": {}},
             {"encoding": "shaw", "group": "relative", "pretraining": {"mean": 90.0, "sd": 1.0, "seeds": 5},
              "scores": [{"mean": 0.980, "sd": 0.002, "seeds": 5}], "indicators": {}}],
    "comparisons": [{"task": "pos", "a": "none", "b": "learned", "mean_difference": -0.0429, "t": -9.0,
                     "p": 0.0004, "seeds": 5},
                    {"task": "pos", "a": "learned", "b": "shaw", "mean_difference": -0.003, "t": -2.0,
                     "p": 0.116, "seeds": 5}],
    "correlations": []})";
  const std::string against_learned = summary_markdown(properties, "learned");
  EXPECT_NE(against_learned.find("| encoding | pos |\n|---|---|\n| none | -0.043 (p < 0.001) |\n"
                                 "| shaw | +0.003 (p 0.116) |\n"),
            std::string::npos)
      << against_learned;
  EXPECT_NE(summary_markdown(properties).find("| learned | +0.043 (p < 0.001) |\n| shaw | — |\n"), std::string::npos);
  EXPECT_EQ(message_of_reference(properties, "rope"),
            "[experiment] reference must be an encoding of the summary (none, learned, shaw), got 'rope'");
}

TEST(SummaryMarkdown, RefusesWhatIsNotASummary) {
  EXPECT_EQ(message_of("{\"suite\": \"speed\"}"),
            "[experiment] summary must name the suite properties or extrapolation, got 'speed'");
  EXPECT_EQ(message_of("[1, 2]"), "[experiment] summary must name the suite properties or extrapolation, got ''");
  EXPECT_EQ(message_of("{\"suite\": \"extrapolation\", \"lengths\": [128]}").rfind(
                "[experiment] summary of the 'extrapolation' suite is missing a field or has the wrong type (", 0),
            0u);
  EXPECT_EQ(message_of("{ truncated").rfind(
                "[experiment] summary must be the JSON of posenc experiment report, got text that does not parse (", 0),
            0u);
}

}  // namespace
