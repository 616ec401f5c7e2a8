// Checkpoint directories: the MANIFEST written last with sizes and FNV-1a
// checksums (checked against the published FNV test vectors and a plain loop
// here), a round trip of torch archives, the newest corrupted / truncated /
// incomplete checkpoint skipped with a warning, foreign directories, keep-N
// pruning, and a resume refused for another configuration.
#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "../kernels/check.h"
#include "posenc/training/checkpoint.h"
#include "posenc/training/trainer.h"
#include "../nn/test_files.h"

namespace posenc::nn::test {
namespace {

namespace fs = std::filesystem;
using posenc::test::expect_error;

// A fresh, empty directory per test.
class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fresh_test_dir("posenc_ckpt_");
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
};


void overwrite(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << bytes;
}

const std::map<std::string, std::string> kFiles = {{"a.bin", std::string("0123456789")},
                                                   {"state.json", "{\"x\": 1}\n"},
                                                   {"empty", ""}};

TEST(CheckpointHash, Fnv1a64MatchesThePublishedVectors) {
  // Test vectors from the FNV reference (Fowler, Noll, Vo: test_fnv.c, FNV-1a 64).
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ull);
  EXPECT_EQ(checkpoint_name(100), "step-00000100");
  EXPECT_EQ(checkpoint_name(0), "step-00000000");
}

TEST_F(CheckpointTest, RoundTripWritesTheManifestLast) {
  const fs::path dir = write_checkpoint(root_, 100, kFiles);
  EXPECT_EQ(dir, root_ / "step-00000100");
  for (const auto& [name, bytes] : kFiles) EXPECT_EQ(slurp(dir / name), bytes) << name;
  // The manifest lists every file with its size and checksum (FNV-1a by a plain loop).
  const nlohmann::json m = nlohmann::json::parse(slurp(dir / "MANIFEST"));
  EXPECT_EQ(m["format"], "posenc-checkpoint");
  EXPECT_EQ(m["version"], 1);
  EXPECT_EQ(m["step"], 100);
  ASSERT_EQ(m["files"].size(), kFiles.size());
  for (const auto& [name, bytes] : kFiles) {
    uint64_t h = 14695981039346656037ull;
    for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
    EXPECT_EQ(m["files"][name]["size"], bytes.size());
    EXPECT_EQ(m["files"][name]["fnv1a64"], hex);
  }
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    EXPECT_FALSE(e.path().string().ends_with(".tmp")) << "left behind: " << e.path();
  }
  const Checkpoint c = load_checkpoint(dir);
  EXPECT_EQ(c.step, 100);
  EXPECT_EQ(c.files, kFiles);
  expect_error<std::runtime_error>([&] { c.file("model.pt"); },
                                   "[checkpoint] " + dir.string() + " has no file 'model.pt'");
}

TEST_F(CheckpointTest, TorchArchivesRoundTripBitwise) {
  torch::manual_seed(3);
  torch::nn::Linear saved(5, 3), loaded(5, 3);
  torch::serialize::OutputArchive out;
  saved->save(out);
  std::ostringstream bytes;
  out.save_to(bytes);
  write_checkpoint(root_, 7, {{"model.pt", bytes.str()}});
  const Checkpoint c = load_checkpoint(root_ / "step-00000007");
  torch::serialize::InputArchive in;
  in.load_from(c.file("model.pt").data(), c.file("model.pt").size());
  loaded->load(in);
  EXPECT_TRUE(loaded->weight.equal(saved->weight));
  EXPECT_TRUE(loaded->bias.equal(saved->bias));
}

TEST_F(CheckpointTest, CorruptedNewestFallsBackToThePreviousWithAWarning) {
  write_checkpoint(root_, 100, kFiles);
  write_checkpoint(root_, 200, kFiles);
  overwrite(root_ / "step-00000200" / "a.bin", "0123456788");  // same size, one byte changed
  const auto latest = find_latest_checkpoint(root_);
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->checkpoint.step, 100);
  EXPECT_EQ(latest->checkpoint.files, kFiles);
  EXPECT_EQ(latest->warnings, std::vector<std::string>{
                                  "checkpoint step-00000200 is corrupted (a.bin: checksum mismatch); resuming from "
                                  "step-00000100"});
  expect_error<std::runtime_error>([&] { load_checkpoint(root_ / "step-00000200"); },
                                   "[checkpoint] " + (root_ / "step-00000200").string() +
                                       " is corrupted (a.bin: checksum mismatch)");
}

