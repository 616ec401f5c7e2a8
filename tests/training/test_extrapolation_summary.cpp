// The extrapolation summary's paired comparisons: which seeds pair, the t-test
// against a plain reference (Student t with 1 and 2 degrees of freedom has a
// closed-form tail), and summarize_experiment's per-seed losses from result files.
#include "posenc/experiments/extrapolation_summary.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "posenc/training/experiment.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using posenc::nn::SuiteSummary;
using posenc::nn::SummaryCell;
using posenc::nn::SummaryRow;

constexpr double kPi = 3.14159265358979323846;

SummaryCell cell(int64_t seq_len, std::vector<std::pair<uint64_t, double>> losses) {
  SummaryCell c;
  c.seq_len = seq_len;
  c.seed_losses = std::move(losses);
  c.seeds = static_cast<int64_t>(c.seed_losses.size());
  for (const auto& [seed, loss] : c.seed_losses) c.mean += std::exp(loss) / static_cast<double>(c.seeds);
  if (c.seed_losses.empty()) c.error = "outside the table";
  return c;
}

SuiteSummary three_rows() {
  SuiteSummary s;
  s.train_seq_len = 128;
  s.runs = 9;
  s.lengths = {128, 256};
  s.rows.push_back({"none", {cell(128, {{0, 5.0}, {1, 5.2}, {2, 4.9}}), cell(256, {{0, 5.5}, {1, 5.6}, {2, 5.3}})}});
  s.rows.push_back({"alibi", {cell(128, {{0, 4.8}, {1, 5.1}, {2, 4.6}}), cell(256, {{0, 5.0}, {1, 5.1}, {2, 4.8}})}});
  // learned: one seed at 128 and none beyond its table.
  s.rows.push_back({"learned", {cell(128, {{1, 4.7}}), cell(256, {})}});
  return s;
}

TEST(ExtrapolationSummary, PairedTTestOnLogPerplexityAgainstAPlainReference) {
  const json j = json::parse(posenc::experiments::extrapolation_summary_json(three_rows()));
  // The table is nn::summary_json's.
  EXPECT_EQ(j.at("rows").size(), 3u);
  EXPECT_EQ(j.at("lengths"), json::parse("[128, 256]"));
  // learned shares one seed with the others at 128 and none at 256: not compared.
  ASSERT_EQ(j.at("comparisons").size(), 2u);
  const json& c = j.at("comparisons").at(0);
  EXPECT_EQ(c.at("seq_len"), 128);
  EXPECT_EQ(c.at("a"), "none");
  EXPECT_EQ(c.at("b"), "alibi");
  EXPECT_EQ(c.at("seeds"), 3);
  // Differences none - alibi by seed: 0.2, 0.1, 0.3.
  const std::vector<double> d = {5.0 - 4.8, 5.2 - 5.1, 4.9 - 4.6};
  const double mean = (d[0] + d[1] + d[2]) / 3;
  double ss = 0;
  for (double v : d) ss += (v - mean) * (v - mean);
  const double t = mean / (std::sqrt(ss / 2) / std::sqrt(3.0));
  const double p = 1 - t / std::sqrt(t * t + 2);  // two-sided tail of Student t with 2 degrees of freedom
  EXPECT_NEAR(c.at("mean_log_ratio").get<double>(), 0.2, 1e-12);
  EXPECT_NEAR(c.at("perplexity_ratio").get<double>(), std::exp(0.2), 1e-12);
  EXPECT_NEAR(c.at("t").get<double>(), t, 1e-9);
  EXPECT_NEAR(c.at("p").get<double>(), p, 1e-9);
  EXPECT_EQ(j.at("comparisons").at(1).at("seq_len"), 256);
  // One pair per length: a family of one, Holm leaves its p as it is.
  for (const json& each : j.at("comparisons")) EXPECT_EQ(each.at("p_holm"), each.at("p"));
}

