// The one data type of posenc::analysis: a dense row-major float64 matrix,
// either a position table [positions, dim] (one row per position) or a
// proximity matrix [positions, positions].
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace posenc::analysis {

struct Matrix {
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<double> values;  // rows * cols, row-major

  Matrix() = default;
  Matrix(int64_t r, int64_t c) : rows(r), cols(c), values(static_cast<size_t>(r * c), 0.0) {}
  double operator()(int64_t r, int64_t c) const noexcept { return values[static_cast<size_t>(r * cols + c)]; }
  double& operator()(int64_t r, int64_t c) noexcept { return values[static_cast<size_t>(r * cols + c)]; }
};

// A copy of rows * cols values (float or double), row-major. Throws
//   "[matrix] rows and cols must be >= 0, got -1 x 4"
//   "[matrix] values must hold rows * cols = 12 values, got 11"
Matrix matrix_from(std::span<const float> values, int64_t rows, int64_t cols);
Matrix matrix_from(std::span<const double> values, int64_t rows, int64_t cols);

// The checks every analysis entry point runs once, naming `op` and `what`:
//   "[indicators] matrix must be square, got 3 x 4"
//   "[proximity] table must have at least 1 row and 1 column, got 0 x 4"
//   "[proximity] table has a non-finite value at (3, 7): nan"
//   "[proximity] table holds 11 values, rows * cols = 12"
void validate_table(std::string_view op, std::string_view what, const Matrix& m);
void validate_square(std::string_view op, std::string_view what, const Matrix& m);

}  // namespace posenc::analysis
