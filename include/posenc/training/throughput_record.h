// A run's training time from its DIR/throughput.jsonl (trainer.h), across every
// process that trained it: a resumed run's file holds the windows of each, cut
// back to the checkpoint it resumed from, so summing them counts no step twice.
#pragma once

#include <cstdint>
#include <filesystem>

namespace posenc::nn {

struct RecordedTraining {
  int64_t steps = 0;   // the last step the windows summed reach
  double seconds = 0;  // their wall time: each window's tokens / tokens_per_s
};

// The windows of the file that end at or before up_to_step, read until the
// first line that is not a window (as a resume cuts the file). Throws naming
// the file when it cannot be read.
RecordedTraining recorded_training(const std::filesystem::path& run_dir, int64_t up_to_step, int64_t tokens_per_step);

}  // namespace posenc::nn
