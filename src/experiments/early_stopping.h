// Training with early stopping on top of posenc train's resumable runs: train
// to the next evaluation step (TrainRun::stop_after), score that checkpoint
// on validation, record it in DIR/validation.jsonl (rewritten atomically), and
// stop after `patience` evaluations without a better score. Every piece is a
// function of the run, so an interrupted stage continues where it stopped and
// ends where an uninterrupted one would.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>

#include "posenc/experiments/properties.h"

namespace posenc::experiments {

struct StageTraining {
  int64_t best_step = 0;
  double best_score = 0;  // higher is better
  int64_t last_step = 0;
  double seconds = 0;     // training steps 1..last_step, in every process (throughput_record.h)
  int64_t tokens = 0;     // of those steps
};

// config: resolved or not; its checkpoint_every and keep_checkpoints are set here
// (every evaluation step is a checkpoint; the best and the two newest are kept).
// validate(checkpoint_dir) -> score, higher better.
StageTraining train_with_early_stopping(nn::TrainConfig config, const std::filesystem::path& dir,
                                        const EarlyStopping& stopping,
                                        const std::function<double(const std::filesystem::path&)>& validate,
                                        const nn::TrainCallbacks& callbacks);

// The checkpoint directory of `step` in run `dir`.
std::filesystem::path checkpoint_dir(const std::filesystem::path& dir, int64_t step);

}  // namespace posenc::experiments
