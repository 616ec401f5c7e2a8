// Training: a 2-layer model learns `order` (and without any positional
// encoding it cannot: the [CLS] output of an encoder without positions is
// invariant to permuting the other tokens), the learning-rate schedule against
// its formula, the metrics file, a run interrupted and resumed (also past a
// corrupted checkpoint) ending bit-identical to an uninterrupted one, and
// evaluation at other lengths including a learned table that is too short.
#include <c10/util/Exception.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <torch/serialize/input-archive.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <numbers>
#include <sstream>
#include <string>
#include <vector>

#include "../kernels/check.h"
#include "posenc/io/directory_lock.h"
#include "posenc/kernels/build_info.h"
#include "posenc/training/checkpoint.h"
#include "posenc/training/data_parallel.h"
#include "posenc/training/throughput_record.h"
#include "posenc/training/trainer.h"
#include "../nn/test_files.h"

namespace posenc::nn::test {
namespace {

namespace fs = std::filesystem;
using posenc::test::expect_error;

class TrainingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fresh_test_dir("posenc_train_");
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
};


std::vector<nlohmann::json> lines_of(const fs::path& p) {
  std::vector<nlohmann::json> out;
  std::istringstream in(slurp(p));
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

// Every tensor of a model.pt archive, by name.
std::map<std::string, at::Tensor> tensors_of(const fs::path& p, const TrainConfig& config) {
  TaskModel model(Task::parse(config.task, config.task_options), resolve_train_config(config));
  const std::string bytes = slurp(p);
  torch::serialize::InputArchive archive;
  archive.load_from(bytes.data(), bytes.size());
  model.module().load(archive);
  std::map<std::string, at::Tensor> out;
  for (const auto& item : model.module().named_parameters()) out[item.key()] = item.value().clone();
  return out;
}

// The smallest useful run: 1 thread, so timing under a busy CI machine does not matter.
TrainConfig tiny_config() {
  TrainConfig c;
  c.task = "lookback";
  c.encoding = "learned+shaw";
  c.layers = 2;
  c.dim = 16;
  c.heads = 2;
  c.seq_len = 8;
  c.batch = 4;
  c.steps = 14;
  c.warmup = 3;
  c.lr = 3e-3;
  c.dropout = 0.1;  // draws from torch's generator every step: its state must be restored too
  c.checkpoint_every = 4;
  c.log_every = 3;  // not a divisor of checkpoint_every: resumes land inside a log window
  c.keep_checkpoints = 2;
  c.threads = 1;
  return c;
}

TEST_F(TrainingTest, TwoLayerModelLearnsOrderAndNoEncodingCannot) {
  TrainConfig c;
  c.task = "order";
  c.encoding = "rope";
  c.layers = 2;
  c.dim = 32;
  c.heads = 4;
  c.seq_len = 16;
  c.batch = 32;
  c.steps = 200;
  c.warmup = 30;
  c.lr = 3e-3;
  c.log_every = 50;
  c.checkpoint_every = 200;
  c.threads = 1;
  train(c, root_ / "rope");
  const EvalReport learned = evaluate(root_ / "rope", {16}, 8);
  ASSERT_EQ(learned.lengths.size(), 1u);
  EXPECT_EQ(learned.lengths[0].count, 256);
  EXPECT_GE(learned.lengths[0].accuracy, 0.9);

  c.encoding = "none";
  c.steps = 100;
  c.checkpoint_every = 100;
  train(c, root_ / "none");
  const EvalReport blind = evaluate(root_ / "none", {16}, 8);
  // Chance is 0.5; 256 examples have sd 0.03, so 0.7 is ~6 sd above it.
  EXPECT_LE(blind.lengths[0].accuracy, 0.7);
}

TEST_F(TrainingTest, LearningRateWarmsUpLinearlyThenFollowsACosine) {
  TrainConfig c;
  c.lr = 0.01;
  c.warmup = 10;
  c.steps = 110;
  for (int64_t s = 1; s <= 10; ++s) EXPECT_DOUBLE_EQ(learning_rate(c, s), 0.01 * static_cast<double>(s) / 10);
  EXPECT_DOUBLE_EQ(learning_rate(c, 60), 0.005);  // half way through the decay: cos(pi/2) = 0
  EXPECT_NEAR(learning_rate(c, 110), 0.0, 1e-18);
  for (int64_t s = 11; s <= 110; ++s) {
    const long double progress = static_cast<long double>(s - 10) / 100;
    const long double expected = 0.005L * (1 + std::cos(std::numbers::pi_v<long double> * progress));
    EXPECT_NEAR(learning_rate(c, s), static_cast<double>(expected), 1e-17) << s;  // double cos, ~1 ulp
    EXPECT_LT(learning_rate(c, s), learning_rate(c, s - 1) + 1e-18) << "not decreasing at " << s;
  }
}

TEST_F(TrainingTest, WritesConfigAndDeterministicMetrics) {
  const TrainConfig c = tiny_config();
  int reports = 0;
  TrainCallbacks callbacks;
  callbacks.progress = [&](const TrainProgress& p) {
    ++reports;
    EXPECT_EQ(p.steps, 14);
    EXPECT_GT(p.tokens_per_second, 0);
  };
  const TrainResult r = train(c, root_, {}, callbacks);
  EXPECT_EQ(r.start_step, 0);
  EXPECT_EQ(r.end_step, 14);
  EXPECT_EQ(r.checkpoint, root_ / "checkpoints" / "step-00000014");
  EXPECT_EQ(reports, 5);
  const std::vector<nlohmann::json> lines = lines_of(root_ / "metrics.jsonl");
  ASSERT_EQ(lines.size(), 5u);
  const std::vector<int64_t> steps = {3, 6, 9, 12, 14};
  for (size_t i = 0; i < lines.size(); ++i) {
    const nlohmann::json& l = lines[i];
    EXPECT_EQ(l["step"], steps[i]);
    EXPECT_EQ(l["tokens"], steps[i] * 4 * 8);
    EXPECT_EQ(l["lr"].get<double>(), learning_rate(c, steps[i]));
    EXPECT_GT(l["loss"].get<double>(), 0);
    EXPECT_GE(l["accuracy"].get<double>(), 0);
    EXPECT_LE(l["accuracy"].get<double>(), 1);
    EXPECT_GT(l["grad_norm"].get<double>(), 0);
    std::vector<std::string> keys;
    for (const auto& item : l.items()) keys.push_back(item.key());
    std::sort(keys.begin(), keys.end());
    EXPECT_EQ(keys, (std::vector<std::string>{"accuracy", "grad_norm", "loss", "lr", "step", "tokens"}));
  }
  EXPECT_EQ(lines_of(root_ / "throughput.jsonl").size(), 5u);
  // keep_checkpoints = 2: steps 12 and 14 remain.
  std::vector<int64_t> kept;
  for (const CheckpointEntry& e : list_checkpoints(root_ / "checkpoints")) kept.push_back(e.step);
  EXPECT_EQ(kept, (std::vector<int64_t>{12, 14}));
  // config.json holds every option and reads back to the resolved config.
  const TrainConfig back = train_config_from_json(slurp(root_ / "config.json"), "config.json");
  EXPECT_EQ(train_config_json(back), slurp(root_ / "config.json"));
  const nlohmann::json j = nlohmann::json::parse(slurp(root_ / "config.json"));
  EXPECT_EQ(j["max_positions"], 8);  // resolved from seq_len
  EXPECT_EQ(j["model"], "decoder");
  EXPECT_EQ(j["encoding_parts"], (std::vector<std::string>{"learned", "shaw"}));
  EXPECT_TRUE(j.contains("posenc_version"));
  EXPECT_EQ(j["encoding_parameters"]["max_distance"], 16);
}

// The attention path is part of the run: the fused and composed paths give
// the same training within rounding, the field round-trips, and a config.json
// written before the field existed reads "composed" (the path it trained with).
TEST_F(TrainingTest, AttentionPathIsRecordedAndBothPathsTrainAlike) {
  TrainConfig c = tiny_config();
  EXPECT_EQ(c.attention, "fused");
  train(c, root_ / "fused");
  c.attention = "composed";
  train(c, root_ / "composed");
  const std::vector<nlohmann::json> fused = lines_of(root_ / "fused" / "metrics.jsonl");
  const std::vector<nlohmann::json> composed = lines_of(root_ / "composed" / "metrics.jsonl");
  ASSERT_EQ(fused.size(), composed.size());
  for (size_t i = 0; i < fused.size(); ++i) {
    // float32 training over 14 steps: the paths round differently, the trajectories stay within 1e-3.
    EXPECT_NEAR(fused[i]["loss"].get<double>(), composed[i]["loss"].get<double>(), 1e-3);
  }
  EXPECT_EQ(nlohmann::json::parse(slurp(root_ / "fused" / "config.json"))["attention"], "fused");
  nlohmann::json old = nlohmann::json::parse(slurp(root_ / "composed" / "config.json"));
  old.erase("attention");
  EXPECT_EQ(train_config_from_json(old.dump(), "config.json").attention, "composed");
  // Resuming with the other path is refused: it would not continue the same trajectory.
  TrainConfig other = tiny_config();
  other.attention = "composed";
  try {
    train(other, root_ / "fused", {.resume = true});
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("was written for attention 'fused', this run uses 'composed'"),
              std::string::npos)
        << e.what();
  }
}

// The reference: one uninterrupted run.
void expect_same_run(const fs::path& a, const fs::path& b, const TrainConfig& c) {
  EXPECT_EQ(slurp(a / "metrics.jsonl"), slurp(b / "metrics.jsonl"));
  const fs::path last = fs::path("checkpoints") / "step-00000014";
  const auto ta = tensors_of(a / last / "model.pt", c), tb = tensors_of(b / last / "model.pt", c);
  ASSERT_EQ(ta.size(), tb.size());
  for (const auto& [name, t] : ta) EXPECT_TRUE(t.equal(tb.at(name))) << name << " differs";
  // The manifests list size and checksum of model, optimizer, generator and state: all equal.
  EXPECT_EQ(slurp(a / last / "MANIFEST"), slurp(b / last / "MANIFEST"));
}

TEST_F(TrainingTest, RecordedTrainingSumsTheWindowsOfThroughputJsonl) {
  const fs::path dir = root_ / "timing";
  fs::create_directories(dir);
  // Windows of 3 steps at 4 tokens per step: 12 tokens at 6 tokens/s = 2 s; then 12 at 4 = 3 s; a resumed
  // process's first window (steps 6..8, 8 tokens at 8 tokens/s = 1 s); then what a resume cut stops reading.
  std::ofstream(dir / "throughput.jsonl") << R"({"step":3,"elapsed_s":2.0,"tokens_per_s":6.0}
{"step":6,"elapsed_s":5.0,"tokens_per_s":4.0}
{"step":8,"elapsed_s":1.0,"tokens_per_s":8.0}
{"step":9,"elapsed_s":1.5,"tokens_per_s":0}
{"step":12,"elapsed_s":3.0,"tokens_per_s":4.0}
)";
  const RecordedTraining all = recorded_training(dir, 100, 4);
  EXPECT_EQ(all.steps, 8);
  EXPECT_DOUBLE_EQ(all.seconds, 6.0);
  const RecordedTraining part = recorded_training(dir, 7, 4);
  EXPECT_EQ(part.steps, 6);
  EXPECT_DOUBLE_EQ(part.seconds, 5.0);
  EXPECT_EQ(recorded_training(dir, 0, 4).steps, 0);
  expect_error<std::invalid_argument>([&] { recorded_training(dir, -1, 4); },
                                      "[train] up_to_step must be >= 0, got -1");
  expect_error<std::invalid_argument>([&] { recorded_training(dir, 8, 0); },
                                      "[train] tokens_per_step must be >= 1, got 0");
  fs::remove(dir / "throughput.jsonl");
  expect_error<std::runtime_error>([&] { recorded_training(dir, 8, 4); },
                                   "[train] " + (dir / "throughput.jsonl").string() + ": cannot open: No such file or directory");
}

