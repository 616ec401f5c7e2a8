#include "early_stopping.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "posenc/error.h"
#include "posenc/io/atomic_file.h"
#include "posenc/training/checkpoint.h"
#include "posenc/training/throughput_record.h"

namespace posenc::experiments {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
constexpr const char* kOp = "experiment";

struct Evaluation {
  int64_t step = 0;
  double score = 0;
};

std::vector<Evaluation> read_record(const fs::path& path, int64_t eval_every) {
  std::vector<Evaluation> out;
  std::error_code ec;
  if (!fs::exists(path, ec)) return out;
  std::istringstream lines(io::read_regular_file(kOp, path.string()));
  std::string line;
  while (std::getline(lines, line)) {
    Evaluation e;
    try {
      const json j = json::parse(line);
      e.step = j.at("step").get<int64_t>();
      e.score = j.at("score").get<double>();
    } catch (const json::exception&) {
      fail_runtime(kOp, path.string(), ": line ", out.size() + 1, " is not {\"step\", \"score\"}");
    }
    const int64_t expected = static_cast<int64_t>(out.size() + 1) * eval_every;
    if (e.step != expected) {
      fail_runtime(kOp, path.string(), ": line ", out.size() + 1, " is for step ", e.step, ", expected ", expected,
                   " (evaluations every ", eval_every, " steps): written by another plan; use another --out");
    }
    out.push_back(e);
  }
  return out;
}

std::string record_text(const std::vector<Evaluation>& record) {
  std::string text;
  for (const Evaluation& e : record) {
    char score[40];
    std::snprintf(score, sizeof score, "%.17g", e.score);
    text += "{\"step\": " + std::to_string(e.step) + ", \"score\": " + score + "}\n";
  }
  return text;
}

// The first best evaluation's index; -1 for an empty record.
int64_t best_index(const std::vector<Evaluation>& record) {
  int64_t best = -1;
  for (size_t i = 0; i < record.size(); ++i) {
    if (best < 0 || record[i].score > record[static_cast<size_t>(best)].score) best = static_cast<int64_t>(i);
  }
  return best;
}

// Only the best checkpoint (reported, fine-tuned from) and the two newest (a resume takes the newest, or the one
// before when the newest was cut off with its evaluation) are needed: the trainer alone would keep patience + 2.
void keep_best_and_newest(const fs::path& root, int64_t best_step, int64_t newest_step, int64_t eval_every) {
  std::error_code ec;
  for (const nn::CheckpointEntry& e : nn::list_checkpoints(root)) {
    if (e.step != best_step && e.step <= newest_step - 2 * eval_every) fs::remove_all(e.dir, ec);
  }
}

}  // namespace

fs::path checkpoint_dir(const fs::path& dir, int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%08lld", static_cast<long long>(step));
  return dir / "checkpoints" / name;
}

StageTraining train_with_early_stopping(nn::TrainConfig config, const fs::path& dir, const EarlyStopping& stopping,
                                        const std::function<double(const fs::path&)>& validate,
                                        const nn::TrainCallbacks& callbacks) {
  require(stopping.eval_every >= 1, kOp, "eval_every must be >= 1, got ", stopping.eval_every);
  require(stopping.patience >= 1, kOp, "patience must be >= 1, got ", stopping.patience);
  require(config.steps % stopping.eval_every == 0, kOp, "steps (", config.steps, ") must be a multiple of eval_every (",
          stopping.eval_every, ")");
  config.checkpoint_every = stopping.eval_every;
  // The best is at most `patience` evaluations behind the newest checkpoint.
  config.keep_checkpoints = stopping.patience + 2;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail_runtime(kOp, dir.string(), ": cannot create the directory: ", ec.message());
  const fs::path record_path = dir / "validation.jsonl";
  std::vector<Evaluation> record = read_record(record_path, stopping.eval_every);
  StageTraining out;
  while (true) {
    const int64_t best = best_index(record);
    const int64_t done = record.empty() ? 0 : record.back().step;
    const int64_t since_best = best < 0 ? 0 : static_cast<int64_t>(record.size()) - 1 - best;
    if (since_best >= stopping.patience || done >= config.steps) {
      out.best_step = record[static_cast<size_t>(best)].step;
      out.best_score = record[static_cast<size_t>(best)].score;
      out.last_step = done;
      const nn::RecordedTraining timing = nn::recorded_training(dir, done, config.batch * config.seq_len);
      out.seconds = timing.seconds;
      out.tokens = timing.steps * config.batch * config.seq_len;
      return out;
    }
    const int64_t next = done + stopping.eval_every;
    // Resume only what an earlier call started (a fresh directory would warn that it has no checkpoint).
    const bool started = fs::exists(dir / "metrics.jsonl", ec) || fs::exists(dir / "checkpoints", ec);
    nn::train(config, dir, {.resume = started, .stop_after = next}, callbacks);
    const double score = validate(checkpoint_dir(dir, next));
    record.push_back({next, score});
    io::write_file_atomically(kOp, record_path.string(), record_text(record));
    keep_best_and_newest(dir / "checkpoints", record[static_cast<size_t>(best_index(record))].step, next,
                         stopping.eval_every);
  }
}

}  // namespace posenc::experiments
