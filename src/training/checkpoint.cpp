#include "posenc/training/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <system_error>

#include "posenc/error.h"
#include "posenc/io/atomic_file.h"

namespace posenc::nn {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kOp = "checkpoint";
constexpr const char* kManifest = "MANIFEST";

[[noreturn]] void fail_io(const char* what, const fs::path& path) {
  fail_runtime(kOp, "cannot ", what, " ", path.string(), ": ", std::strerror(errno));
}

// Closes the descriptor on every path out.
class Descriptor {
 public:
  explicit Descriptor(int fd) noexcept : fd_(fd) {}
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  ~Descriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const noexcept { return fd_; }

 private:
  int fd_;
};

// A rename or a new entry is durable only once its directory is fsync'd.
void sync_directory(const fs::path& dir) {
  Descriptor fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) fail_io("open directory", dir);
  if (::fsync(fd.get()) != 0) fail_io("fsync directory", dir);
}

std::string hex64(uint64_t v) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(v));
  return text;
}

// "step-00000100" -> 100; -1 for any other name.
int64_t parse_step_name(const std::string& name) {
  if (name.size() != 13 || name.compare(0, 5, "step-") != 0) return -1;
  int64_t step = 0;
  for (size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    step = step * 10 + (name[i] - '0');
  }
  return step;
}

void check_file_name(const std::string& name) {
  require(!name.empty() && name != kManifest && name.find('/') == std::string::npos && name != "." &&
              name != ".." && !name.ends_with(".tmp"),
          kOp, "file name must be a plain name other than MANIFEST and not ending in .tmp, got '", name, "'");
}

}  // namespace

uint64_t fnv1a64(std::string_view bytes) noexcept {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const char c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string checkpoint_name(int64_t step) {
  require(step >= 0 && step <= 99999999, kOp, "step must be in 0..99999999, got ", step);
  char text[16];
  std::snprintf(text, sizeof text, "step-%08lld", static_cast<long long>(step));
  return text;
}

void write_file_atomic(const fs::path& path, std::string_view bytes) {
  io::write_file_atomically(kOp, path.string(), bytes);
}

std::string read_file(const fs::path& path) { return io::read_regular_file(kOp, path.string()); }

fs::path write_checkpoint(const fs::path& root, int64_t step, const std::map<std::string, std::string>& files) {
  const std::string name = checkpoint_name(step);
  for (const auto& [file, bytes] : files) check_file_name(file);
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) fail_runtime(kOp, "cannot create ", root.string(), ": ", ec.message());
  const fs::path dir = root / name;
  // A directory of this name is stale (an earlier timeline or a half-written
  // one): drop it whole, so no old MANIFEST can vouch for new files.
  fs::remove_all(dir, ec);
  if (ec) fail_runtime(kOp, "cannot remove ", dir.string(), ": ", ec.message());
  fs::create_directory(dir, ec);
  if (ec) fail_runtime(kOp, "cannot create ", dir.string(), ": ", ec.message());
  sync_directory(root);

  json manifest = {{"format", kCheckpointFormat}, {"version", kCheckpointVersion}, {"step", step}};
  json listed = json::object();
  for (const auto& [file, bytes] : files) {
    write_file_atomic(dir / file, bytes);
    listed[file] = {{"size", bytes.size()}, {"fnv1a64", hex64(fnv1a64(bytes))}};
  }
  manifest["files"] = std::move(listed);
  write_file_atomic(dir / kManifest, manifest.dump(2) + "\n");
  return dir;
}

std::vector<CheckpointEntry> list_checkpoints(const fs::path& root) {
  std::vector<CheckpointEntry> out;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return out;
  for (const fs::directory_entry& e : fs::directory_iterator(root, ec)) {
    const int64_t step = parse_step_name(e.path().filename().string());
    if (step >= 0 && e.is_directory(ec)) out.push_back({step, e.path()});
  }
  std::sort(out.begin(), out.end(), [](const CheckpointEntry& a, const CheckpointEntry& b) { return a.step < b.step; });
  return out;
}

void prune_checkpoints(const fs::path& root, int64_t newest_step, int64_t keep) {
  require(keep >= 1, kOp, "keep must be >= 1, got ", keep);
  std::vector<CheckpointEntry> entries = list_checkpoints(root);
  std::vector<CheckpointEntry> kept;
  std::error_code ec;
  for (const CheckpointEntry& e : entries) {
    if (e.step > newest_step) {
      fs::remove_all(e.dir, ec);
    } else {
      kept.push_back(e);
    }
  }
  for (size_t i = 0; i + static_cast<size_t>(keep) < kept.size(); ++i) fs::remove_all(kept[i].dir, ec);
  sync_directory(root);
}