TEST_F(TrainingTest, InterruptedAndResumedRunIsBitIdentical) {
  const TrainConfig c = tiny_config();
  train(c, root_ / "straight");

  // Stopped after step 10: checkpoints at 4 and 8, metrics up to step 9 (past the checkpoint).
  const TrainResult first = train(c, root_ / "resumed", {.stop_after = 10});
  EXPECT_EQ(first.end_step, 10);
  EXPECT_EQ(lines_of(root_ / "resumed" / "metrics.jsonl").size(), 3u);
  const TrainResult second = train(c, root_ / "resumed", {.resume = true});
  EXPECT_EQ(second.start_step, 8);
  EXPECT_EQ(second.end_step, 14);
  EXPECT_TRUE(second.warnings.empty());
  expect_same_run(root_ / "straight", root_ / "resumed", c);

  // The newest checkpoint corrupted: reported, the previous one used, same result.
  train(c, root_ / "corrupted", {.stop_after = 10});
  const fs::path model = root_ / "corrupted" / "checkpoints" / "step-00000008" / "model.pt";
  std::string bytes = slurp(model);
  bytes[bytes.size() / 2] ^= 1;
  std::ofstream(model, std::ios::binary | std::ios::trunc) << bytes;
  std::vector<std::string> warned;
  TrainCallbacks callbacks;
  callbacks.warning = [&](const std::string& w) { warned.push_back(w); };
  const TrainResult third = train(c, root_ / "corrupted", {.resume = true}, callbacks);
  EXPECT_EQ(third.start_step, 4);
  EXPECT_EQ(warned, std::vector<std::string>{"checkpoint step-00000008 is corrupted (model.pt: checksum mismatch); "
                                             "resuming from step-00000004"});
  EXPECT_EQ(third.warnings, warned);
  expect_same_run(root_ / "straight", root_ / "corrupted", c);

  // The recorded training time spans both processes: the windows tile each process's training loop, so
  // their sum is at most the two processes' training seconds together, and it reaches the last step.
  const int64_t tokens_per_step = c.batch * c.seq_len;
  const RecordedTraining both = recorded_training(root_ / "resumed", c.steps, tokens_per_step);
  EXPECT_EQ(both.steps, 14);
  EXPECT_GT(both.seconds, 0);
  EXPECT_LE(both.seconds, (first.seconds + second.seconds) * (1 + 1e-9));
  // Only windows up to the step asked are counted.
  EXPECT_EQ(recorded_training(root_ / "resumed", 13, tokens_per_step).steps, 12);

  // Resuming a finished run does nothing; another thread count is allowed but warned about.
  TrainConfig more_threads = c;
  more_threads.threads = 2;
  const TrainResult done = train(more_threads, root_ / "resumed", {.resume = true});
  EXPECT_EQ(done.start_step, 14);
  EXPECT_EQ(done.end_step, 14);
  EXPECT_EQ(done.warnings, std::vector<std::string>{"checkpoint step-00000014 was written with 1 threads, this run "
                                                    "uses 2: results will not be bit-identical to an uninterrupted "
                                                    "run"});
  at::set_num_threads(1);
}

