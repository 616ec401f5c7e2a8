// Early stopping of a suite's stage (src/experiments/early_stopping.h): where
// it stops for a scripted validation record, which checkpoints it keeps, and a
// stage stopped under one patience continued under a larger one ending where
// a run with the larger patience from the start ends.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "../nn/test_files.h"
#include "early_stopping.h"
#include "posenc/training/checkpoint.h"
#include "posenc/training/trainer.h"

namespace posenc::experiments::test {
namespace {

namespace fs = std::filesystem;
using nn::test::fresh_test_dir;
using nn::test::slurp;

class EarlyStoppingTest : public ::testing::Test {
 protected:
  void SetUp() override { root_ = fresh_test_dir("posenc_early_stopping_"); }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
};

nn::TrainConfig tiny_stage() {
  nn::TrainConfig c;
  c.task = "lookback";
  c.encoding = "learned";
  c.layers = 1;
  c.dim = 16;
  c.heads = 2;
  c.seq_len = 8;
  c.batch = 4;
  c.steps = 40;
  c.warmup = 2;
  c.lr = 3e-3;
  c.log_every = 2;
  c.threads = 1;
  return c;
}

// Validation scores by step (every 2 steps): the first best at 4, equalled at 10 (not better), beaten at 14.
const std::map<int64_t, double> kScores = {{2, 0.1},  {4, 0.5},  {6, 0.3},  {8, 0.4},  {10, 0.5},
                                           {12, 0.2}, {14, 0.7}, {16, 0.6}, {18, 0.6}, {20, 0.6},
                                           {22, 0.6}, {24, 0.6}, {26, 0.6}};

double scripted(const fs::path& checkpoint) {
  const int64_t step = std::stoll(checkpoint.filename().string().substr(std::string("step-").size()));
  return kScores.at(step);
}

std::vector<int64_t> checkpoint_steps(const fs::path& dir) {
  std::vector<int64_t> steps;
  for (const nn::CheckpointEntry& e : nn::list_checkpoints(dir / "checkpoints")) steps.push_back(e.step);
  return steps;
}

TEST_F(EarlyStoppingTest, StopsAfterPatienceKeepingTheBestAndTheTwoNewest) {
  const StageTraining t = train_with_early_stopping(tiny_stage(), root_ / "stage", {2, 3}, scripted, {});
  // Best at 4 (10 only equals it); 6, 8, 10 are three evaluations without a better score.
  EXPECT_EQ(t.best_step, 4);
  EXPECT_EQ(t.best_score, 0.5);
  EXPECT_EQ(t.last_step, 10);
  EXPECT_EQ(checkpoint_steps(root_ / "stage"), (std::vector<int64_t>{4, 8, 10}));
  EXPECT_GT(t.tokens, 0);
}

TEST_F(EarlyStoppingTest, AStageContinuedUnderALargerPatienceEndsAsIfItHadOneFromTheStart) {
  const fs::path stage = root_ / "stage";
  train_with_early_stopping(tiny_stage(), stage, {2, 3}, scripted, {});
  // Patience 6: 12 is the fifth evaluation after the best at 4, 14 beats it, 16 ... 26 do not.
  const StageTraining continued = train_with_early_stopping(tiny_stage(), stage, {2, 6}, scripted, {});
  const fs::path fresh = root_ / "fresh";
  const StageTraining direct = train_with_early_stopping(tiny_stage(), fresh, {2, 6}, scripted, {});
  EXPECT_EQ(direct.best_step, 14);
  EXPECT_EQ(direct.last_step, 26);
  EXPECT_EQ(continued.best_step, direct.best_step);
  EXPECT_EQ(continued.last_step, direct.last_step);
  EXPECT_EQ(slurp(stage / "validation.jsonl"), slurp(fresh / "validation.jsonl"));
  EXPECT_EQ(checkpoint_steps(stage), (std::vector<int64_t>{14, 24, 26}));
  EXPECT_EQ(checkpoint_steps(fresh), checkpoint_steps(stage));
  // The weights of the best checkpoint are the same bytes.
  EXPECT_EQ(slurp(checkpoint_dir(stage, 14) / "model.pt"), slurp(checkpoint_dir(fresh, 14) / "model.pt"));
}

}  // namespace
}  // namespace posenc::experiments::test
