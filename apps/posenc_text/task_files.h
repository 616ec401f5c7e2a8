// The fine-tuning tasks (posenc/text/task_datasets.h) as files, under
// DIR/tasks/NAME/ of `posenc corpus --out DIR`:
//   {train,validation,test}.tokens.npy  int32 [N, seq_len], rows padded with 0 (kPadId)
//   {train,validation,test}.labels.npy  int32 [N] (class index) or [N, 2] (span: start, end, inclusive)
//   task.json                           written last: a directory with it is complete
#pragma once

#include <filesystem>

#include "posenc/text/task_datasets.h"

namespace posenc::cli {

// Removes an old task.json first, so that a run stopped half-way never leaves
// a complete-looking directory of mixed files.
void write_task_files(const std::filesystem::path& dir, const text::TaskDataset& task);

}  // namespace posenc::cli