// The sharded gradient is the batch's gradient: each shard's mean loss
// weighted by its count (the lookback task scores a varying number of tokens
// per row), summed in shard order whichever thread ran the shard.
TEST_F(TrainingTest, DataParallelGradientIsTheBatchGradient) {
  TrainConfig c = resolve_train_config(tiny_config());
  c.dropout = 0;
  c.batch = 7;
  const Task task = Task::parse(c.task, c.task_options);
  torch::manual_seed(3);
  TaskModel model(task, c);
  const std::vector<at::Tensor> params = model.module().parameters();
  const Batch batch = task.batch(0, DataStream::kTrain, 0, c.batch, c.seq_len);
  const auto grads = [&] {
    std::vector<at::Tensor> g;
    for (const at::Tensor& p : params) g.push_back(p.grad().defined() ? p.grad().clone() : at::Tensor());
    for (const at::Tensor& p : params) const_cast<at::Tensor&>(p).mutable_grad() = at::Tensor();
    return g;
  };
  const TaskScore whole = model.score(batch);
  whole.loss.backward();
  const std::vector<at::Tensor> expected = grads();
  const auto shard_loss = [&](int64_t begin, int64_t count) {
    const TaskScore s = model.score(batch.rows(begin, count));
    return ShardLoss{s.loss, s.count, s.correct};
  };
  const ShardLoss three = data_parallel_gradient(shard_loss, c.batch, params, 3, 1, 0);
  const std::vector<at::Tensor> one_worker = grads();
  data_parallel_gradient(shard_loss, c.batch, params, 3, 2, 0);
  const std::vector<at::Tensor> two_workers = grads();
  EXPECT_NEAR(three.loss.item<double>(), whole.loss.item<double>(), 1e-6);
  EXPECT_EQ(three.count, whole.count);
  EXPECT_EQ(three.correct, whole.correct);
  for (size_t i = 0; i < params.size(); ++i) {
    ASSERT_EQ(expected[i].defined(), one_worker[i].defined()) << i;
    if (!expected[i].defined()) continue;
    EXPECT_LE((one_worker[i] - expected[i]).abs().max().item<double>(), 1e-6) << i;
    EXPECT_TRUE(one_worker[i].equal(two_workers[i])) << i;
  }
  expect_error([&] { data_parallel_gradient(shard_loss, c.batch, params, 8, 2, 0); },
               "[data_parallel] shards must be in 1..rows (7), got 8");
  expect_error([&] { data_parallel_gradient(shard_loss, c.batch, params, 2, 0, 0); },
               "[data_parallel] workers must be >= 1, got 0");
  // A shard that throws: the error reaches the caller once every thread has stopped.
  const auto failing = [&](int64_t begin, int64_t count) -> ShardLoss {
    if (begin > 0) throw std::invalid_argument("shard failed");
    return shard_loss(begin, count);
  };
  expect_error([&] { data_parallel_gradient(failing, c.batch, params, 3, 2, 0); }, "shard failed");
}