TEST_F(CheckpointTest, TruncatedMissingAndIncompleteCheckpointsAreSkipped) {
  write_checkpoint(root_, 100, kFiles);
  write_checkpoint(root_, 200, kFiles);
  write_checkpoint(root_, 300, kFiles);
  write_checkpoint(root_, 400, kFiles);
  fs::resize_file(root_ / "step-00000400" / "a.bin", 3);
  fs::remove(root_ / "step-00000300" / "MANIFEST");  // killed before the manifest
  fs::remove(root_ / "step-00000200" / "state.json");
  const auto latest = find_latest_checkpoint(root_, "evaluating");
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->checkpoint.step, 100);
  EXPECT_EQ(latest->warnings,
            (std::vector<std::string>{
                "checkpoint step-00000400 is corrupted (a.bin: truncated to 3 of 10 bytes); evaluating step-00000100",
                "checkpoint step-00000300 is incomplete (no MANIFEST); evaluating step-00000100",
                "checkpoint step-00000200 is corrupted (state.json: missing); evaluating step-00000100"}));
  overwrite(root_ / "step-00000100" / "a.bin", "0123456789+");
  expect_error<std::runtime_error>(
      [&] { find_latest_checkpoint(root_); },
      "[checkpoint] no valid checkpoint in " + root_.string() +
          ": step-00000400 is corrupted (a.bin: truncated to 3 of 10 bytes), step-00000300 is incomplete (no "
          "MANIFEST), step-00000200 is corrupted (state.json: missing), step-00000100 is corrupted (a.bin: 11 "
          "bytes, the MANIFEST says 10)");
}

TEST_F(CheckpointTest, ForeignDirectoriesAreNotCheckpoints) {
  EXPECT_FALSE(find_latest_checkpoint(root_).has_value());
  EXPECT_FALSE(find_latest_checkpoint(root_ / "absent").has_value());
  fs::create_directories(root_ / "other");
  overwrite(root_ / "other" / "model.pt", "weights");
  expect_error<std::runtime_error>([&] { load_checkpoint(root_ / "other"); },
                                   "[checkpoint] " + (root_ / "other").string() +
                                       " is not a posenc checkpoint (no MANIFEST)");
  overwrite(root_ / "other" / "MANIFEST", "{\"format\": \"safetensors\", \"version\": 1}");
  expect_error<std::runtime_error>([&] { load_checkpoint(root_ / "other"); },
                                   "[checkpoint] " + (root_ / "other").string() +
                                       " is corrupted (MANIFEST format is 'safetensors', not 'posenc-checkpoint')");
  overwrite(root_ / "other" / "MANIFEST", "{\"format\": \"posenc-checkpoint\", \"vers");
  expect_error<std::runtime_error>([&] { load_checkpoint(root_ / "other"); },
                                   "[checkpoint] " + (root_ / "other").string() +
                                       " is corrupted (MANIFEST is not valid JSON)");
  expect_error([&] { write_checkpoint(root_, 1, {{"MANIFEST", ""}}); },
               "[checkpoint] file name must be a plain name other than MANIFEST and not ending in .tmp, got "
               "'MANIFEST'");
}

TEST_F(CheckpointTest, PruningKeepsTheNewestAndDropsLaterTimelines) {
  for (int64_t s = 100; s <= 500; s += 100) write_checkpoint(root_, s, kFiles);
  fs::create_directories(root_ / "notes");  // not a checkpoint: never touched
  prune_checkpoints(root_, 500, 3);
  auto steps = [&] {
    std::vector<int64_t> out;
    for (const CheckpointEntry& e : list_checkpoints(root_)) out.push_back(e.step);
    return out;
  };
  EXPECT_EQ(steps(), (std::vector<int64_t>{300, 400, 500}));
  prune_checkpoints(root_, 300, 3);  // resumed from 300: 400 and 500 belong to the abandoned timeline
  EXPECT_EQ(steps(), (std::vector<int64_t>{300}));
  EXPECT_TRUE(fs::is_directory(root_ / "notes"));
  // Rewriting a step replaces the whole directory: no stale file survives.
  overwrite(root_ / "step-00000300" / "stale", "x");
  write_checkpoint(root_, 300, {{"a.bin", "new"}});
  EXPECT_FALSE(fs::exists(root_ / "step-00000300" / "stale"));
  EXPECT_EQ(load_checkpoint(root_ / "step-00000300").files.size(), 1u);
}

// A two-step run of a tiny model, then resumes that do not fit it.
TEST_F(CheckpointTest, ResumeRefusesAnotherConfiguration) {
  TrainConfig config;
  config.task = "order";
  config.encoding = "rope";
  config.layers = 1;
  config.dim = 8;
  config.heads = 2;
  config.seq_len = 8;
  config.batch = 2;
  config.steps = 2;
  config.warmup = 1;
  train(config, root_);
  const std::string ckpt = (root_ / "checkpoints" / "step-00000002").string();
  TrainConfig other = config;
  other.encoding = "alibi";
  expect_error<std::runtime_error>([&] { train(other, root_, {.resume = true}); },
                                   "[checkpoint] " + ckpt + " was written for encoding 'rope', this run uses 'alibi'");
  other = config;
  other.dim = 16;
  expect_error<std::runtime_error>([&] { train(other, root_, {.resume = true}); },
                                   "[checkpoint] " + ckpt + " was written for dim 8, this run uses 16");
  other = config;
  other.lr = 0.5;
  expect_error<std::runtime_error>([&] { train(other, root_, {.resume = true}); },
                                   "[checkpoint] " + ckpt + " was written for lr 0.001, this run uses 0.5");
  // Without resume, an existing run is never overwritten.
  expect_error([&] { train(config, root_); },
               "[train] " + root_.string() +
                   " already holds a run (metrics.jsonl or checkpoints); resume it or choose another directory");
}

}  // namespace
}  // namespace posenc::nn::test
