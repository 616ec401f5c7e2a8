// FIRE (formula, layouts and gradients in posenc/kernels/fire.h).
//
// A tile of R query rows x N keys reaches the offsets d = i' - j of R + N - 1
// diagonals: psi(d) (and, for the gradient, d / (1 + c d)) is formed once per
// diagonal, then per row x = psi(d) / psi(max(L, i')) for the keys j <= i',
// and the MLP runs hidden-unit by hidden-unit over the row's keys (the inner
// loop is over keys, contiguous in scratch, so it vectorizes).
#include "posenc/kernels/fire.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "posenc/error.h"

namespace posenc::kernels {
namespace {

// Dense ops: rows x keys per tile.
constexpr int64_t kRows = 32;
constexpr int64_t kCols = 256;

// The tile's diagonals d in [d_lo, d_hi] that hold a pair j <= i'; false when none does.
bool tile_offsets(int64_t row0, int64_t rows, int64_t col0, int64_t cols, int64_t& d_lo, int64_t& d_hi) noexcept {
  if (rows <= 0 || cols <= 0 || row0 + rows - 1 < col0) return false;
  d_lo = std::max<int64_t>(0, row0 - (col0 + cols - 1));
  d_hi = row0 + rows - 1 - col0;
  return true;
}

}  // namespace

int64_t fire_gradient_size(int64_t num_heads, int64_t hidden) noexcept {
  return 2 * hidden + num_heads * hidden + num_heads + 2;
}

template <class U>
FireGradients<U> fire_gradients(U* buffer, int64_t num_heads, int64_t hidden) noexcept {
  FireGradients<U> g{};
  g.w1 = buffer;
  g.b1 = g.w1 + hidden;
  g.w2 = g.b1 + hidden;
  g.b2 = g.w2 + num_heads * hidden;
  g.c = g.b2 + num_heads;
  g.threshold = g.c + 1;
  return g;
}

template <class T>
void validate(const FireParams<T>& p, const char* op) {
  require(p.num_heads >= 1, op, "num_heads must be >= 1, got ", p.num_heads);
  require(p.hidden >= 1, op, "hidden must be >= 1, got ", p.hidden);
  // Written so that NaN fails too.
  require(p.c > 0 && std::isfinite(static_cast<double>(p.c)), op, "c must be > 0, got ", p.c);
  require(p.threshold > 0 && std::isfinite(static_cast<double>(p.threshold)), op, "threshold L must be > 0, got ",
          p.threshold);
  require(p.w1 != nullptr && p.b1 != nullptr && p.w2 != nullptr && p.b2 != nullptr, op,
          "w1, b1, w2 and b2 must not be null");
}

int64_t fire_tile_scratch(int64_t rows, int64_t cols) noexcept { return 2 * (rows + cols) + 3 * cols; }

template <class T>
void fire_tile(const FireParams<T>& p, int64_t head, int64_t row0, int64_t rows, int64_t col0, int64_t cols, T* s,
               int64_t stride_r, int64_t stride_n, T* scratch) noexcept {
  int64_t d_lo = 0, d_hi = -1;
  if (!tile_offsets(row0, rows, col0, cols, d_lo, d_hi)) return;
  const T c = p.c;
  T* psi = scratch;               // [d_hi - d_lo + 1] <= rows + cols - 1
  T* x = scratch + (rows + cols);  // [cols]
  T* acc = x + cols;              // [cols]
  for (int64_t d = d_lo; d <= d_hi; ++d) psi[d - d_lo] = std::log1p(c * static_cast<T>(d));
  const int64_t hidden = p.hidden;
  const T* w2 = p.w2 + head * hidden;
  const T b2 = p.b2[head];
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t ip = row0 + r;
    if (ip < col0) continue;  // every key of the tile after the query
    const int64_t nn = std::min(cols, ip - col0 + 1);
    const T inv = T(1) / std::log1p(c * std::max(p.threshold, static_cast<T>(ip)));
    const T* pr = psi + (ip - col0 - d_lo);  // pr[-n]: psi of d = i' - (col0 + n)
    for (int64_t n = 0; n < nn; ++n) x[n] = pr[-n] * inv, acc[n] = b2;
    for (int64_t k = 0; k < hidden; ++k) {
      const T a1 = p.w1[k], c1 = p.b1[k], a2 = w2[k];
      for (int64_t n = 0; n < nn; ++n) {
        const T a = a1 * x[n] + c1;
        acc[n] += a2 * (a > T(0) ? a : T(0));
      }
    }
    T* row = s + r * stride_r;
    for (int64_t n = 0; n < nn; ++n) row[n * stride_n] += acc[n];
  }
}

