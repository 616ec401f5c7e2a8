// Strided test tensors for the kernels that take BatchedMatrix views: a
// (B, H, rows, cols) view over storage that may have padding. Entries
// outside the view hold kPad, so a kernel reading them (wrong or NaN
// results) or writing them (changed padding) is caught.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "posenc/kernels/batched_matrix.h"

namespace posenc::test {

using kernels::BatchedMatrix;

enum class Layout {
  kContiguous,
  kPadded,      // rows padded by 3, heads by 5, batches by 7 elements
  kTokenMajor,  // stored (B, rows, H, cols + 1), viewed (B, H, rows, cols): a transposed projection
};

template <class T>
constexpr T kPad = T(-777.25);

template <class T>
struct Tensor {
  std::vector<T> store;
  BatchedMatrix<T> view;
  std::vector<bool> inside;

  T& at(int64_t b, int64_t h, int64_t r, int64_t c) { return view.row(b, h, r)[c]; }
  T at(int64_t b, int64_t h, int64_t r, int64_t c) const { return view.row(b, h, r)[c]; }
  BatchedMatrix<const T> in() const {
    return {view.data, view.batch, view.heads, view.rows, view.cols, view.stride_b, view.stride_h, view.stride_r};
  }
  int64_t changed_padding() const {
    int64_t n = 0;
    for (size_t e = 0; e < store.size(); ++e) n += !inside[e] && std::memcmp(&store[e], &kPad<T>, sizeof(T)) != 0;
    return n;
  }
};

template <class T>
Tensor<T> make_tensor(int64_t nb, int64_t nh, int64_t rows, int64_t cols, Layout layout) {
  int64_t sb = 0, sh = 0, sr = 0;
  switch (layout) {
    case Layout::kContiguous: sr = cols, sh = rows * cols, sb = nh * rows * cols; break;
    case Layout::kPadded: sr = cols + 3, sh = rows * sr + 5, sb = nh * sh + 7; break;
    case Layout::kTokenMajor: sh = cols + 1, sr = nh * sh, sb = rows * sr; break;
  }
  Tensor<T> t;
  t.store.assign(static_cast<size_t>(std::max<int64_t>(nb * sb, 1)), kPad<T>);
  t.view = {t.store.data(), nb, nh, rows, cols, sb, sh, sr};
  t.inside.assign(t.store.size(), false);
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t h = 0; h < nh; ++h)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) t.inside[static_cast<size_t>(&t.at(b, h, r, c) - t.store.data())] = true;
  return t;
}

template <class T>
void fill(Tensor<T>& t, std::mt19937_64& rng, double lo, double hi) {
  std::uniform_real_distribution<double> u(lo, hi);
  for (size_t n = 0; n < t.store.size(); ++n)
    if (t.inside[n]) t.store[n] = static_cast<T>(u(rng));
}
template <class T>
void poison(Tensor<T>& t) {
  for (size_t n = 0; n < t.store.size(); ++n)
    if (t.inside[n]) t.store[n] = std::numeric_limits<T>::quiet_NaN();
}
template <class T>
std::vector<T> random_values(int64_t n, std::mt19937_64& rng, double lo = -1.0, double hi = 1.0) {
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<T> v(static_cast<size_t>(n));
  for (auto& e : v) e = static_cast<T>(u(rng));
  return v;
}

template <class T>
int64_t changed_padding(const Tensor<T>& t) {
  return t.changed_padding();
}

}  // namespace posenc::test
