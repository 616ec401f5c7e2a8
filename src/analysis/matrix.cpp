#include "posenc/analysis/matrix.h"

#include <cmath>
#include <string>

#include "posenc/error.h"

namespace posenc::analysis {
namespace {

// rows * cols for rows, cols >= 1, as decimal text even when it overflows int64
// (the message must say what the shape asks for, whatever it is).
std::string product_text(int64_t rows, int64_t cols) {
  unsigned __int128 p = static_cast<unsigned __int128>(rows) * static_cast<unsigned __int128>(cols);
  std::string digits;
  do {
    digits.insert(digits.begin(), static_cast<char>('0' + static_cast<int>(p % 10)));
    p /= 10;
  } while (p != 0);
  return digits;
}

template <class T>
Matrix copy_matrix(std::span<const T> values, int64_t rows, int64_t cols) {
  require(rows >= 0 && cols >= 0, "matrix", "rows and cols must be >= 0, got ", rows, " x ", cols);
  const auto size = static_cast<int64_t>(values.size());
  const bool empty = rows == 0 || cols == 0;
  const bool fits = empty ? size == 0 : rows <= size / cols && rows * cols == size;
  require(fits, "matrix", "values must hold rows * cols = ", empty ? std::string("0") : product_text(rows, cols),
          " values, got ", values.size());
  Matrix m;
  m.rows = rows;
  m.cols = cols;
  m.values.assign(values.begin(), values.end());
  return m;
}

}  // namespace

Matrix matrix_from(std::span<const float> values, int64_t rows, int64_t cols) {
  return copy_matrix(values, rows, cols);
}

Matrix matrix_from(std::span<const double> values, int64_t rows, int64_t cols) {
  return copy_matrix(values, rows, cols);
}

void validate_table(std::string_view op, std::string_view what, const Matrix& m) {
  require(m.rows >= 1 && m.cols >= 1, op, what, " must have at least 1 row and 1 column, got ", m.rows, " x ", m.cols);
  const auto size = static_cast<int64_t>(m.values.size());
  require(m.rows <= size / m.cols && m.rows * m.cols == size, op, what, " holds ", m.values.size(),
          " values, rows * cols = ", product_text(m.rows, m.cols));
  for (int64_t r = 0; r < m.rows; ++r) {
    for (int64_t c = 0; c < m.cols; ++c) {
      const double v = m(r, c);
      if (!std::isfinite(v)) fail_argument(op, what, " has a non-finite value at (", r, ", ", c, "): ", v);
    }
  }
}

void validate_square(std::string_view op, std::string_view what, const Matrix& m) {
  validate_table(op, what, m);
  require(m.rows == m.cols, op, what, " must be square, got ", m.rows, " x ", m.cols);
}

}  // namespace posenc::analysis
