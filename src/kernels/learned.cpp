#include "posenc/kernels/learned.h"

#include <algorithm>

#include "posenc/error.h"

namespace posenc::kernels {
namespace {
constexpr const char* kOp = "learned";

void validate_shapes(size_t table_size, int64_t rows, int64_t dim) {
  require(rows >= 1, kOp, "table rows must be positive, got ", rows);
  require(dim >= 1, kOp, "dim must be positive, got ", dim);
  require(static_cast<int64_t>(table_size) == rows * dim, kOp, "table must hold rows x dim = ",
          rows * dim, " values, got ", table_size);
}
}  // namespace

void validate_learned_positions(std::span<const int64_t> positions, int64_t rows) {
  for (int64_t p : positions) {
    if (p < 0 || p >= rows) {
      fail_argument(kOp, "position ", p, " is outside the table of ", rows, " rows (valid 0..", rows - 1, ")");
    }
  }
}

template <class T>
void learned_forward(std::span<const T> table, int64_t rows, int64_t dim,
                     std::span<const int64_t> positions, std::span<T> out) {
  validate_shapes(table.size(), rows, dim);
  require(out.size() == positions.size() * static_cast<size_t>(dim), kOp, "out must hold positions x dim = ",
          positions.size() * static_cast<size_t>(dim), " values, got ", out.size());
  validate_learned_positions(positions, rows);
  const int64_t n = static_cast<int64_t>(positions.size());
#pragma omp parallel for schedule(static) if (n * dim > (int64_t{1} << 16))
  for (int64_t k = 0; k < n; ++k) {
    const T* src = table.data() + positions[k] * dim;
    std::copy(src, src + dim, out.data() + k * dim);
  }
}

template <class T>
void learned_backward(std::span<const T> grad_out, std::span<const int64_t> positions, int64_t rows,
                      int64_t dim, std::span<T> grad_table) {
  validate_shapes(grad_table.size(), rows, dim);
  require(grad_out.size() == positions.size() * static_cast<size_t>(dim), kOp,
          "grad_out must hold positions x dim = ", positions.size() * static_cast<size_t>(dim),
          " values, got ", grad_out.size());
  validate_learned_positions(positions, rows);
  // Serial over positions: repeated positions add into the same row.
  const int64_t n = static_cast<int64_t>(positions.size());
  for (int64_t k = 0; k < n; ++k) {
    const T* g = grad_out.data() + k * dim;
    T* dst = grad_table.data() + positions[k] * dim;
    for (int64_t j = 0; j < dim; ++j) dst[j] += g[j];
  }
}

#define POSENC_INSTANTIATE(T)                                                                          \
  template void learned_forward<T>(std::span<const T>, int64_t, int64_t, std::span<const int64_t>,    \
                                   std::span<T>);                                                      \
  template void learned_backward<T>(std::span<const T>, std::span<const int64_t>, int64_t, int64_t,   \
                                    std::span<T>);
POSENC_INSTANTIATE(float)
POSENC_INSTANTIATE(double)
#undef POSENC_INSTANTIATE

}  // namespace posenc::kernels
