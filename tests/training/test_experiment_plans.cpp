// The suites' default encodings follow the registry: every family a model can
// take, after the suite's own list, so a family added later is in the next run.
// A run's identity names its data by the suite's layout, not by where the suite lies.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "posenc/nn/encoding_registry.h"
#include "posenc/training/experiment.h"

namespace posenc::nn::test {
namespace {

TEST(ExperimentPlans, EveryFamilyAfterTheListedOnesOnceEach) {
  TrainConfig model;
  model.task = "order";  // an encoder
  model.dim = 16, model.heads = 2, model.seq_len = 32;
  const std::vector<std::string> all = with_every_family({"rope", "none"}, model);
  ASSERT_GE(all.size(), 2u);
  EXPECT_EQ(all[0], "rope");
  EXPECT_EQ(all[1], "none");
  for (const EncodingFamily& info : encoding_families()) {
    EncodingConfig e;
    e.dim = 16, e.num_heads = 2, e.max_positions = 32, e.causal = false;
    bool valid = true;
    try {
      validate_encoding(parse_encoding(info.name), e);
    } catch (const std::exception&) {
      valid = false;
    }
    EXPECT_EQ(std::count(all.begin(), all.end(), info.name), valid ? 1 : 0) << info.name;
  }
  const std::vector<std::string> skipping = with_every_family({}, model, {"shaw", "t5"});
  EXPECT_EQ(std::count(skipping.begin(), skipping.end(), "shaw"), 0);
  EXPECT_EQ(std::count(skipping.begin(), skipping.end(), "t5"), 0);
  EXPECT_EQ(skipping.size() + 2, with_every_family({}, model).size());
}

TEST(ExperimentPlans, FamiliesTheModelCannotTakeAreLeftOut) {
  TrainConfig model;
  model.task = "order";
  model.dim = 6, model.heads = 2, model.seq_len = 8;  // head_dim 3: no rotary family fits
  const std::vector<std::string> all = with_every_family({}, model);
  EXPECT_EQ(std::count(all.begin(), all.end(), "rope"), 0);
  EXPECT_EQ(std::count(all.begin(), all.end(), "rope-xpos"), 0);
  EXPECT_EQ(std::count(all.begin(), all.end(), "alibi"), 1);
}

TEST(ExperimentPlans, ExtrapolationRunsNoPEOnceAsNone) {
  // In a decoder nope and none build the same model; the suite runs it once.
  const std::vector<std::string>& e = extrapolation_plan(false).encodings;
  EXPECT_EQ(std::count(e.begin(), e.end(), "none"), 1);
  EXPECT_EQ(std::count(e.begin(), e.end(), "nope"), 0);
  EXPECT_EQ(std::count(e.begin(), e.end(), "fire"), 1);
  EXPECT_EQ(std::count(e.begin(), e.end(), "cope"), 1);
}

TEST(ExperimentPlans, IdentityNamesDataByTheSuiteLayout) {
  using nlohmann::json;
  auto data_of = [](const std::string& data) {
    return suite_relative_data(json{{"task_options", {{"data", data}, {"vocab_size", 8000}}}, {"seed", 1}});
  };
  EXPECT_EQ(data_of("/work/main/out/p/corpus"),
            (json{{"task_options", {{"data", "corpus"}, {"vocab_size", 8000}}}, {"seed", 1}}));
  EXPECT_EQ(data_of("/a/b/corpus/")["task_options"]["data"], "corpus");
  EXPECT_EQ(data_of("rel/./corpus/tasks/lexname")["task_options"]["data"], "corpus/tasks/lexname");
  EXPECT_EQ(data_of("corpus")["task_options"]["data"], "corpus");
  EXPECT_EQ(data_of("corpus/tasks/pos")["task_options"]["data"], "corpus/tasks/pos");
  // Not a suite's layout: kept as given.
  EXPECT_EQ(data_of("/data/wiki.txt")["task_options"]["data"], "/data/wiki.txt");
  EXPECT_EQ(data_of("/x/corpus/lexname")["task_options"]["data"], "/x/corpus/lexname");
  EXPECT_EQ(data_of("")["task_options"]["data"], "");
  EXPECT_EQ(suite_relative_data(json{{"seed", 1}}), (json{{"seed", 1}}));
  EXPECT_EQ(suite_relative_data(json::array({1})), json::array({1}));
  EXPECT_EQ(suite_relative_data(json{{"task_options", 3}}), (json{{"task_options", 3}}));
}

}  // namespace
}  // namespace posenc::nn::test
