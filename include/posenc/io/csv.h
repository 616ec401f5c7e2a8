// CSV output of a [rows, cols] table: one line per row, values separated by
// ',', written with the shortest decimal text that reads back to the same
// float32 / float64 value (std::to_chars), "nan"/"inf"/"-inf" for
// non-finite values. No header row unless column names are given. The target
// is replaced atomically once the whole file is written.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace posenc::io {

struct CsvOptions {
  // Column names for a first line; empty: no header row. Names may not
  // contain ',', '"', '\r' or '\n'.
  std::vector<std::string> column_names;
};

// values: rows*cols, row-major. Throws std::invalid_argument on a size
// mismatch, std::runtime_error on an I/O failure.
void write_csv(const std::string& path, std::span<const float> values, int64_t rows, int64_t cols,
               const CsvOptions& options = {});
void write_csv(const std::string& path, std::span<const double> values, int64_t rows, int64_t cols,
               const CsvOptions& options = {});

}  // namespace posenc::io