template <class T>
void fire_tile_backward(const FireParams<T>& p, int64_t head, int64_t row0, int64_t rows, int64_t col0, int64_t cols,
                        const T* grad, int64_t stride_r, int64_t stride_n, double* partial, T* scratch) noexcept {
  int64_t d_lo = 0, d_hi = -1;
  if (!tile_offsets(row0, rows, col0, cols, d_lo, d_hi)) return;
  const int64_t hidden = p.hidden;
  const FireGradients<double> out = fire_gradients(partial, p.num_heads, hidden);
  const T c = p.c;
  T* psi = scratch;            // [rows + cols]
  T* dpsi = psi + (rows + cols);  // d / (1 + c d), the c-derivative of psi(d)
  T* x = dpsi + (rows + cols);  // [cols]
  T* g = x + cols;             // [cols]
  T* gx = g + cols;            // [cols]
  for (int64_t d = d_lo; d <= d_hi; ++d) {
    const T t = static_cast<T>(d);
    psi[d - d_lo] = std::log1p(c * t);
    dpsi[d - d_lo] = t / (T(1) + c * t);
  }
  const T* w2 = p.w2 + head * hidden;
  double* dw2 = out.w2 + head * hidden;
  const double cd = static_cast<double>(c), L = static_cast<double>(p.threshold);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t ip = row0 + r;
    if (ip < col0) continue;
    const int64_t nn = std::min(cols, ip - col0 + 1);
    const double m = std::max(L, static_cast<double>(ip));
    const T inv = T(1) / std::log1p(c * static_cast<T>(m));
    const T* pr = psi + (ip - col0 - d_lo);
    const T* dr = dpsi + (ip - col0 - d_lo);
    const T* grow = grad + r * stride_r;
    T sum_g = 0;
    for (int64_t n = 0; n < nn; ++n) {
      x[n] = pr[-n] * inv, g[n] = grow[n * stride_n], gx[n] = 0;
      sum_g += g[n];
    }
    for (int64_t k = 0; k < hidden; ++k) {
      const T a1 = p.w1[k], c1 = p.b1[k], a2 = w2[k];
      T s_relu = 0, s_ga = 0, s_gax = 0;
      for (int64_t n = 0; n < nn; ++n) {
        const T a = a1 * x[n] + c1;
        const bool on = a > T(0);
        const T ga = on ? g[n] * a2 : T(0);
        s_relu += on ? g[n] * a : T(0);
        s_ga += ga;
        s_gax += ga * x[n];
        gx[n] += ga * a1;
      }
      dw2[k] += s_relu, out.b1[k] += s_ga, out.w1[k] += s_gax;
    }
    out.b2[head] += sum_g;
    // dx/dc = (dpsi(d) - x m / (1 + c m)) / D and dx/dL = -x c / ((1 + c L) D) when L > i'. At a tie
    // L = i' (L starts at 512 exactly) half of it, as torch.max in the authors' code splits it.
    T s1 = 0, s2 = 0;
    for (int64_t n = 0; n < nn; ++n) s1 += gx[n] * dr[-n], s2 += gx[n] * x[n];
    const double id = static_cast<double>(inv);
    *out.c += id * (static_cast<double>(s1) - m / (1.0 + cd * m) * static_cast<double>(s2));
    const double row = static_cast<double>(ip);
    const double share = L > row ? 1.0 : L == row ? 0.5 : 0.0;
    if (share > 0) *out.threshold -= share * id * cd / (1.0 + cd * L) * static_cast<double>(s2);
  }
}

template <class T>
void fire_bias(const FireParams<T>& p, int64_t q_len, int64_t k_len, T* out, const char* op) {
  validate(p, op);
  require(q_len >= 0 && k_len >= 0, op, "q_len and k_len must be >= 0, got ", q_len, " and ", k_len);
  if (q_len == 0 || k_len == 0) return;
  require(out != nullptr, op, "out must not be null");
  const int64_t shift = k_len - q_len, row_tiles = (q_len + kRows - 1) / kRows;
  const int64_t tasks = p.num_heads * row_tiles;
  const int threads = p.num_heads * q_len * k_len * p.hidden < (int64_t{1} << 16) ? 1 : omp_get_max_threads();
#pragma omp parallel num_threads(threads)
  {
    std::vector<T> scratch(static_cast<size_t>(fire_tile_scratch(kRows, kCols)));
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t h = task / row_tiles, i0 = task % row_tiles * kRows, rows = std::min(kRows, q_len - i0);
      T* base = out + (h * q_len + i0) * k_len;
      std::fill(base, base + rows * k_len, T(0));
      for (int64_t j0 = 0; j0 < k_len; j0 += kCols) {
        fire_tile(p, h, i0 + shift, rows, j0, std::min(kCols, k_len - j0), base + j0, k_len, 1, scratch.data());
      }
    }
  }
}