const std::string& Checkpoint::file(const std::string& name) const {
  const auto it = files.find(name);
  if (it == files.end()) fail_runtime(kOp, dir.string(), " has no file '", name, "'");
  return it->second;
}

std::optional<std::string> verify_checkpoint(const fs::path& dir, Checkpoint* out) {
  std::error_code ec;
  if (!fs::is_regular_file(dir / kManifest, ec)) return std::string("no MANIFEST");
  json manifest;
  try {
    manifest = json::parse(read_file(dir / kManifest));
  } catch (const json::exception&) {
    return std::string("MANIFEST is not valid JSON");
  } catch (const std::runtime_error&) {
    return std::string("MANIFEST unreadable");
  }
  Checkpoint result;
  result.dir = dir;
  try {
    if (manifest.at("format").get<std::string>() != kCheckpointFormat) {
      return "MANIFEST format is '" + manifest.at("format").get<std::string>() + "', not 'posenc-checkpoint'";
    }
    const int64_t version = manifest.at("version").get<int64_t>();
    if (version != kCheckpointVersion) {
      return "MANIFEST version " + std::to_string(version) + " is not supported (this build reads " +
             std::to_string(kCheckpointVersion) + ")";
    }
    result.step = manifest.at("step").get<int64_t>();
    const int64_t named = parse_step_name(dir.filename().string());
    if (named >= 0 && named != result.step) {
      return "MANIFEST step " + std::to_string(result.step) + " does not match the directory name";
    }
    for (const auto& [name, entry] : manifest.at("files").items()) {
      const uint64_t size = entry.at("size").get<uint64_t>();
      const std::string sum = entry.at("fnv1a64").get<std::string>();
      if (!fs::is_regular_file(dir / name, ec)) return name + ": missing";
      std::string bytes = read_file(dir / name);
      if (bytes.size() < size) {
        return name + ": truncated to " + std::to_string(bytes.size()) + " of " + std::to_string(size) + " bytes";
      }
      if (bytes.size() > size) {
        return name + ": " + std::to_string(bytes.size()) + " bytes, the MANIFEST says " + std::to_string(size);
      }
      if (hex64(fnv1a64(bytes)) != sum) return name + ": checksum mismatch";
      result.files.emplace(name, std::move(bytes));
    }
  } catch (const json::exception&) {
    return std::string("MANIFEST is missing a field or has a wrong type");
  } catch (const std::runtime_error& e) {
    return std::string(e.what());
  }
  if (out != nullptr) *out = std::move(result);
  return std::nullopt;
}

Checkpoint load_checkpoint(const fs::path& dir) {
  Checkpoint c;
  const std::optional<std::string> problem = verify_checkpoint(dir, &c);
  if (problem == "no MANIFEST") fail_runtime(kOp, dir.string(), " is not a posenc checkpoint (no MANIFEST)");
  if (problem) fail_runtime(kOp, dir.string(), " is corrupted (", *problem, ")");
  return c;
}

std::string CheckpointScan::skipped_list() const {
  std::string all;
  for (const std::string& s : skipped) all += (all.empty() ? "" : ", ") + s;
  return all;
}

CheckpointScan scan_checkpoints(const fs::path& root, std::string_view using_verb) {
  CheckpointScan scan;
  const std::vector<CheckpointEntry> entries = list_checkpoints(root);
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
    LatestCheckpoint latest;
    const std::optional<std::string> problem = verify_checkpoint(it->dir, &latest.checkpoint);
    const std::string name = it->dir.filename().string();
    if (problem) {
      scan.skipped.push_back(name + (*problem == "no MANIFEST" ? " is incomplete (" : " is corrupted (") + *problem +
                             ")");
      continue;
    }
    for (const std::string& s : scan.skipped) {
      latest.warnings.push_back("checkpoint " + s + "; " + std::string(using_verb) + " " + name);
    }
    scan.latest = std::move(latest);
    break;
  }
  return scan;
}

std::optional<LatestCheckpoint> find_latest_checkpoint(const fs::path& root, std::string_view using_verb) {
  CheckpointScan scan = scan_checkpoints(root, using_verb);
  if (scan.latest || scan.skipped.empty()) return std::move(scan.latest);
  fail_runtime(kOp, "no valid checkpoint in ", root.string(), ": ", scan.skipped_list());
}

}  // namespace posenc::nn