// Two threads: the batch in shards on their own threads (dropout from a
// generator per step and shard). Deterministic, resumable bit for bit, and the
// same training as one thread within float32 rounding.
TEST_F(TrainingTest, ShardedStepsAreDeterministicAndResumeBitIdentically) {
  if (kernels::available_cores() < 2) GTEST_SKIP() << "one core available";
  TrainConfig c = tiny_config();
  c.threads = 2;
  train(c, root_ / "straight");
  train(c, root_ / "again");
  EXPECT_EQ(slurp(root_ / "straight" / "metrics.jsonl"), slurp(root_ / "again" / "metrics.jsonl"));
  train(c, root_ / "resumed", {.stop_after = 10});
  const TrainResult second = train(c, root_ / "resumed", {.resume = true});
  EXPECT_EQ(second.start_step, 8);
  expect_same_run(root_ / "straight", root_ / "resumed", c);

  TrainConfig plain = tiny_config();
  plain.dropout = 0;  // the one-thread run draws dropout from torch's generator: compare without it
  train(plain, root_ / "one");
  plain.threads = 2;
  train(plain, root_ / "two");
  const std::vector<nlohmann::json> one = lines_of(root_ / "one" / "metrics.jsonl");
  const std::vector<nlohmann::json> two = lines_of(root_ / "two" / "metrics.jsonl");
  ASSERT_EQ(one.size(), two.size());
  for (size_t i = 0; i < one.size(); ++i) {
    EXPECT_NEAR(one[i]["loss"].get<double>(), two[i]["loss"].get<double>(), 1e-4);
  }
  at::set_num_threads(1);
}

