// POSIX file access for the io layer: a whole-file reader with positioned
// reads, and an output file that replaces its target atomically (a temporary
// file in the same directory, fsync, rename). Failures throw
// std::runtime_error("[op] path: what failed: strerror").
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace posenc::io::detail {

class InputFile {
 public:
  InputFile(std::string_view op, const std::string& path);  // a regular file
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  int64_t size() const noexcept { return size_; }
  // Fills `out` with the bytes at [offset, offset + out.size()).
  void read_at(int64_t offset, std::span<std::byte> out) const;

 private:
  std::string op_;
  std::string path_;
  int fd_ = -1;
  int64_t size_ = 0;
};

class AtomicOutputFile {
 public:
  AtomicOutputFile(std::string_view op, const std::string& path);
  // Removes the temporary file unless commit() succeeded.
  ~AtomicOutputFile();
  AtomicOutputFile(const AtomicOutputFile&) = delete;
  AtomicOutputFile& operator=(const AtomicOutputFile&) = delete;

  void write(std::span<const std::byte> bytes);
  void write(std::string_view text) { write(std::as_bytes(std::span<const char>(text.data(), text.size()))); }
  // Flushes, syncs, closes and renames the temporary file onto the target.
  void commit();

 private:
  [[noreturn]] void fail(std::string_view what, int error) const;

  std::string op_;
  std::string path_;
  std::string temp_path_;
  int fd_ = -1;
  int slot_ = -1;  // in the registry of temporary files (file.cpp), -1: none
  bool committed_ = false;
};

}  // namespace posenc::io::detail