template <class T>
void fire_bias_backward(const FireParams<T>& p, int64_t q_len, int64_t k_len, const T* grad,
                        const FireGradients<T>& out, const char* op) {
  validate(p, op);
  require(q_len >= 0 && k_len >= 0, op, "q_len and k_len must be >= 0, got ", q_len, " and ", k_len);
  require(out.w1 != nullptr && out.b1 != nullptr && out.w2 != nullptr && out.b2 != nullptr && out.c != nullptr &&
              out.threshold != nullptr,
          op, "the gradient outputs must not be null");
  const bool pairs = q_len > 0 && k_len > 0;
  require(!pairs || grad != nullptr, op, "grad must not be null");
  const int64_t size = fire_gradient_size(p.num_heads, p.hidden), shift = k_len - q_len;
  // One partial per head, each summed in one order: the result does not depend on the threads.
  std::vector<double> partial(static_cast<size_t>(p.num_heads * size), 0.0);
  if (pairs) {
    const int threads = p.num_heads * q_len * k_len * p.hidden < (int64_t{1} << 16) ? 1 : omp_get_max_threads();
#pragma omp parallel num_threads(threads)
    {
      std::vector<T> scratch(static_cast<size_t>(fire_tile_scratch(kRows, kCols)));
#pragma omp for schedule(dynamic, 1)
      for (int64_t h = 0; h < p.num_heads; ++h) {
        double* part = partial.data() + h * size;
        for (int64_t i0 = 0; i0 < q_len; i0 += kRows) {
          const int64_t rows = std::min(kRows, q_len - i0);
          for (int64_t j0 = 0; j0 < k_len; j0 += kCols) {
            fire_tile_backward(p, h, i0 + shift, rows, j0, std::min(kCols, k_len - j0),
                               grad + (h * q_len + i0) * k_len + j0, k_len, 1, part, scratch.data());
          }
        }
      }
    }
  }
  std::vector<double> total(static_cast<size_t>(size), 0.0);
  for (int64_t h = 0; h < p.num_heads; ++h) {
    for (int64_t e = 0; e < size; ++e) total[e] += partial[h * size + e];
  }
  const FireGradients<double> t = fire_gradients(total.data(), p.num_heads, p.hidden);
  const auto put = [](T* dst, const double* src, int64_t n) {
    for (int64_t e = 0; e < n; ++e) dst[e] = static_cast<T>(src[e]);
  };
  put(out.w1, t.w1, p.hidden);
  put(out.b1, t.b1, p.hidden);
  put(out.w2, t.w2, p.num_heads * p.hidden);
  put(out.b2, t.b2, p.num_heads);
  put(out.c, t.c, 1);
  put(out.threshold, t.threshold, 1);
}

template <class T>
FireTileBias<T>::FireTileBias(const FireParams<T>& params, const char* op) : p_(params) {
  validate(p_, op);
}

namespace reference {

template <class T>
void fire_bias(const FireParams<T>& p, int64_t q_len, int64_t k_len, double* out) {
  using R = long double;
  const R c = p.c, L = p.threshold;
  const auto psi = [&](R t) { return std::log(R(1) + c * t); };
  for (int64_t h = 0; h < p.num_heads; ++h) {
    for (int64_t i = 0; i < q_len; ++i) {
      const int64_t ip = i + k_len - q_len;
      for (int64_t j = 0; j < k_len; ++j) {
        R b = 0;
        if (j <= ip) {
          const R x = psi(static_cast<R>(ip - j)) / psi(std::max(L, static_cast<R>(ip)));
          b = p.b2[h];
          for (int64_t k = 0; k < p.hidden; ++k) {
            b += static_cast<R>(p.w2[h * p.hidden + k]) * std::max(R(0), static_cast<R>(p.w1[k]) * x + p.b1[k]);
          }
        }
        out[(h * q_len + i) * k_len + j] = static_cast<double>(b);
      }
    }
  }
}

}  // namespace reference

#define POSENC_INSTANTIATE(T)                                                                                   \
  template void validate<T>(const FireParams<T>&, const char*);                                                \
  template void fire_tile<T>(const FireParams<T>&, int64_t, int64_t, int64_t, int64_t, int64_t, T*, int64_t,   \
                             int64_t, T*) noexcept;                                                             \
  template void fire_tile_backward<T>(const FireParams<T>&, int64_t, int64_t, int64_t, int64_t, int64_t,       \
                                      const T*, int64_t, int64_t, double*, T*) noexcept;                        \
  template void fire_bias<T>(const FireParams<T>&, int64_t, int64_t, T*, const char*);                         \
  template void fire_bias_backward<T>(const FireParams<T>&, int64_t, int64_t, const T*, const FireGradients<T>&, \
                                      const char*);                                                             \
  template FireGradients<T> fire_gradients<T>(T*, int64_t, int64_t) noexcept;                                  \
  template class FireTileBias<T>;                                                                               \
  template void reference::fire_bias<T>(const FireParams<T>&, int64_t, int64_t, double*);
POSENC_INSTANTIATE(float)
POSENC_INSTANTIATE(double)
#undef POSENC_INSTANTIATE

}  // namespace posenc::kernels