// The state a SIGKILL, SIGINT or full disk leaves while the first checkpoint
// is written: its files (some or all) but no MANIFEST, which is written last.
TEST_F(TrainingTest, RunKilledDuringItsFirstCheckpointResumesFromStepZero) {
  const TrainConfig c = tiny_config();
  train(c, root_ / "straight");
  train(c, root_ / "killed", {.stop_after = 4});
  const fs::path first = root_ / "killed" / "checkpoints" / "step-00000004";
  ASSERT_TRUE(fs::remove(first / "MANIFEST"));
  fs::remove(first / "rng.pt");

  // Without --resume the directory is still refused: it holds a run.
  expect_error([&] { train(c, root_ / "killed"); },
               "[train] " + (root_ / "killed").string() +
                   " already holds a run (metrics.jsonl or checkpoints); resume it or choose another directory");
  const TrainResult resumed = train(c, root_ / "killed", {.resume = true});
  EXPECT_EQ(resumed.start_step, 0);
  EXPECT_EQ(resumed.end_step, 14);
  EXPECT_EQ(resumed.warnings, std::vector<std::string>{"no valid checkpoint in " +
                                                       (root_ / "killed" / "checkpoints").string() +
                                                       " (step-00000004 is incomplete (no MANIFEST)); starting from "
                                                       "step 0"});
  expect_same_run(root_ / "straight", root_ / "killed", c);
}

