#include "posenc/io/csv.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <sstream>

#include "io_test_util.h"

namespace posenc::io {
namespace {

using testing::error_of;
using testing::read_bytes;
using testing::TempDir;

TEST(Csv, WritesOneLinePerRowWithoutHeader) {
  TempDir dir;
  const std::string path = dir.file("t.csv");
  write_csv(path, std::vector<float>{0.5f, -1.0f, 3.0f, 0.1f, 1e-8f, 65536.0f}, 2, 3);
  EXPECT_EQ(read_bytes(path), "0.5,-1,3\n0.1,1e-08,65536\n");
}

TEST(Csv, ColumnNamesMakeAHeaderRow) {
  TempDir dir;
  const std::string path = dir.file("t.csv");
  write_csv(path, std::vector<double>{1, 2}, 1, 2, CsvOptions{{"sin0", "cos0"}});
  EXPECT_EQ(read_bytes(path), "sin0,cos0\n1,2\n");
}

TEST(Csv, ValuesReadBackExactly) {
  // Shortest round-trip text: strtof/strtod give back the same bits.
  std::vector<float> f;
  std::vector<double> d;
  for (int k = 1; k <= 1000; ++k) {
    f.push_back(1.0f / static_cast<float>(k) - 0.3f);
    d.push_back(1.0 / k - 0.3);
  }
  f.push_back(std::numeric_limits<float>::denorm_min());
  f.push_back(-std::numeric_limits<float>::max());
  d.push_back(std::numeric_limits<double>::denorm_min());
  d.push_back(-std::numeric_limits<double>::max());
  TempDir dir;
  write_csv(dir.file("f.csv"), f, 2, static_cast<int64_t>(f.size()) / 2);
  write_csv(dir.file("d.csv"), d, static_cast<int64_t>(d.size()), 1);
  std::vector<float> f_back;
  std::vector<double> d_back;
  std::string f_text = read_bytes(dir.file("f.csv"));
  EXPECT_EQ(std::count(f_text.begin(), f_text.end(), '\n'), 2);
  std::replace(f_text.begin(), f_text.end(), '\n', ',');
  std::stringstream fs(f_text);
  for (std::string item; std::getline(fs, item, ',');) f_back.push_back(std::strtof(item.c_str(), nullptr));
  std::stringstream ds(read_bytes(dir.file("d.csv")));
  for (std::string line; std::getline(ds, line);) d_back.push_back(std::strtod(line.c_str(), nullptr));
  EXPECT_EQ(f_back, f);
  EXPECT_EQ(d_back, d);
}

TEST(Csv, NonFiniteValuesAreSpelledOut) {
  TempDir dir;
  const std::string path = dir.file("t.csv");
  write_csv(path,
            std::vector<float>{std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity()},
            1, 3);
  EXPECT_EQ(read_bytes(path), "nan,inf,-inf\n");
}

TEST(Csv, RefusesBadArguments) {
  TempDir dir;
  const std::string path = dir.file("t.csv");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { write_csv(path, std::vector<float>(6), 4, 2); }),
            "[csv] " + path + ": rows x cols must equal the number of values 6, got 4 x 2");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { write_csv(path, std::vector<float>(6), 6, 0); }),
            "[csv] " + path + ": cols must be at least 1, got 0");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { write_csv(path, std::vector<float>(2), 1, 2, CsvOptions{{"a"}}); }),
            "[csv] " + path + ": column_names must be empty or hold one name per column (2), got 1");
  EXPECT_EQ(error_of<std::invalid_argument>([&] {
              write_csv(path, std::vector<float>(2), 1, 2, CsvOptions{{"a", "b,c"}});
            }),
            "[csv] " + path + ": column names may not contain ',', '\"' or line breaks, got 'b,c'");
  EXPECT_TRUE(dir.entries().empty());
  EXPECT_EQ(error_of<std::runtime_error>([&] { write_csv(dir.file("no/t.csv"), std::vector<float>(2), 1, 2); }),
            "[csv] " + dir.file("no/t.csv") + ": cannot create a file in '" + dir.file("no") +
                "': No such file or directory");
}

}  // namespace
}  // namespace posenc::io
