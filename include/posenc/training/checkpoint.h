// Checkpoint directories, written so that a crash at any instant leaves
// either the previous checkpoints intact or a new one that is detected as
// incomplete, never a silently wrong one.
//
//   ROOT/step-00000100/<file>...   each file written through io::write_file_atomically
//                                  (unguessable temporary name, O_EXCL | O_NOFOLLOW,
//                                  fsync, rename, fsync of the directory)
//   ROOT/step-00000100/MANIFEST    written LAST the same way: JSON
//     {"format": "posenc-checkpoint", "version": 1, "step": 100,
//      "files": {"model.pt": {"size": 1234, "fnv1a64": "0123456789abcdef"}, ...}}
// A checkpoint is valid only if its MANIFEST parses and every listed file has
// the recorded size and FNV-1a 64-bit checksum. The files themselves are
// opaque bytes here; the trainer decides what they hold.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace posenc::nn {

inline constexpr std::string_view kCheckpointFormat = "posenc-checkpoint";
inline constexpr int64_t kCheckpointVersion = 1;

// FNV-1a, 64 bits (offset basis 0xcbf29ce484222325, prime 0x100000001b3).
uint64_t fnv1a64(std::string_view bytes) noexcept;

// "step-00000100"
std::string checkpoint_name(int64_t step);

// Writes `bytes` to `path` atomically (io::write_file_atomically). Throws
// std::runtime_error "[checkpoint] PATH: cannot create a file in 'DIR': <errno text>" and the like.
void write_file_atomic(const std::filesystem::path& path, std::string_view bytes);

// Reads a whole regular file (never blocks on a FIFO). Throws std::runtime_error
// "[checkpoint] PATH: cannot open: <errno text>" or "[checkpoint] PATH: not a regular file".
std::string read_file(const std::filesystem::path& path);

// Writes ROOT/step-<8 digits>/ (replacing any directory of that name) with
// `files` (name -> bytes; plain names, not "MANIFEST") and then the MANIFEST.
// Returns the checkpoint directory.
std::filesystem::path write_checkpoint(const std::filesystem::path& root, int64_t step,
                                       const std::map<std::string, std::string>& files);

// The step-* directories under root (complete or not), oldest first.
struct CheckpointEntry {
  int64_t step = 0;
  std::filesystem::path dir;
};
std::vector<CheckpointEntry> list_checkpoints(const std::filesystem::path& root);

// Deletes the directories of steps > newest_step (left by an earlier, longer
// timeline) and all but the `keep` newest of the rest.
void prune_checkpoints(const std::filesystem::path& root, int64_t newest_step, int64_t keep);

// A verified checkpoint: every file's bytes, as listed in the MANIFEST.
struct Checkpoint {
  std::filesystem::path dir;
  int64_t step = 0;
  std::map<std::string, std::string> files;
  // The named file; throws "[checkpoint] DIR has no file 'x'".
  const std::string& file(const std::string& name) const;
};

// Why dir is not a valid checkpoint, in a few words ("no MANIFEST",
// "model.pt: checksum mismatch", "model.pt: truncated to 10 of 1234 bytes"),
// or nullopt with `out` filled when it is valid.
std::optional<std::string> verify_checkpoint(const std::filesystem::path& dir, Checkpoint* out);

// Loads and verifies one checkpoint directory. Throws std::runtime_error
// "[checkpoint] DIR is not a posenc checkpoint (no MANIFEST)" or
// "[checkpoint] DIR is corrupted (model.pt: checksum mismatch)".
Checkpoint load_checkpoint(const std::filesystem::path& dir);

// The newest valid checkpoint under root, or nullopt when root holds none at
// all. Each newer invalid one adds a warning (using_verb: "resuming from", "evaluating")
// "checkpoint step-00000200 is corrupted (model.pt: checksum mismatch); resuming from step-00000100"
// ("is incomplete (no MANIFEST)" when its MANIFEST was never written).
// Throws "[checkpoint] no valid checkpoint in ROOT: step-00000100 is corrupted (...)" when all are invalid.
struct LatestCheckpoint {
  Checkpoint checkpoint;
  std::vector<std::string> warnings;
};
std::optional<LatestCheckpoint> find_latest_checkpoint(const std::filesystem::path& root,
                                                      std::string_view using_verb = "resuming from");

// The same search without the throw: `latest` is the newest valid checkpoint
// (nullopt when none is valid), `skipped` says why each newer one was passed
// over, newest first ("step-00000100 is incomplete (no MANIFEST)").
struct CheckpointScan {
  std::optional<LatestCheckpoint> latest;
  std::vector<std::string> skipped;
  std::string skipped_list() const;  // "step-00000200 is corrupted (...), step-00000100 is incomplete (...)"
};
CheckpointScan scan_checkpoints(const std::filesystem::path& root, std::string_view using_verb = "resuming from");

}  // namespace posenc::nn
