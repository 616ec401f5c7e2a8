// Helpers for the io tests: a scratch directory, raw file bytes, .npy files
// assembled by hand (independent of posenc's writer), exact error messages.
#pragma once

#include <stdlib.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace posenc::io::testing {

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "posenc_io_XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(std::string_view name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }
  // Names of the entries in the directory, to spot leftover temporary files.
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(path_)) names.push_back(e.path().filename().string());
    return names;
  }

 private:
  std::filesystem::path path_;
};

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void write_bytes(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// "\x93NUMPY" major minor, then the header length as stated (2 bytes LE for
// major 1, else 4), then `header` and `data` verbatim.
inline std::string npy_bytes(int major, int minor, uint32_t header_length, std::string_view header,
                             std::string_view data) {
  std::string s("\x93NUMPY", 6);
  s += static_cast<char>(major);
  s += static_cast<char>(minor);
  const int length_bytes = major == 1 ? 2 : 4;
  for (int i = 0; i < length_bytes; ++i) s += static_cast<char>((header_length >> (8 * i)) & 0xff);
  s += header;
  s += data;
  return s;
}

// Same with the header length taken from the header itself.
inline std::string npy_bytes(int major, std::string_view header, std::string_view data) {
  return npy_bytes(major, 0, static_cast<uint32_t>(header.size()), header, data);
}

// The little-endian bytes of values (this host is little-endian, as the
// library itself asserts).
template <class T>
std::string raw(const std::vector<T>& values) {
  std::string s(values.size() * sizeof(T), '\0');
  if (!s.empty()) std::memcpy(s.data(), values.data(), s.size());
  return s;
}

// A .safetensors file by hand: the 8-byte little-endian `header_length`,
// then `header` and `data` verbatim.
inline std::string safetensors_bytes(uint64_t header_length, std::string_view header, std::string_view data) {
  std::string s;
  for (int i = 0; i < 8; ++i) s += static_cast<char>((header_length >> (8 * i)) & 0xff);
  s += header;
  s += data;
  return s;
}

// Same with the length taken from the header itself.
inline std::string safetensors_bytes(std::string_view header, std::string_view data) {
  return safetensors_bytes(header.size(), header, data);
}

inline std::string to_string(const std::vector<std::byte>& bytes) {
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

inline std::vector<std::byte> to_bytes(std::string_view s) {
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  return std::vector<std::byte>(p, p + s.size());
}

// what() of the E thrown by f, or "<no exception>". Another type propagates.
template <class E, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "<no exception>";
}

}  // namespace posenc::io::testing
