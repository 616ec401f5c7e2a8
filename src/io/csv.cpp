#include "posenc/io/csv.h"

#include <charconv>
#include <string_view>

#include "file.h"
#include "posenc/error.h"

namespace posenc::io {
namespace {

constexpr size_t kFlushBytes = size_t{1} << 20;

template <class T>
void write_table(const std::string& path, std::span<const T> values, int64_t rows, int64_t cols,
                 const CsvOptions& options) {
  require(rows >= 0, "csv", path, ": rows must be >= 0, got ", rows);
  require(cols >= 1, "csv", path, ": cols must be at least 1, got ", cols);
  require(rows <= static_cast<int64_t>(values.size()) / cols && rows * cols == static_cast<int64_t>(values.size()),
          "csv", path, ": rows x cols must equal the number of values ", values.size(), ", got ", rows, " x ", cols);
  const auto& names = options.column_names;
  require(names.empty() || static_cast<int64_t>(names.size()) == cols, "csv", path,
          ": column_names must be empty or hold one name per column (", cols, "), got ", names.size());

  std::string buffer;
  for (size_t j = 0; j < names.size(); ++j) {
    require(names[j].find_first_of(",\"\r\n") == std::string::npos, "csv", path,
            ": column names may not contain ',', '\"' or line breaks, got '", names[j], "'");
    buffer += (j == 0 ? "" : ",") + names[j];
  }

  detail::AtomicOutputFile out("csv", path);
  if (!names.empty()) buffer += '\n';
  char number[64];
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      if (c > 0) buffer += ',';
      const auto result = std::to_chars(number, number + sizeof number, values[r * cols + c]);
      buffer.append(number, result.ptr);
    }
    buffer += '\n';
    if (buffer.size() >= kFlushBytes) {
      out.write(buffer);
      buffer.clear();
    }
  }
  out.write(buffer);
  out.commit();
}

}  // namespace

void write_csv(const std::string& path, std::span<const float> values, int64_t rows, int64_t cols,
               const CsvOptions& options) {
  write_table(path, values, rows, cols, options);
}

void write_csv(const std::string& path, std::span<const double> values, int64_t rows, int64_t cols,
               const CsvOptions& options) {
  write_table(path, values, rows, cols, options);
}

}  // namespace posenc::io
