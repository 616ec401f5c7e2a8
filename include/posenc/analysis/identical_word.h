// Identical-word probing (Wang et al., ICLR 2021): feed a trained model a
// sequence in which every token is the same word w, so that only positions
// tell tokens apart, and read its first layer's attention. Averaged over the
// heads and over `words` different words, the T x T map shows what the model
// learned to do with positions (a band along the diagonal: attends locally).
//
// Needs the torch layer (posenc::nn): part of libposenc_analysis_torch.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "posenc/analysis/matrix.h"

namespace posenc::analysis {

struct IdenticalWordOptions {
  int64_t length = 0;  // sequence length T; 0: the run's seq_len
  int64_t words = 64;  // distinct word ids, spread evenly over the task's ordinary tokens (all of them when fewer)
};

struct TrainedModel {
  std::string encoding;  // registry name, e.g. "rope"
  std::string task;      // "order", ...
  int64_t step = 0;      // of the checkpoint used
  int64_t seq_len = 0;   // trained length
  std::filesystem::path checkpoint;
};

struct IdenticalWordResult {
  TrainedModel model;
  Matrix attention;  // [T, T]: mean over words and heads of the first layer's weights; rows sum to 1
  int64_t words = 0; // word ids used: min(options.words, the task's ordinary tokens)
};

// Loads RUN_DIR's config.json and newest valid checkpoint (as `posenc eval`)
// and probes it. Throws the checkpoint errors of posenc::nn and
//   "[identical word] words must be >= 1, got 0"
//   "[identical word] length must be >= 1, got -1"
IdenticalWordResult identical_word_attention(const std::filesystem::path& run_dir,
                                             const IdenticalWordOptions& options = {});

}  // namespace posenc::analysis
