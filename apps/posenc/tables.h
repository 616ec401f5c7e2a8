// Building a float32 table through the kernels, and writing it as .npy or
// .csv. No math here: the kernels compute and validate.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/kernels/absolute.h"
#include "posenc/kernels/sinusoidal_nd.h"

namespace posenc::cli {

struct Table {
  std::string_view kind;
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<float> values;  // rows x cols, row-major
};

// [positions.count, params.dim]
Table make_absolute_table(std::string_view kind, const kernels::AbsoluteParams& params,
                          const kernels::Positions& positions);
// [H*W, D], or [F*H*W, D] when three_d.
Table make_grid_table(std::string_view kind, bool three_d, const kernels::SinusoidalGridParams& params);

enum class TableFormat { kNpy, kCsv };

// By the file name: ".npy" or ".csv"; anything else throws
// "[table] output file must end in .npy or .csv, got 'x'".
TableFormat table_format(std::string_view path);

// float32 .npy, or CSV without a header row, by table_format(path).
void write_table(const Table& table, const std::string& path);

}  // namespace posenc::cli