// Holm's correction runs over the pairs of one length, not across lengths: three rows give three pairs at each.
TEST(ExtrapolationSummary, HolmAdjustsWithinEachLength) {
  SuiteSummary s;
  s.lengths = {128, 256};
  s.rows.push_back({"none", {cell(128, {{0, 5.0}, {1, 5.2}, {2, 4.9}}), cell(256, {{0, 5.5}, {1, 5.6}, {2, 5.3}})}});
  s.rows.push_back({"alibi", {cell(128, {{0, 4.8}, {1, 5.1}, {2, 4.6}}), cell(256, {{0, 5.0}, {1, 5.1}, {2, 4.8}})}});
  s.rows.push_back({"rope", {cell(128, {{0, 4.0}, {1, 4.4}, {2, 4.3}}), cell(256, {{0, 6.0}, {1, 6.9}, {2, 6.1}})}});
  const json comparisons = json::parse(posenc::experiments::extrapolation_summary_json(s)).at("comparisons");
  ASSERT_EQ(comparisons.size(), 6u);
  for (const int64_t length : {128, 256}) {
    std::vector<std::pair<double, double>> p_and_holm;
    for (const json& c : comparisons) {
      if (c.at("seq_len") == length) p_and_holm.emplace_back(c.at("p").get<double>(), c.at("p_holm").get<double>());
    }
    ASSERT_EQ(p_and_holm.size(), 3u);
    std::sort(p_and_holm.begin(), p_and_holm.end());
    double running = 0;
    for (size_t k = 0; k < 3; ++k) {
      running = std::max(running, std::min(1.0, static_cast<double>(3 - k) * p_and_holm[k].first));
      EXPECT_DOUBLE_EQ(p_and_holm[k].second, running) << length << " " << k;
    }
  }
}

TEST(ExtrapolationSummary, PairsOnlyTheSeedsBothRowsHave) {
  SuiteSummary s;
  s.lengths = {128};
  s.rows.push_back({"rope", {cell(128, {{0, 4.0}, {1, 4.5}, {2, 4.1}})}});
  s.rows.push_back({"xl", {cell(128, {{1, 4.0}, {2, 3.8}, {3, 9.0}})}});
  const json c = json::parse(posenc::experiments::extrapolation_summary_json(s)).at("comparisons").at(0);
  EXPECT_EQ(c.at("seeds"), 2);
  // Seeds 1 and 2: differences 0.5 and 0.3; one degree of freedom: p = 1 - 2 atan(|t|) / pi.
  const double t = 0.4 / (std::sqrt(0.02) / std::sqrt(2.0));
  EXPECT_NEAR(c.at("mean_log_ratio").get<double>(), 0.4, 1e-12);
  EXPECT_NEAR(c.at("t").get<double>(), t, 1e-9);
  EXPECT_NEAR(c.at("p").get<double>(), 1 - 2 * std::atan(t) / kPi, 1e-9);
}

TEST(ExtrapolationSummary, ConstantDifferencesHaveNoFiniteT) {
  SuiteSummary s;
  s.lengths = {128};
  s.rows.push_back({"rope", {cell(128, {{0, 4.0}, {1, 4.5}})}});
  s.rows.push_back({"alibi", {cell(128, {{0, 3.5}, {1, 4.0}})}});
  const json c = json::parse(posenc::experiments::extrapolation_summary_json(s)).at("comparisons").at(0);
  EXPECT_TRUE(c.at("t").is_null());
  EXPECT_EQ(c.at("p"), 0.0);
}

// summarize_experiment reads each run's seed and loss; written out of seed order.
TEST(ExtrapolationSummary, SummaryKeepsEachSeedsLossBySeed) {
  const fs::path dir = fs::path(testing::TempDir()) / "posenc-extrapolation-summary";
  fs::remove_all(dir);
  const std::vector<std::pair<uint64_t, double>> runs = {{2, 4.5}, {0, 4.25}, {1, 4.0}};
  for (size_t k = 0; k < runs.size(); ++k) {
    const auto [seed, loss] = runs[k];
    const std::string name = "rope-s" + std::to_string(seed);
    fs::create_directories(dir / "runs" / name);
    const json result = {{"format", "posenc-experiment-run-1"}, {"name", name}, {"order", k}, {"encoding", "rope"},
                         {"seed", seed}, {"train_seconds", 1.0}, {"tokens_per_second", 1.0},
                         {"lengths", {{{"seq_len", 128}, {"loss", loss}, {"accuracy", 0.1}, {"count", 10}}}},
                         {"config", {{"seq_len", 128}}}};
    std::ofstream(dir / "runs" / name / "result.json") << result.dump();
  }
  const SuiteSummary s = posenc::nn::summarize_experiment(dir);
  ASSERT_EQ(s.rows.size(), 1u);
  const SummaryCell& c = s.rows[0].cells.at(0);
  EXPECT_EQ(c.seed_losses, (std::vector<std::pair<uint64_t, double>>{{0, 4.25}, {1, 4.0}, {2, 4.5}}));
  EXPECT_NEAR(c.mean, (std::exp(4.25) + std::exp(4.0) + std::exp(4.5)) / 3, 1e-9);
  fs::remove_all(dir);
}

}  // namespace
