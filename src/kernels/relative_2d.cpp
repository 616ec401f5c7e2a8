#include "posenc/kernels/relative_2d.h"

#include <omp.h>

#include <algorithm>
#include <vector>

#include "bias_rows.h"
#include "posenc/error.h"

namespace posenc::kernels {
namespace {

// Below this many output values one thread is faster than waking a team.
constexpr int64_t kParallelValues = int64_t{1} << 16;

struct Dims {
  int64_t batch, heads, rows, cols;
  bool operator==(const Dims&) const = default;
};

template <class T>
Dims dims_of(const BatchedMatrix<T>& m) noexcept {
  return {m.batch, m.heads, m.rows, m.cols};
}

// The three views agree with the grid and with each other; big is out (expand) or grad (reduce).
template <class H, class W, class G>
void check_views(const char* op, const Relative2dParams& params, const BatchedMatrix<H>& rel_h,
                 const BatchedMatrix<W>& rel_w, const BatchedMatrix<G>& big, const char* big_name) {
  const int64_t height = params.height, width = params.width;
  require(height >= 1, op, "height must be >= 1, got ", height);
  require(width >= 1, op, "width must be >= 1, got ", width);
  require(rel_h.batch >= 0 && rel_h.heads >= 0, op, "rel_h must have (B, H) >= 0, got (", rel_h.batch, ", ",
          rel_h.heads, ")");
  // Extents that overflow int64 match no view; the message shows them approximately.
  const detail::ExtentProduct hw = detail::extent_product({height, width});
  detail::ExtentProduct span_h = detail::extent_product({height, 2}), span_w = detail::extent_product({width, 2});
  if (!span_h.overflow) --span_h.value;
  if (!span_w.overflow) --span_w.value;
  const auto matches = [](const detail::ExtentProduct& p, int64_t n) { return !p.overflow && p.value == n; };
  require(matches(hw, rel_h.rows), op, "rel_h must have height*width = ", hw, " rows, got ", rel_h.rows);
  require(matches(span_h, rel_h.cols), op, "rel_h must have 2*height-1 = ", span_h, " columns, got ", rel_h.cols);
  require(matches(hw, rel_w.rows), op, "rel_w must have height*width = ", hw, " rows, got ", rel_w.rows);
  require(matches(span_w, rel_w.cols), op, "rel_w must have 2*width-1 = ", span_w, " columns, got ", rel_w.cols);
  require(rel_w.batch == rel_h.batch && rel_w.heads == rel_h.heads, op, "rel_w must be (B, H) = (", rel_h.batch,
          ", ", rel_h.heads, ") like rel_h, got (", rel_w.batch, ", ", rel_w.heads, ")");
  const Dims want{rel_h.batch, rel_h.heads, hw.value, hw.value};
  const Dims got = dims_of(big);
  require(got == want, op, big_name, " must be (B, H, HW, HW) = (", want.batch, ", ", want.heads, ", ", want.rows,
          ", ", want.cols, "), got (", got.batch, ", ", got.heads, ", ", got.rows, ", ", got.cols, ")");
  if (rel_h.batch * rel_h.heads == 0) return;
  require(rel_h.data != nullptr, op, "rel_h must not be null");
  require(rel_w.data != nullptr, op, "rel_w must not be null");
  require(big.data != nullptr, op, big_name, " must not be null");
}

}  // namespace

// out[(y,x), (y',x')] = rel_h[(y,x), y'-y+H-1] + rel_w[(y,x), x'-x+W-1]: per
// query row, H segments, each a constant plus a window of the rel_w row.
template <class T>
void relative_2d_expand(const Relative2dParams& params, BatchedMatrix<const T> rel_h, BatchedMatrix<const T> rel_w,
                        BatchedMatrix<T> out, const char* op) {
  check_views(op, params, rel_h, rel_w, out, "out");
  const int64_t height = params.height, width = params.width, hw = height * width;
  const int64_t rows = rel_h.batch * rel_h.heads * hw;
#pragma omp parallel for schedule(static) if (rows * hw > kParallelValues)
  for (int64_t task = 0; task < rows; ++task) {
    const int64_t bh = task / hw, r = task % hw;
    const int64_t b = bh / rel_h.heads, h = bh % rel_h.heads;
    const int64_t y = r / width, x = r % width;
    const T* rh = rel_h.row(b, h, r) + (height - 1 - y);
    const T* rw = rel_w.row(b, h, r) + (width - 1 - x);
    T* o = out.row(b, h, r);
    for (int64_t yk = 0; yk < height; ++yk) {
      const T a = rh[yk];
      T* seg = o + yk * width;
      for (int64_t xk = 0; xk < width; ++xk) seg[xk] = a + rw[xk];
    }
  }
}

// The adjoint: rel_h[(y,x), ry] sums grad row (y,x) over the key row y' = y+ry-H+1,
// rel_w[(y,x), rx] over the key column x' = x+rx-W+1; offsets off the grid get 0.
// Sums in double, one thread per query row: deterministic.
template <class T>
void relative_2d_reduce(const Relative2dParams& params, BatchedMatrix<const T> grad, BatchedMatrix<T> rel_h,
                        BatchedMatrix<T> rel_w, const char* op) {
  check_views(op, params, rel_h, rel_w, grad, "grad");
  const int64_t height = params.height, width = params.width, hw = height * width;
  const int64_t rows = rel_h.batch * rel_h.heads * hw;
  if (rows == 0) return;
  std::vector<double> scratch(static_cast<size_t>(omp_get_max_threads() * width));
#pragma omp parallel if (rows * hw > kParallelValues)
  {
    double* col_sum = scratch.data() + omp_get_thread_num() * width;
#pragma omp for schedule(static)
    for (int64_t task = 0; task < rows; ++task) {
      const int64_t bh = task / hw, r = task % hw;
      const int64_t b = bh / rel_h.heads, h = bh % rel_h.heads;
      const int64_t y = r / width, x = r % width;
      const T* g = grad.row(b, h, r);
      T* rh = rel_h.row(b, h, r);
      T* rw = rel_w.row(b, h, r);
      std::fill(col_sum, col_sum + width, 0.0);
      std::fill(rh, rh + 2 * height - 1, T(0));
      for (int64_t yk = 0; yk < height; ++yk) {
        const T* seg = g + yk * width;
        double row_sum = 0.0;
        for (int64_t xk = 0; xk < width; ++xk) {
          row_sum += static_cast<double>(seg[xk]);
          col_sum[xk] += static_cast<double>(seg[xk]);
        }
        rh[yk - y + height - 1] = static_cast<T>(row_sum);
      }
      std::fill(rw, rw + 2 * width - 1, T(0));
      for (int64_t xk = 0; xk < width; ++xk) rw[xk - x + width - 1] = static_cast<T>(col_sum[xk]);
    }
  }
}

#define POSENC_INSTANTIATE(T)                                                                                 \
  template void relative_2d_expand<T>(const Relative2dParams&, BatchedMatrix<const T>, BatchedMatrix<const T>, \
                                      BatchedMatrix<T>, const char*);                                         \
  template void relative_2d_reduce<T>(const Relative2dParams&, BatchedMatrix<const T>, BatchedMatrix<T>,       \
                                      BatchedMatrix<T>, const char*);
POSENC_INSTANTIATE(float)
POSENC_INSTANTIATE(double)
#undef POSENC_INSTANTIATE

}  // namespace posenc::kernels