TEST_F(TrainingTest, ASecondProcessOnARunDirectoryIsRefusedNamingTheHolder) {
  const TrainConfig c = tiny_config();
  {
    const io::DirectoryLock held("test", (root_ / "run").string());
    expect_error<std::runtime_error>([&] { train(c, root_ / "run", {.resume = true}); },
                                     "[train] " + (root_ / "run").string() + " is in use by process " +
                                         std::to_string(::getpid()) + " (lock file " +
                                         (root_ / "run" / ".lock").string() + ")");
    EXPECT_FALSE(fs::exists(root_ / "run" / "metrics.jsonl"));  // nothing touched
  }
  // A holder killed with SIGKILL releases the lock with its life. The child
  // only takes the lock and waits: no torch call after fork().
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    try {
      const io::DirectoryLock held("test", (root_ / "run").string());
      const char byte = 1;
      if (::write(ready[1], &byte, 1) != 1) ::_exit(2);
      ::pause();
    } catch (...) {
    }
    ::_exit(1);
  }
  ::close(ready[1]);
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1) << "the child could not take the lock";
  ::close(ready[0]);
  expect_error<std::runtime_error>([&] { io::DirectoryLock probe("test", (root_ / "run").string()); },
                                   "[test] " + (root_ / "run").string() + " is in use by process " +
                                       std::to_string(child) + " (lock file " + (root_ / "run" / ".lock").string() +
                                       ")");
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  TrainConfig short_run = c;
  short_run.steps = 2;
  EXPECT_EQ(train(short_run, root_ / "run").end_step, 2);
}

TEST_F(TrainingTest, PlantedLinksAreNeverWrittenThrough) {
  TrainConfig c = tiny_config();
  c.steps = 4;
  fs::create_directories(root_ / "run");
  std::ofstream(root_ / "victim") << "precious";
  // The names the old writers used for their temporary files.
  fs::create_symlink(root_ / "victim", root_ / "run" / "config.json.tmp");
  fs::create_symlink(root_ / "victim", root_ / "run" / "throughput.jsonl.tmp");
  train(c, root_ / "run");
  EXPECT_EQ(slurp(root_ / "victim"), "precious");
  EXPECT_TRUE(fs::is_regular_file(root_ / "run" / "config.json"));
  // A link where the metrics log goes is refused, not followed.
  fs::create_directories(root_ / "linked");
  fs::create_symlink(root_ / "victim", root_ / "linked" / "metrics.jsonl");
  expect_error<std::runtime_error>([&] { train(c, root_ / "linked", {.resume = true}); },
                                   "[train] cannot open " + (root_ / "linked" / "metrics.jsonl").string() +
                                       ": Too many levels of symbolic links");
  EXPECT_EQ(slurp(root_ / "victim"), "precious");
}

TEST_F(TrainingTest, DivergedTrainingStopsWithAnErrorBeforeTheUpdate) {
  TrainConfig c = tiny_config();
  c.lr = 1e30;
  c.clip = 0;
  c.warmup = 0;
  try {
    train(c, root_);
    ADD_FAILURE() << "a run at lr 1e30 finished";
  } catch (const std::runtime_error& e) {
    const std::string message = e.what();
    EXPECT_TRUE(message.starts_with("[train] training diverged at step ")) << message;
    EXPECT_TRUE(message.ends_with("): lower lr, raise warmup or set clip")) << message;
    EXPECT_NE(message.find(" (loss "), std::string::npos) << message;
  }
}

