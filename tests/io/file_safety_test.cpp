// The file guarantees every writer and reader relies on: atomic writes that
// never follow a planted link and leave no temporary file behind on failure,
// reads that refuse a FIFO at once instead of waiting for a writer, and the
// directory lock that keeps two processes out of one run directory.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "io_test_util.h"
#include "posenc/io/atomic_file.h"
#include "posenc/io/directory_lock.h"
#include "posenc/io/npy.h"

namespace posenc::io {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

template <class F>
std::string error_of(F&& f) {
  return testing::error_of<std::runtime_error>(std::forward<F>(f));
}

TEST(AtomicFile, ALinkPlantedAtATemporaryNameIsNeverFollowed) {
  const TempDir dir;
  testing::write_bytes(dir.file("victim"), "precious");
  // Every name an old writer could have used: "<file>.tmp" and ".<file>.tmp-<pid>-<n>" for small n.
  fs::create_symlink(dir.file("victim"), dir.file("report.html.tmp"));
  for (int n = 0; n < 64; ++n) {
    fs::create_symlink(dir.file("victim"),
                       dir.file(".report.html.tmp-" + std::to_string(::getpid()) + "-" + std::to_string(n)));
  }
  write_file_atomically("report", dir.file("report.html"), std::string_view("new"));
  EXPECT_EQ(testing::read_bytes(dir.file("victim")), "precious");
  EXPECT_EQ(testing::read_bytes(dir.file("report.html")), "new");
  EXPECT_EQ(dir.entries().size(), 1u + 1u + 1u + 64u);  // victim, report.html, the planted links
}

TEST(AtomicFile, ALinkAtTheTargetIsReplacedNotWrittenThrough) {
  const TempDir dir;
  testing::write_bytes(dir.file("victim"), "precious");
  fs::create_symlink(dir.file("victim"), dir.file("out.json"));
  write_file_atomically("report", dir.file("out.json"), std::string_view("{}"));
  EXPECT_EQ(testing::read_bytes(dir.file("victim")), "precious");
  EXPECT_FALSE(fs::is_symlink(dir.file("out.json")));
  EXPECT_EQ(testing::read_bytes(dir.file("out.json")), "{}");
}

// A write that fails half-way (here the file-size limit, as a full disk would)
// keeps the old file and leaves no temporary file behind.
TEST(AtomicFile, AFailedWriteLeavesTheOldFileAndNoTemporary) {
  const TempDir dir;
  testing::write_bytes(dir.file("report.html"), "old");
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    const std::string big(1 << 20, 'x');
    const std::string message = error_of([&] { write_file_atomically("report", dir.file("report.html"), big); });
    ::_exit(message == "[report] " + dir.file("report.html") + ": write failed: File too large" ? 0 : 1);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child did not see the expected message";
  EXPECT_EQ(testing::read_bytes(dir.file("report.html")), "old");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"report.html"});
}

TEST(RegularFile, AFifoIsRefusedWithoutWaitingForAWriter) {
  const TempDir dir;
  ASSERT_EQ(::mkfifo(dir.file("t.npy").c_str(), 0600), 0);
  EXPECT_EQ(error_of([&] { read_regular_file("checkpoint", dir.file("t.npy")); }),
            "[checkpoint] " + dir.file("t.npy") + ": not a regular file");
  EXPECT_EQ(error_of([&] { read_npy(dir.file("t.npy")); }), "[npy] " + dir.file("t.npy") + ": not a regular file");
  EXPECT_EQ(error_of([&] { read_regular_file("checkpoint", dir.file("missing")); }),
            "[checkpoint] " + dir.file("missing") + ": cannot open: No such file or directory");
  testing::write_bytes(dir.file("plain"), std::string("a\0b", 3));
  EXPECT_EQ(read_regular_file("checkpoint", dir.file("plain")), std::string("a\0b", 3));
}

TEST(DirectoryLock, ASecondHolderIsRefusedNamingTheFirst) {
  const TempDir dir;
  const std::string run = dir.file("run");
  {
    const DirectoryLock first("train", run);  // creates the directory
    EXPECT_EQ(testing::read_bytes(run + "/.lock"), std::to_string(::getpid()) + "\n");
    EXPECT_EQ(error_of([&] { DirectoryLock second("train", run); }),
              "[train] " + run + " is in use by process " + std::to_string(::getpid()) + " (lock file " + run +
                  "/.lock)");
  }
  const DirectoryLock again("train", run);  // released with the first
}

TEST(DirectoryLock, AFileWhereTheDirectoryShouldBeIsNamed) {
  const TempDir dir;
  testing::write_bytes(dir.file("file"), "");
  EXPECT_EQ(error_of([&] { DirectoryLock lock("report", dir.file("file")); }),
            "[report] cannot create directory '" + dir.file("file") + "': Not a directory");
}

}  // namespace
}  // namespace posenc::io
