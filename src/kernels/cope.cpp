// CoPE (formula, layouts and gradients in posenc/kernels/cope.h).
//
// Everything is row by row: a query row's gates over its keys j <= i', their
// reverse cumulative sum (in double, so a float row of thousands of gates
// keeps its positions to float precision) and z = q . e, O((Tk + npos) Dh)
// work and O(Tk + npos) memory; the dense ops, the fused term and the
// backward share the row routines below.
#include "posenc/kernels/cope.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "attention_simd.h"
#include "posenc/error.h"
#include "small_gemm.h"

namespace posenc::kernels {
namespace {

// Where a position falls between the table's rows: P = min(p, npos - 1),
// b = (1 - w) z[f] + w z[c]. NaN p gives w NaN (and rows 0).
template <class T>
struct Slot {
  int64_t f = 0, c = 0;
  T w = 0;
  bool clamped = false;  // p >= npos - 1: no gradient through p
};

template <class T>
Slot<T> slot_of(T p, int64_t npos) noexcept {
  const T top = static_cast<T>(npos - 1);
  Slot<T> s;
  if (!(p == p)) {
    s.w = p;
    return s;
  }
  s.clamped = !(p < top);
  const T pc = s.clamped ? top : p;
  s.f = static_cast<int64_t>(std::floor(pc));
  s.w = pc - static_cast<T>(s.f);
  s.c = s.w > 0 ? s.f + 1 : s.f;
  return s;
}

template <class T>
T interpolate(const T* z, const Slot<T>& s) noexcept {
  return (T(1) - s.w) * z[s.f] + s.w * z[s.c];
}

// One pair's gradient G into the row's A (npos) and dp.
template <class T>
void pair_gradient(const T* z, T p, int64_t npos, T grad, T* a, T& dp) noexcept {
  const Slot<T> s = slot_of(p, npos);
  a[s.f] += grad * (T(1) - s.w);
  a[s.c] += grad * s.w;
  dp = s.clamped ? T(0) : grad * (z[s.c] - z[s.f]);
}

// The end of a row's backward: dp (overwritten by r_t) and A into dq (+=),
// dk (+=, key t at dk + t * ldd) and de (+= in double); each may be null.
template <class T>
void row_finish(const CopeParams<T>& prm, const T* q, const T* k, int64_t ldk, int64_t last, const T* g, T* dp,
                const T* a, T* dq, T* dk, int64_t ldd, double* de) noexcept {
  const int64_t dh = prm.head_dim, npos = prm.npos;
  const T scale = static_cast<T>(prm.scale);
  T acc = 0;
  for (int64_t t = 0; t <= last; ++t) {  // dg_t = sum_{j <= t} dp_j, then through the sigmoid
    acc += dp[t];
    dp[t] = scale * acc * g[t] * (T(1) - g[t]);
  }
  if (dq != nullptr) {
    for (int64_t t = 0; t < npos; ++t) {
      const T at = a[t];
      if (at == T(0)) continue;
      const T* et = prm.e + t * dh;
      for (int64_t d = 0; d < dh; ++d) dq[d] += at * et[d];
    }
    for (int64_t t = 0; t <= last; ++t) {
      const T r = dp[t];
      if (r == T(0)) continue;
      const T* kt = k + t * ldk;
      for (int64_t d = 0; d < dh; ++d) dq[d] += r * kt[d];
    }
  }
  if (dk != nullptr) {
    for (int64_t t = 0; t <= last; ++t) {
      const T r = dp[t];
      if (r == T(0)) continue;
      T* kt = dk + t * ldd;
      for (int64_t d = 0; d < dh; ++d) kt[d] += r * q[d];
    }
  }
  if (de != nullptr) {
    for (int64_t t = 0; t < npos; ++t) {
      const double at = a[t];
      if (at == 0.0) continue;
      double* et = de + t * dh;
      for (int64_t d = 0; d < dh; ++d) et[d] += at * static_cast<double>(q[d]);
    }
  }
}

template <class T>
const uint8_t* padding_row(const CopeParams<T>& p, int64_t b) noexcept {
  return p.key_padding != nullptr ? p.key_padding + b * p.key_padding_stride : nullptr;
}

template <class T>
void check_shapes(const CopeParams<T>& p, const BatchedMatrix<const T>& q, const BatchedMatrix<const T>& k,
                  const char* op) {
  validate(p, op);
  require(q.batch >= 0 && q.heads >= 0 && q.rows >= 0 && q.cols == p.head_dim, op,
          "q must be (B, H, Tq, Dh) with Dh = head_dim = ", p.head_dim, ", got (", q.batch, ", ", q.heads, ", ",
          q.rows, ", ", q.cols, ")");
  require(k.batch == q.batch && k.heads == q.heads && k.cols == q.cols && k.rows >= 0, op,
          "k must be (B, H, Tk, Dh) = (", q.batch, ", ", q.heads, ", *, ", q.cols, ") like q, got (", k.batch, ", ",
          k.heads, ", ", k.rows, ", ", k.cols, ")");
  require(q.rows <= k.rows, op, "CoPE is causal and needs q_len <= k_len, got q_len ", q.rows, " and k_len ",
          k.rows);
  const bool empty = q.batch == 0 || q.heads == 0 || q.rows == 0;
  require(empty || (q.data != nullptr && k.data != nullptr), op, "q and k must have data, got null");
}

}  // namespace

template <class T>
void validate(const CopeParams<T>& p, const char* op) {
  require(p.npos >= 1, op, "npos must be >= 1, got ", p.npos);
  require(p.head_dim >= 1, op, "head_dim must be >= 1, got ", p.head_dim);
  require(std::isfinite(p.scale) && p.scale > 0, op, "scale must be finite and > 0, got ", p.scale);
  require(p.e != nullptr, op, "e must not be null");
}

template <class T>
void cope_row(const CopeParams<T>& prm, const T* q, const T* k, int64_t ldk, const uint8_t* pad, int64_t last,
              T* g, T* p, T* z) noexcept {
  const int64_t dh = prm.head_dim;
  const T scale = static_cast<T>(prm.scale);
  for (int64_t j = 0; j <= last; ++j) {
    // A padded key is masked before the sigmoid in the paper's code: it counts 0. Every caller (the
    // forward and the backward's recomputed gates) takes this dot product, so they agree to the bit.
    if (pad != nullptr && pad[j] != 0) {
      g[j] = T(0);
      continue;
    }
    g[j] = T(1) / (T(1) + std::exp(-scale * detail::lane_dot(q, k + j * ldk, dh)));
  }
  double acc = 0;
  for (int64_t j = last; j >= 0; --j) {
    acc += static_cast<double>(g[j]);
    p[j] = static_cast<T>(acc);
  }
  for (int64_t t = 0; t < prm.npos; ++t) z[t] = detail::lane_dot(q, prm.e + t * dh, dh);
}

template <class T>
void cope_bias(const CopeParams<T>& prm, BatchedMatrix<const T> q, BatchedMatrix<const T> k, T* out,
               const char* op) {
  check_shapes(prm, q, k, op);
  const int64_t nb = q.batch, nh = q.heads, tq = q.rows, tk = k.rows, npos = prm.npos;
  if (nb == 0 || nh == 0 || tq == 0) return;
  require(out != nullptr, op, "out must not be null");
#pragma omp parallel
  {
    std::vector<T> g(static_cast<size_t>(tk)), p(static_cast<size_t>(tk)), z(static_cast<size_t>(npos));
#pragma omp for schedule(dynamic, 1)
    for (int64_t bh = 0; bh < nb * nh; ++bh) {
      const int64_t b = bh / nh, h = bh % nh;
      for (int64_t i = 0; i < tq; ++i) {
        const int64_t ip = i + tk - tq;
        cope_row(prm, q.row(b, h, i), k.row(b, h, 0), k.stride_r, padding_row(prm, b), ip, g.data(), p.data(),
                 z.data());
        T* o = out + (bh * tq + i) * tk;
        for (int64_t j = 0; j <= ip; ++j) o[j] = interpolate(z.data(), slot_of(p[j], npos));
        std::fill(o + ip + 1, o + tk, T(0));
      }
    }
  }
}

template <class T>
void cope_bias_backward(const CopeParams<T>& prm, BatchedMatrix<const T> q, BatchedMatrix<const T> k,
                        const T* grad, BatchedMatrix<T> dq, BatchedMatrix<T> dk, T* de, const char* op) {
  check_shapes(prm, q, k, op);
  const int64_t nb = q.batch, nh = q.heads, tq = q.rows, tk = k.rows, npos = prm.npos, dh = prm.head_dim;
  const auto like = [&](const char* name, const BatchedMatrix<T>& g, const BatchedMatrix<const T>& x) {
    require(g.data == nullptr || (g.batch == x.batch && g.heads == x.heads && g.rows == x.rows && g.cols == x.cols),
            op, "the gradient of ", name, " must be (", x.batch, ", ", x.heads, ", ", x.rows, ", ", x.cols,
            "), got (", g.batch, ", ", g.heads, ", ", g.rows, ", ", g.cols, ")");
  };
  like("q", dq, q);
  like("k", dk, k);
  for (const auto& [m, rows] : {std::pair{&dq, tq}, std::pair{&dk, tk}}) {
    if (m->data == nullptr) continue;
    for (int64_t b = 0; b < nb; ++b)
      for (int64_t h = 0; h < nh; ++h)
        for (int64_t r = 0; r < rows; ++r) std::fill_n(m->row(b, h, r), dh, T(0));
  }
  if (de != nullptr) std::fill_n(de, npos * dh, T(0));
  if (nb == 0 || nh == 0 || tq == 0) return;
  require(grad != nullptr, op, "grad must not be null");
  // One task per head (its batches in order): dk rows have one writer, de one partial per head.
  std::vector<double> partial(de != nullptr ? static_cast<size_t>(nh * npos * dh) : 0, 0.0);
#pragma omp parallel
  {
    std::vector<T> g(static_cast<size_t>(tk)), p(static_cast<size_t>(tk)), dp(static_cast<size_t>(tk));
    std::vector<T> z(static_cast<size_t>(npos)), a(static_cast<size_t>(npos));
#pragma omp for schedule(dynamic, 1)
    for (int64_t h = 0; h < nh; ++h) {
      double* part = de != nullptr ? partial.data() + h * npos * dh : nullptr;
      for (int64_t b = 0; b < nb; ++b) {
        const T* kb = k.row(b, h, 0);
        for (int64_t i = 0; i < tq; ++i) {
          const int64_t ip = i + tk - tq;
          const T* qi = q.row(b, h, i);
          cope_row(prm, qi, kb, k.stride_r, padding_row(prm, b), ip, g.data(), p.data(), z.data());
          std::fill(a.begin(), a.end(), T(0));
          const T* gr = grad + ((b * nh + h) * tq + i) * tk;
          for (int64_t j = 0; j <= ip; ++j) pair_gradient(z.data(), p[j], npos, gr[j], a.data(), dp[j]);
          row_finish(prm, qi, kb, k.stride_r, ip, g.data(), dp.data(), a.data(),
                     dq.data != nullptr ? dq.row(b, h, i) : nullptr, dk.data != nullptr ? dk.row(b, h, 0) : nullptr,
                     dk.stride_r, part);
        }
      }
    }
  }
  if (de != nullptr) {
    for (int64_t x = 0; x < npos * dh; ++x) {
      double s = 0;
      for (int64_t h = 0; h < nh; ++h) s += partial[h * npos * dh + x];
      de[x] = static_cast<T>(s);
    }
  }
}

// ---- the fused attention's term. Scratch per row: g, p, dp [Tk], z, A [npos].

template <class T>
CopeTileBias<T>::CopeTileBias(const CopeParams<T>& params, BatchedMatrix<const T> q, BatchedMatrix<const T> k,
                              const char* op)
    : p_(params), q_(q), k_(k) {
  check_shapes(p_, q_, k_, op);
}

template <class T>
int64_t CopeTileBias<T>::row_size() const noexcept {
  return 3 * k_.rows + 2 * p_.npos;
}

template <class T>
int64_t CopeTileBias<T>::scratch_size(int64_t rows, int64_t /*cols*/) const noexcept {
  return rows * row_size();
}

template <class T>
void CopeTileBias<T>::begin_rows(int64_t batch, int64_t head, int64_t row0, int64_t rows,
                                 T* scratch) const noexcept {
  const int64_t tk = k_.rows, shift = k_.rows - q_.rows;
  for (int64_t r = 0; r < rows; ++r) {
    T* g = scratch + r * row_size();
    T *p = g + tk, *dp = p + tk, *z = dp + tk, *a = z + p_.npos;
    const int64_t ip = row0 + r;
    cope_row(p_, q_.row(batch, head, ip - shift), k_.row(batch, head, 0), k_.stride_r, padding_row(p_, batch), ip, g,
             p, z);
    std::fill(dp, dp + tk, T(0));
    std::fill(a, a + p_.npos, T(0));
  }
}

template <class T>
void CopeTileBias<T>::add(int64_t, int64_t, int64_t row0, int64_t rows, int64_t col0, int64_t cols, T* s,
                          int64_t stride_r, int64_t stride_n, T* scratch) const noexcept {
  const int64_t tk = k_.rows;
  for (int64_t r = 0; r < rows; ++r) {
    const T* p = scratch + r * row_size() + tk;
    const T* z = p + 2 * tk;
    const int64_t end = std::min(col0 + cols, row0 + r + 1);  // keys j <= i'
    for (int64_t j = col0; j < end; ++j) s[r * stride_r + (j - col0) * stride_n] += interpolate(z, slot_of(p[j], p_.npos));
  }
}

template <class T>
void CopeTileBias<T>::accumulate_gradient(int64_t, int64_t, int64_t row0, int64_t rows, int64_t col0, int64_t cols,
                                          const T* ds, int64_t stride_r, int64_t stride_n, double*,
                                          T* scratch) const noexcept {
  const int64_t tk = k_.rows;
  for (int64_t r = 0; r < rows; ++r) {
    T* p = scratch + r * row_size() + tk;
    T *dp = p + tk, *z = dp + tk, *a = z + p_.npos;
    const int64_t end = std::min(col0 + cols, row0 + r + 1);
    for (int64_t j = col0; j < end; ++j) pair_gradient(z, p[j], p_.npos, ds[r * stride_r + (j - col0) * stride_n], a, dp[j]);
  }
}

template <class T>
void CopeTileBias<T>::finish_rows(int64_t batch, int64_t head, int64_t row0, int64_t rows, T* dq, int64_t dq_stride,
                                  T* dk, int64_t dk_stride, double* partial, T* scratch) const noexcept {
  const int64_t tk = k_.rows, shift = k_.rows - q_.rows;
  for (int64_t r = 0; r < rows; ++r) {
    T* g = scratch + r * row_size();
    T *dp = g + 2 * tk, *a = dp + tk + p_.npos;
    const int64_t ip = row0 + r;
    row_finish(p_, q_.row(batch, head, ip - shift), k_.row(batch, head, 0), k_.stride_r, ip, g, dp, a,
               dq != nullptr ? dq + r * dq_stride : nullptr, dk, dk_stride, partial);
  }
}

namespace reference {

template <class T>
void cope_bias(const CopeParams<T>& prm, BatchedMatrix<const T> q, BatchedMatrix<const T> k, double* out) {
  using L = long double;
  const int64_t nb = q.batch, nh = q.heads, tq = q.rows, tk = k.rows, dh = prm.head_dim, npos = prm.npos;
  std::vector<L> g(static_cast<size_t>(tk));
  for (int64_t b = 0; b < nb; ++b) {
    for (int64_t h = 0; h < nh; ++h) {
      for (int64_t i = 0; i < tq; ++i) {
        const int64_t ip = i + tk - tq;
        const T* qi = q.row(b, h, i);
        for (int64_t j = 0; j < tk; ++j) {
          L s = 0;
          for (int64_t d = 0; d < dh; ++d) s += static_cast<L>(qi[d]) * k.row(b, h, j)[d];
          const bool pad = prm.key_padding != nullptr && prm.key_padding[b * prm.key_padding_stride + j] != 0;
          g[static_cast<size_t>(j)] = pad ? 0.0L : 1.0L / (1.0L + std::exp(-static_cast<L>(prm.scale) * s));
        }
        for (int64_t j = 0; j < tk; ++j) {
          double& o = out[((b * nh + h) * tq + i) * tk + j];
          if (j > ip) {
            o = 0.0;
            continue;
          }
          L p = 0;
          for (int64_t t = j; t <= ip; ++t) p += g[static_cast<size_t>(t)];
          p = std::min(p, static_cast<L>(npos - 1));
          const L lo = std::floor(p), hi = std::ceil(p), w = p - lo;
          const auto z = [&](L t) {
            L s = 0;
            for (int64_t d = 0; d < dh; ++d) s += static_cast<L>(qi[d]) * prm.e[static_cast<int64_t>(t) * dh + d];
            return s;
          };
          o = static_cast<double>(z(hi) * w + z(lo) * (1.0L - w));
        }
      }
    }
  }
}

template void cope_bias<float>(const CopeParams<float>&, BatchedMatrix<const float>, BatchedMatrix<const float>,
                               double*);
template void cope_bias<double>(const CopeParams<double>&, BatchedMatrix<const double>,
                                BatchedMatrix<const double>, double*);

}  // namespace reference

#define POSENC_COPE(T)                                                                                            \
  template void validate<T>(const CopeParams<T>&, const char*);                                                   \
  template void cope_row<T>(const CopeParams<T>&, const T*, const T*, int64_t, const uint8_t*, int64_t, T*, T*,  \
                            T*) noexcept;                                                                         \
  template void cope_bias<T>(const CopeParams<T>&, BatchedMatrix<const T>, BatchedMatrix<const T>, T*,           \
                             const char*);                                                                        \
  template void cope_bias_backward<T>(const CopeParams<T>&, BatchedMatrix<const T>, BatchedMatrix<const T>,      \
                                      const T*, BatchedMatrix<T>, BatchedMatrix<T>, T*, const char*);             \
  template class CopeTileBias<T>;
POSENC_COPE(float)
POSENC_COPE(double)
#undef POSENC_COPE

}  // namespace posenc::kernels
