// Shared by the posenc::text tests: the io tests' scratch directory and
// exact-message helper, plus writing a file into the directory.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <string_view>

#include "../io/io_test_util.h"

namespace posenc::text::test {

using io::testing::error_of;

// f must throw E with exactly message.
template <class E = std::exception>
void expect_error(const std::function<void()>& f, const std::string& message) {
  EXPECT_EQ(error_of<E>(f), message);
}

// A fresh directory (mkdtemp), removed with its contents when the object goes.
class ScratchDir : public io::testing::TempDir {
 public:
  std::filesystem::path operator/(std::string_view name) const { return path() / name; }
  std::filesystem::path write(const std::string& name, const std::string& bytes) const {
    const std::filesystem::path p = path() / name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
};

}  // namespace posenc::text::test
