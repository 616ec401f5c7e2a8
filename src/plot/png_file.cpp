// write_png_file: a temporary file next to the target, fsync, rename, so a
// reader never sees half a PNG and a failure leaves the old file in place.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include "canvas.h"
#include "posenc/error.h"
#include "posenc/plot/figures.h"

namespace posenc::plot {
namespace {

constexpr unsigned char kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

// ".<file>.tmp-<pid>-<n>" next to the target; O_EXCL and a retry cover a
// leftover of an earlier process with the same pid.
std::string temporary_name(const std::string& path) {
  static std::atomic<unsigned> counter{0};
  const std::filesystem::path target(path);
  std::string name(".");  // appended piecewise: GCC 12 warns (-Wrestrict) on "." + string
  name += target.filename().string();
  name += ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1));
  return (target.parent_path() / name).string();
}

class TemporaryFile {
 public:
  explicit TemporaryFile(const std::string& path) : path_(path) {
    for (int attempt = 0; fd_ < 0; ++attempt) {
      temp_ = temporary_name(path);
      fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      if (fd_ < 0 && (errno != EEXIST || attempt >= 100)) {
        const int error = errno;
        const std::string dir = std::filesystem::path(path).parent_path().string();
        fail_runtime(detail::kOp, path_, ": cannot create a file in '", dir.empty() ? "." : dir,
                     "': ", std::strerror(error));
      }
    }
  }
  ~TemporaryFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!renamed_) ::unlink(temp_.c_str());
  }
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;

  void write(std::span<const unsigned char> bytes) {
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail("write failed");
      done += static_cast<size_t>(n);
    }
  }
  void commit() {
    if (::fsync(fd_) != 0) fail("sync failed");
    const int closed = ::close(fd_);
    fd_ = -1;
    if (closed != 0) fail("close failed");
    if (::rename(temp_.c_str(), path_.c_str()) != 0) fail("cannot replace the file");
    renamed_ = true;
  }

 private:
  [[noreturn]] void fail(std::string_view what) const {
    fail_runtime(detail::kOp, path_, ": ", what, ": ", std::strerror(errno));
  }

  std::string path_, temp_;
  int fd_ = -1;
  bool renamed_ = false;
};

}  // namespace

void write_png_file(const std::string& path, std::span<const unsigned char> png) {
  require(!path.empty(), detail::kOp, "path must not be empty, got an empty string");
  require(png.size() >= sizeof kSignature, detail::kOp, "png must start with the 8-byte PNG signature, got ",
          png.size(), " bytes");
  require(std::memcmp(png.data(), kSignature, sizeof kSignature) == 0, detail::kOp,
          "png must start with the 8-byte PNG signature, got other bytes");
  TemporaryFile file(path);
  file.write(png);
  file.commit();
}

}  // namespace posenc::plot