TEST_F(TrainingTest, AnUnreadableModelArchiveIsNamed) {
  TrainConfig c = tiny_config();
  c.steps = 4;
  train(c, root_);
  const fs::path step = root_ / "checkpoints" / "step-00000004";
  std::map<std::string, std::string> files;
  for (const char* name : {"optimizer.pt", "rng.pt", "state.json"}) files[name] = slurp(step / name);
  files["model.pt"] = "not a zip archive";  // listed with its own checksum: only libtorch can tell
  write_checkpoint(root_ / "checkpoints", 4, files);
  try {
    evaluate(root_, {8}, 1);
    ADD_FAILURE() << "a garbage model.pt was loaded";
  } catch (const std::runtime_error& e) {
    const std::string message = e.what();
    const std::string head = "[checkpoint] " + (step / "model.pt").string() + " cannot be loaded: ";
    EXPECT_TRUE(message.starts_with(head)) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

// A context extension applied at evaluation: the scaling reaches the rotary
// module (the loss changes where it should and nowhere else), with HF's
// defaults for the factor and the original length.
TEST_F(TrainingTest, EvaluatesARopeRunWithAContextExtension) {
  TrainConfig c = tiny_config();
  c.encoding = "rope";
  c.dropout = 0;
  c.steps = 4;
  train(c, root_);
  const EvalReport plain = evaluate(root_, {8, 32}, 2);
  EXPECT_FALSE(plain.rope_scaling.has_value());
  // Dynamic NTK leaves lengths up to the trained one untouched, exactly, and changes longer ones.
  const EvalReport dynamic = evaluate(root_, {8, 32}, 2, {}, RopeExtension{"dynamic", std::nullopt});
  ASSERT_TRUE(dynamic.rope_scaling.has_value());
  EXPECT_EQ(dynamic.rope_scaling->type, kernels::RopeType::kDynamic);
  EXPECT_EQ(*dynamic.rope_scaling->factor, 4.0);  // 32 / 8
  EXPECT_EQ(*dynamic.rope_scaling->original_max_position_embeddings, 8);
  EXPECT_EQ(dynamic.lengths[0].loss, plain.lengths[0].loss);
  EXPECT_NE(dynamic.lengths[1].loss, plain.lengths[1].loss);
  // Linear interpolation by 1 is the plain model; by 4 it changes every length.
  EXPECT_EQ(evaluate(root_, {8}, 2, {}, RopeExtension{"linear", 1.0}).lengths[0].loss, plain.lengths[0].loss);
  const EvalReport linear = evaluate(root_, {8}, 2, {}, RopeExtension{"linear", std::nullopt});
  EXPECT_EQ(*linear.rope_scaling->factor, 1.0);  // the longest length is the trained one: factor at least 1
  EXPECT_EQ(linear.lengths[0].loss, plain.lengths[0].loss);
  EXPECT_NE(evaluate(root_, {8}, 2, {}, RopeExtension{"linear", 4.0}).lengths[0].loss, plain.lengths[0].loss);
  const kernels::RopeScaling yarn = rope_extension_scaling({"yarn", std::nullopt}, 128, 2048);
  EXPECT_EQ(*yarn.factor, 16.0);
  EXPECT_EQ(*yarn.original_max_position_embeddings, 128);
  expect_error([&] { evaluate(root_, {8}, 1, {}, RopeExtension{"longrope", 2.0}); },
               "[eval] rope extension must be linear, ntk, dynamic or yarn, got 'longrope'");
  expect_error([&] { evaluate(root_, {8}, 1, {}, RopeExtension{"linear", 0.0}); },
               "[eval] factor must be finite and > 0, got 0");
}

TEST_F(TrainingTest, ARopeExtensionNeedsARopeRun) {
  TrainConfig c = tiny_config();
  c.steps = 4;
  train(c, root_);
  expect_error([&] { evaluate(root_, {8}, 1, {}, RopeExtension{"ntk", 2.0}); },
               "[eval] rope_scaling needs a run whose encoding has 'rope', got 'learned+shaw'");
}

TEST_F(TrainingTest, EvaluatesOtherLengthsAndNamesTheLearnedTableLimit) {
  TrainConfig c = tiny_config();
  c.steps = 4;
  train(c, root_);
  const EvalReport r = evaluate(root_, {8, 6, 12, 3}, 2);
  EXPECT_EQ(r.step, 4);
  EXPECT_EQ(r.checkpoint, root_ / "checkpoints" / "step-00000004");
  ASSERT_EQ(r.lengths.size(), 4u);
  EXPECT_EQ(r.lengths[0].error, "");
  EXPECT_EQ(r.lengths[0].count, 2 * 4 * 6);  // scored target positions 3..8 of each row
  EXPECT_EQ(r.lengths[1].error, "");
  EXPECT_EQ(r.lengths[1].count, 2 * 4 * 4);
  EXPECT_EQ(r.lengths[2].error, "[learned] position 8 is outside the table of 8 rows (valid 0..7)");
  EXPECT_EQ(r.lengths[3].error, "[task] seq_len must be >= 4 for 'lookback', got 3");
  // A checkpoint directory itself, and the default lengths (seq_len x 1, 2, 4).
  const EvalReport direct = evaluate(root_ / "checkpoints" / "step-00000004", {}, 1);
  ASSERT_EQ(direct.lengths.size(), 3u);
  EXPECT_EQ(direct.lengths[0].seq_len, 8);
  EXPECT_EQ(direct.lengths[2].seq_len, 32);
  EXPECT_NEAR(direct.lengths[0].loss, evaluate(root_, {8}, 1).lengths[0].loss, 0.0);  // same batches, same model
  expect_error<std::runtime_error>([&] { evaluate(root_ / "checkpoints", {}, 1); },
                                   "[checkpoint] " + (root_ / "checkpoints").string() +
                                       " is not a posenc run (no config.json)");
  fs::remove_all(root_ / "checkpoints");
  expect_error<std::runtime_error>([&] { evaluate(root_, {}, 1); },
                                   "[checkpoint] " + root_.string() + " has no checkpoint (no checkpoints/step-*)");
}

TEST_F(TrainingTest, BadConfigurationsAreRefusedBeforeTouchingTheDirectory) {
  TrainConfig c = tiny_config();
  c.steps = 0;
  expect_error([&] { train(c, root_); }, "[train] steps must be >= 1, got 0");
  c = tiny_config();
  c.max_positions = 4;
  expect_error([&] { train(c, root_); }, "[train] max_positions must be >= seq_len (8), got 4");
  c = tiny_config();
  c.seq_len = 3;
  expect_error([&] { train(c, root_); }, "[train] seq_len must be >= 4 for task 'lookback', got 3");
  c = tiny_config();
  c.task = "sort";
  expect_error([&] { train(c, root_); }, "[task] unknown task 'sort'; known: order, span, lookback, copy, text, mlm, text-classify, text-span");
  c = tiny_config();
  c.attention = "flash";
  expect_error([&] { train(c, root_); }, "[train] attention must be 'fused' or 'composed', got 'flash'");
  auto registry_error = [&](const TrainConfig& bad) {
    try {
      train(bad, root_);
    } catch (const c10::ValueError& e) {
      return std::string(e.what_without_backtrace());
    }
    return std::string("no error");
  };
  c = tiny_config();
  c.dim = 10;
  c.heads = 4;
  EXPECT_EQ(registry_error(c), "[encoding] dim must be divisible by num_heads, got dim 10 and num_heads 4");
  c.encoding = "rope";
  c.dim = 10;
  c.heads = 2;
  EXPECT_EQ(registry_error(c), "[encoding] rope needs an even head_dim, got 5");
  EXPECT_FALSE(fs::exists(root_));
}

}  // namespace
}  // namespace posenc::nn::test
