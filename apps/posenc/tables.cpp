#include "tables.h"

#include "posenc/error.h"
#include "posenc/io/csv.h"
#include "posenc/io/npy.h"

namespace posenc::cli {

Table make_absolute_table(std::string_view kind, const kernels::AbsoluteParams& params,
                          const kernels::Positions& positions) {
  kernels::validate(params, positions);
  Table t{kind, positions.count, params.dim, {}};
  t.values.resize(static_cast<size_t>(positions.count * params.dim));
  kernels::absolute_table<float>(params, positions, t.values);
  return t;
}

Table make_grid_table(std::string_view kind, bool three_d, const kernels::SinusoidalGridParams& params) {
  kernels::validate(params, three_d);
  const int64_t frames = three_d ? params.frames : 1;
  Table t{kind, 0, params.dim, {}};
  t.values.resize(static_cast<size_t>(frames * params.height * params.width * params.dim));
  if (three_d) {
    kernels::sinusoidal_3d<float>(params, t.values);
  } else {
    kernels::sinusoidal_2d<float>(params, t.values);
  }
  t.rows = frames * params.height * params.width;
  return t;
}

TableFormat table_format(std::string_view path) {
  if (path.ends_with(".npy")) return TableFormat::kNpy;
  if (path.ends_with(".csv")) return TableFormat::kCsv;
  fail_argument("table", "output file must end in .npy or .csv, got '", path, "'");
}

void write_table(const Table& table, const std::string& path) {
  if (table_format(path) == TableFormat::kCsv) {
    io::write_csv(path, table.values, table.rows, table.cols);
  } else {
    io::write_npy(path, table.values, {table.rows, table.cols});
  }
}

}  // namespace posenc::cli
