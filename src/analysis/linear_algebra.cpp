#include "linear_algebra.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "parallel.h"

namespace posenc::analysis::detail {
namespace {

// Register tile of c: kMr rows x kNr columns, two vectors per row, held in
// registers over all of k. GCC/Clang vector extensions: the plain nested loop
// does not stay in registers with GCC 12 (1.5 vs 20 G multiply-adds/s here).
#if defined(__AVX512F__)
constexpr int64_t kLanes = 8;
#elif defined(__AVX__)
constexpr int64_t kLanes = 4;
#else
constexpr int64_t kLanes = 2;
#endif
typedef double Vec __attribute__((vector_size(kLanes * sizeof(double))));
constexpr int64_t kMr = 4;
constexpr int64_t kNr = 2 * kLanes;

int64_t tiles(int64_t count, int64_t width) { return (count + width - 1) / width; }

// Columns [tile * width, tile * width + width) of x [k, cols] as [tiles][k][width], zero padded.
std::vector<double> pack_columns(const double* x, int64_t k, int64_t cols, int64_t width) {
  const int64_t count = tiles(cols, width);
  std::vector<double> packed(static_cast<size_t>(count * k * width), 0.0);
  for (int64_t tile = 0; tile < count; ++tile) {
    const int64_t c0 = tile * width;
    const int64_t valid = std::min(width, cols - c0);
    double* out = packed.data() + tile * k * width;
    for (int64_t t = 0; t < k; ++t) std::copy_n(x + t * cols + c0, valid, out + t * width);
  }
  return packed;
}

// One kMr x kNr tile of a^T b from packed panels; the sum over t runs in order.
void tile_kernel(const double* ap, const double* bp, int64_t k, double* c, int64_t ldc, int64_t rows,
                 int64_t cols) noexcept {
  Vec acc[kMr][2] = {};
  for (int64_t t = 0; t < k; ++t) {
    Vec b0, b1;
    std::memcpy(&b0, bp + t * kNr, sizeof(Vec));
    std::memcpy(&b1, bp + t * kNr + kLanes, sizeof(Vec));
    for (int64_t r = 0; r < kMr; ++r) {
      const double a = ap[t * kMr + r];
      acc[r][0] += a * b0;
      acc[r][1] += a * b1;
    }
  }
  double out[kMr][kNr];
  std::memcpy(out, acc, sizeof(out));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j) c[r * ldc + j] = out[r][j];
}

// c = a^T b; with `upper_only`, only the tiles that hold some c[i, j] with j >= i.
void multiply_packed(const double* a, const double* b, int64_t k, int64_t m, int64_t n, double* c, bool parallel,
                     bool upper_only) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    std::fill(c, c + m * n, 0.0);
    return;
  }
  const std::vector<double> ap = pack_columns(a, k, m, kMr);
  const std::vector<double> bp = a == b && kMr == kNr ? std::vector<double>() : pack_columns(b, k, n, kNr);
  const double* bpack = bp.empty() ? ap.data() : bp.data();
  const int64_t row_tiles = tiles(m, kMr);
  const int64_t col_tiles = tiles(n, kNr);
  [[maybe_unused]] const bool threads = parallel && row_tiles > 1 && worth_threads(double(m) * double(n) * double(k));
#pragma omp parallel for schedule(dynamic, 1) if (threads)
  for (int64_t it = 0; it < row_tiles; ++it) {
    const int64_t i0 = it * kMr;
    const int64_t rows = std::min(kMr, m - i0);
    const int64_t first = upper_only ? i0 / kNr : 0;
    for (int64_t jt = first; jt < col_tiles; ++jt) {
      const int64_t j0 = jt * kNr;
      tile_kernel(ap.data() + it * k * kMr, bpack + jt * k * kNr, k, c + i0 * n + j0, n, rows, std::min(kNr, n - j0));
    }
  }
}

}  // namespace

void multiply_tn(const double* a, const double* b, int64_t k, int64_t m, int64_t n, double* c, bool parallel) {
  multiply_packed(a, b, k, m, n, c, parallel, false);
}

void gram_tn(const double* a, int64_t k, int64_t m, double* c, bool parallel) {
  multiply_packed(a, a, k, m, m, c, parallel, true);
  // c[i, j] and c[j, i] are the same sum in the same order; mirror so the
  // lower triangle is defined even where no tile computed it.
  for (int64_t i = 1; i < m; ++i)
    for (int64_t j = 0; j < i; ++j) c[i * m + j] = c[j * m + i];
}

void transpose(const double* a, int64_t rows, int64_t cols, double* out) noexcept {
  constexpr int64_t kBlock = 32;  // keeps both sides' cache lines live
  for (int64_t r0 = 0; r0 < rows; r0 += kBlock)
    for (int64_t c0 = 0; c0 < cols; c0 += kBlock)
      for (int64_t r = r0; r < std::min(rows, r0 + kBlock); ++r)
        for (int64_t c = c0; c < std::min(cols, c0 + kBlock); ++c) out[c * rows + r] = a[r * cols + c];
}

double dot(const double* a, const double* b, int64_t n) noexcept {
  double lane[8] = {};
  int64_t t = 0;
  for (; t + 8 <= n; t += 8)
    for (int64_t l = 0; l < 8; ++l) lane[l] += a[t + l] * b[t + l];
  double tail = 0.0;
  for (; t < n; ++t) tail += a[t] * b[t];
  return (((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]))) + tail;
}

