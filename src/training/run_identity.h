// Private to posenc::training: what identifies a run's trajectory, shared by
// config.json's checks (train_config.cpp) and the checkpoints (trainer.cpp).
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "posenc/training/trainer.h"

namespace posenc::nn::detail {

// The fields that fix a run's trajectory, in the order a mismatch is reported.
// steps and threads are left out: changing them on resume is allowed (warned).
nlohmann::ordered_json trajectory_fields(const TrainConfig& c);

// Throws "[checkpoint] DIR was written for KEY X, this run uses Y" when `saved` (a checkpoint's
// state.json) is another run's; adds a warning per changed steps / threads when warnings is given.
void check_same_run(const nlohmann::json& saved, const TrainConfig& config, const std::filesystem::path& dir,
                    std::vector<std::string>* warnings);

}  // namespace posenc::nn::detail
