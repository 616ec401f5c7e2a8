// The format of `posenc corpus --out`'s DIR/tasks/NAME/task.json, shared by the
// writer (apps/posenc_text) and the readers (training, the experiment suites).
// 2: definition entries delimited (headword [sep] definition [eos]); format 1
// had none, and its rows are refused rather than read as if current.
#pragma once

namespace posenc::text {

inline constexpr const char* kTaskFormat = "posenc-task-2";

}  // namespace posenc::text