bool cholesky(double* a, int64_t n) noexcept {
  // Row by row (Cholesky-Banachiewicz): L[i, j] needs rows i and j up to column j,
  // both contiguous, so every inner product is a dot(). Rows advance kRows at a
  // time in lock-step over the columns j < i0, so that row j is read from memory
  // once per block rather than once per row (at n = 4096 the factor is 134 MB:
  // row by row it streamed ~90 GB). Each L[i, j] is the same expression as row
  // by row, so the result does not depend on the blocking.
  constexpr int64_t kRows = 32;
  for (int64_t i0 = 0; i0 < n; i0 += kRows) {
    const int64_t i1 = std::min(n, i0 + kRows);
    for (int64_t j = 0; j < i0; ++j) {
      const double* lj = a + j * n;
      for (int64_t i = i0; i < i1; ++i) {
        double* li = a + i * n;
        li[j] = (li[j] - dot(li, lj, j)) / lj[j];
      }
    }
    for (int64_t i = i0; i < i1; ++i) {
      double* li = a + i * n;
      for (int64_t j = i0; j < i; ++j) {
        const double* lj = a + j * n;
        li[j] = (li[j] - dot(li, lj, j)) / lj[j];
      }
      const double pivot = li[i] - dot(li, li, i);
      if (!(pivot > 0.0)) return false;
      li[i] = std::sqrt(pivot);
    }
  }
  return true;
}

namespace {

// The substitutions of cholesky_solve restricted to rows [i0, i1), columns
// [j0, j1): the plain loops, for one diagonal block (or all of L).
void forward_rows(const double* l, int64_t n, double* b, int64_t m, int64_t i0, int64_t i1, int64_t j0,
                  int64_t j1) noexcept {
  for (int64_t i = i0; i < i1; ++i) {
    double* bi = b + i * m;
    for (int64_t k = i0; k < i; ++k) {
      const double f = l[i * n + k];
      const double* bk = b + k * m;
      for (int64_t j = j0; j < j1; ++j) bi[j] -= f * bk[j];
    }
    const double d = l[i * n + i];
    for (int64_t j = j0; j < j1; ++j) bi[j] /= d;
  }
}

void backward_rows(const double* l, int64_t n, double* b, int64_t m, int64_t i0, int64_t i1, int64_t j0,
                   int64_t j1) noexcept {
  for (int64_t i = i1 - 1; i >= i0; --i) {
    double* bi = b + i * m;
    for (int64_t k = i + 1; k < i1; ++k) {
      const double f = l[k * n + i];
      const double* bk = b + k * m;
      for (int64_t j = j0; j < j1; ++j) bi[j] -= f * bk[j];
    }
    const double d = l[i * n + i];
    for (int64_t j = j0; j < j1; ++j) bi[j] /= d;
  }
}

// b[i0 .. i0 + rows) -= a^T c, a [k, rows] contiguous, c = k rows of b from row c0.
void subtract_product(const std::vector<double>& a, int64_t k, int64_t rows, const double* c, int64_t m, double* b,
                      std::vector<double>& product) {
  product.resize(static_cast<size_t>(rows * m));
  multiply_tn(a.data(), c, k, rows, m, product.data(), false);
  for (int64_t t = 0; t < rows * m; ++t) b[t] -= product[t];
}

}  // namespace

void cholesky_solve(const double* l, int64_t n, double* b, int64_t m) {
  // L y = b, then L^T x = y. Few right-hand sides: the plain substitutions.
  // Many (the translation fit's D x D system): blocks of kRows rows, each
  // first updated by one product with every solved row (the register-tiled
  // kernel, ~10x the axpy loops, which streamed all of b once per row: ~25 s
  // per solve at n = m = 4096), then solved by the plain loops within the block.
  constexpr int64_t kRows = 64;
  if (m < 16 || n <= kRows) {
    forward_rows(l, n, b, m, 0, n, 0, m);
    backward_rows(l, n, b, m, 0, n, 0, m);
    return;
  }
  std::vector<double> a, product;
  for (int64_t i0 = 0; i0 < n; i0 += kRows) {
    const int64_t rows = std::min(kRows, n - i0);
    if (i0 > 0) {  // b_I -= L[I, 0:i0] y[0:i0]: a = L[I, 0:i0]^T [i0, rows]
      a.resize(static_cast<size_t>(i0 * rows));
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t k = 0; k < i0; ++k) a[k * rows + r] = l[(i0 + r) * n + k];
      subtract_product(a, i0, rows, b, m, b + i0 * m, product);
    }
    forward_rows(l, n, b, m, i0, i0 + rows, 0, m);
  }
  const int64_t last = ((n - 1) / kRows) * kRows;  // the first row of the last block
  for (int64_t i0 = last; i0 >= 0; i0 -= kRows) {
    const int64_t i1 = std::min(n, i0 + kRows), rows = i1 - i0;
    if (i1 < n) {  // x_I -= L[i1:n, I]^T x[i1:n]: a = L[i1:n, I] [n - i1, rows]
      const int64_t k = n - i1;
      a.resize(static_cast<size_t>(k * rows));
      for (int64_t t = 0; t < k; ++t) std::copy_n(l + (i1 + t) * n + i0, rows, a.data() + t * rows);
      subtract_product(a, k, rows, b + i1 * m, m, b + i0 * m, product);
    }
    backward_rows(l, n, b, m, i0, i1, 0, m);
  }
}

bool ridge_cholesky(const std::vector<double>& a, int64_t n, double lambda, std::vector<double>& l) {
  for (int attempt = 0; attempt < 12; ++attempt, lambda *= 10.0) {
    l = a;
    for (int64_t i = 0; i < n; ++i) l[i * n + i] += lambda;
    if (cholesky(l.data(), n)) return true;
  }
  return false;
}

}  // namespace posenc::analysis::detail
