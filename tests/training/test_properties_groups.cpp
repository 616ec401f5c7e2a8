// group_comparisons: the mean of each group's encodings per seed, over the seeds every encoding of both
// groups has, paired t-tests between the groups, Holm over a task's group pairs; "none" is never compared.
#include "properties_groups.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "posenc/analysis/statistics.h"

namespace {

using Scores = std::map<std::string, std::map<uint64_t, double>>;
using posenc::experiments::group_comparisons;
using posenc::experiments::GroupMember;

TEST(PropertiesGroups, MeansOverEncodingsPairedBySeed) {
  const Scores none{{"pos", {{0, 0.5}, {1, 0.5}, {2, 0.5}}}};
  const Scores a1{{"pos", {{0, 0.90}, {1, 0.92}, {2, 0.91}}}};
  const Scores a2{{"pos", {{0, 0.80}, {1, 0.84}, {2, 0.83}}}};
  // No seed 2, and the only relative encoding (leaving it out would empty its group): the comparisons with the
  // relative group use seeds 0 and 1.
  const Scores r1{{"pos", {{0, 0.95}, {1, 0.93}}}};
  const Scores both{{"pos", {{0, 0.70}, {1, 0.75}, {2, 0.72}}}};
  const std::vector<GroupMember> members = {{"none", "none", &none},
                                            {"learned", "absolute", &a1},
                                            {"sinusoidal", "absolute", &a2},
                                            {"shaw", "relative", &r1},
                                            {"learned+shaw", "absolute+relative", &both}};
  const auto out = group_comparisons(members, {"pos"});
  ASSERT_EQ(out.size(), 3u);
  // absolute / relative over seeds 0, 1: absolute means 0.85, 0.88; relative 0.95, 0.93.
  const auto& ar = out[0];
  EXPECT_EQ(ar.at("a"), "absolute");
  EXPECT_EQ(ar.at("b"), "relative");
  EXPECT_EQ(ar.at("encodings_a"), 2);
  EXPECT_EQ(ar.at("encodings_b"), 1);
  EXPECT_EQ(ar.at("seeds"), 2);
  EXPECT_NEAR(ar.at("mean_a").get<double>(), (0.85 + 0.88) / 2, 1e-15);
  EXPECT_NEAR(ar.at("mean_b").get<double>(), (0.95 + 0.93) / 2, 1e-15);
  // d = -0.10, -0.05: mean -0.075, sd 0.025 * sqrt(2), t = -0.075 / 0.025 = -3, one degree of freedom.
  EXPECT_NEAR(ar.at("mean_difference").get<double>(), -0.075, 1e-15);
  EXPECT_NEAR(ar.at("t").get<double>(), -3.0, 1e-12);
  const double p = 1 - 2 * std::atan(3.0) / M_PI;
  EXPECT_NEAR(ar.at("p").get<double>(), p, 1e-12);
  // absolute / absolute+relative over all three seeds; relative / absolute+relative over seeds 0 and 1.
  EXPECT_EQ(out[1].at("b"), "absolute+relative");
  EXPECT_EQ(out[1].at("seeds"), 3);
  const auto& rb = out[2];
  EXPECT_EQ(rb.at("a"), "relative");
  EXPECT_EQ(rb.at("b"), "absolute+relative");
  EXPECT_EQ(rb.at("seeds"), 2);
  for (const auto& c : out) EXPECT_TRUE(c.at("left_out").empty());
  // Holm over the three pairs of the task.
  std::vector<double> raw;
  for (const auto& c : out) raw.push_back(c.at("p").get<double>());
  const std::vector<double> holm = posenc::analysis::holm_adjusted(raw);
  for (size_t k = 0; k < out.size(); ++k) EXPECT_DOUBLE_EQ(out[k].at("p_holm").get<double>(), holm[k]);
}

// A sweep still running: an encoding with one seed would leave one common seed; it is left out, named.
TEST(PropertiesGroups, AnEncodingWithFewerSeedsIsLeftOut) {
  const Scores a{{"pos", {{0, 0.90}, {1, 0.92}, {2, 0.91}}}};
  const Scores r1{{"pos", {{0, 0.95}, {1, 0.93}, {2, 0.97}}}};
  const Scores r2{{"pos", {{1, 0.99}}}};
  const auto out = group_comparisons({{"learned", "absolute", &a}, {"shaw", "relative", &r1},
                                      {"kerple", "relative", &r2}},
                                     {"pos"});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].at("seeds"), 3);
  EXPECT_EQ(out[0].at("encodings_b"), 1);
  EXPECT_EQ(out[0].at("left_out"), nlohmann::ordered_json::array({"kerple"}));
  EXPECT_NEAR(out[0].at("mean_b").get<double>(), (0.95 + 0.93 + 0.97) / 3, 1e-15);
  // Two seeds of three: left out too, since without it the comparison has three seeds, not two.
  const Scores r3{{"pos", {{0, 0.96}, {2, 0.94}}}};
  const auto partial = group_comparisons({{"learned", "absolute", &a}, {"shaw", "relative", &r1},
                                          {"kerple-power", "relative", &r3}},
                                         {"pos"});
  EXPECT_EQ(partial[0].at("seeds"), 3);
  EXPECT_EQ(partial[0].at("left_out"), nlohmann::ordered_json::array({"kerple-power"}));
  // Every encoding complete: nothing left out.
  EXPECT_TRUE(group_comparisons({{"learned", "absolute", &a}, {"shaw", "relative", &r1}}, {"pos"})[0]
                  .at("left_out")
                  .empty());
}

TEST(PropertiesGroups, NothingToCompareWithoutTwoGroupsOrTwoSeeds) {
  const Scores a{{"pos", {{0, 0.9}, {1, 0.8}}}};
  const Scores r{{"pos", {{0, 0.95}}}};
  EXPECT_TRUE(group_comparisons({{"learned", "absolute", &a}}, {"pos"}).empty());
  EXPECT_TRUE(group_comparisons({{"learned", "absolute", &a}, {"shaw", "relative", &r}}, {"pos"}).empty());
  EXPECT_TRUE(group_comparisons({{"learned", "absolute", &a}, {"shaw", "relative", &a}}, {"lexname"}).empty());
}

}  // namespace
