#include "file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>
#include <sstream>

#include "posenc/error.h"
#include "posenc/io/atomic_file.h"

namespace posenc::io::detail {
namespace {

std::string error_text(int error) { return std::strerror(error); }

// ".<file>.tmp-<pid>-<n>-<random>" next to the target. The random part makes
// the name unguessable, so nobody can plant a link there in advance; O_EXCL |
// O_NOFOLLOW and a retry still refuse anything that exists under it.
std::string temporary_name(const std::string& path) {
  static std::atomic<unsigned> counter{0};
  thread_local std::mt19937_64 random{std::random_device{}()};
  const std::filesystem::path target(path);
  std::ostringstream name;
  name << '.' << target.filename().string() << ".tmp-" << ::getpid() << '-' << counter.fetch_add(1) << '-'
       << std::hex << random();
  return (target.parent_path() / name.str()).string();
}

// The temporary files being written, for remove_temporary_files() in a signal
// handler: fixed slots (no allocation), each published by a release store of
// `used` after its path is in place. A write beyond the slots still works; only
// its cleanup on a signal is lost.
struct TemporarySlot {
  std::atomic<bool> used{false};
  char path[4096];
};
constexpr int kTemporarySlots = 64;
TemporarySlot temporary_slots[kTemporarySlots];
std::atomic_flag slot_lock = ATOMIC_FLAG_INIT;

int register_temporary(const std::string& path) noexcept {
  if (path.size() >= sizeof(TemporarySlot::path)) return -1;
  while (slot_lock.test_and_set(std::memory_order_acquire)) {
  }
  int found = -1;
  for (int i = 0; i < kTemporarySlots && found < 0; ++i) {
    if (!temporary_slots[i].used.load(std::memory_order_relaxed)) found = i;
  }
  if (found >= 0) {
    std::memcpy(temporary_slots[found].path, path.c_str(), path.size() + 1);
    temporary_slots[found].used.store(true, std::memory_order_release);
  }
  slot_lock.clear(std::memory_order_release);
  return found;
}

void release_temporary(int slot) noexcept {
  if (slot >= 0) temporary_slots[slot].used.store(false, std::memory_order_release);
}

// A rename is durable only once its directory is synced.
void sync_directory_of(const std::string& path) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // the file is in place; only its durability across a power cut is unknown
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

InputFile::InputFile(std::string_view op, const std::string& path) : op_(op), path_(path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd_ < 0) fail_runtime(op_, path_, ": cannot open: ", error_text(errno));
  struct stat info {};
  if (::fstat(fd_, &info) != 0) {
    const int error = errno;
    ::close(fd_);
    fail_runtime(op_, path_, ": cannot stat: ", error_text(error));
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd_);
    fail_runtime(op_, path_, ": not a regular file");
  }
  ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_NONBLOCK);
  size_ = static_cast<int64_t>(info.st_size);
}

InputFile::~InputFile() { ::close(fd_); }

void InputFile::read_at(int64_t offset, std::span<std::byte> out) const {
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::pread(fd_, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail_runtime(op_, path_, ": read failed: ", error_text(errno));
    if (n == 0) fail_runtime(op_, path_, ": file ended early (it changed while being read)");
    done += static_cast<size_t>(n);
  }
}

AtomicOutputFile::AtomicOutputFile(std::string_view op, const std::string& path) : op_(op), path_(path) {
  for (int attempt = 0; fd_ < 0; ++attempt) {
    temp_path_ = temporary_name(path);
    // Registered before it exists, so that no signal finds it on disk unregistered.
    slot_ = register_temporary(temp_path_);
    // 0666 before the umask, as for any newly created file.
    fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd_ < 0) {
      release_temporary(slot_);
      slot_ = -1;
    }
    if (fd_ < 0 && (errno != EEXIST || attempt >= 100)) {
      const int error = errno;
      const std::string dir = std::filesystem::path(path).parent_path().string();
      fail_runtime(op_, path_, ": cannot create a file in '", dir.empty() ? "." : dir, "': ", error_text(error));
    }
  }
}

AtomicOutputFile::~AtomicOutputFile() {
  if (committed_) return;
  if (fd_ >= 0) ::close(fd_);
  ::unlink(temp_path_.c_str());
  release_temporary(slot_);
}

void AtomicOutputFile::fail(std::string_view what, int error) const {
  fail_runtime(op_, path_, ": ", what, ": ", error_text(error));
}

void AtomicOutputFile::write(std::span<const std::byte> bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("write failed", errno);
    done += static_cast<size_t>(n);
  }
}

void AtomicOutputFile::commit() {
  if (::fsync(fd_) != 0) fail("sync failed", errno);
  const int closed = ::close(fd_);
  fd_ = -1;
  if (closed != 0) fail("close failed", errno);
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) fail("cannot replace the file", errno);
  committed_ = true;
  release_temporary(slot_);
  sync_directory_of(path_);
}

}  // namespace posenc::io::detail

namespace posenc::io {

void write_file_atomically(std::string_view op, const std::string& path, std::span<const std::byte> bytes) {
  detail::AtomicOutputFile file(op, path);
  file.write(bytes);
  file.commit();
}

void write_file_atomically(std::string_view op, const std::string& path, std::string_view text) {
  write_file_atomically(op, path, std::as_bytes(std::span<const char>(text.data(), text.size())));
}

void remove_temporary_files() noexcept {
  for (detail::TemporarySlot& slot : detail::temporary_slots) {
    if (slot.used.load(std::memory_order_acquire)) ::unlink(slot.path);
  }
}

std::string read_regular_file(std::string_view op, const std::string& path) {
  const detail::InputFile in(op, path);
  std::string bytes(static_cast<size_t>(in.size()), '\0');
  in.read_at(0, std::as_writable_bytes(std::span<char>(bytes.data(), bytes.size())));
  return bytes;
}

}  // namespace posenc::io
