// A (batch, heads) stack of row-major matrices with unit column stride: the
// shape of q, k, attention logits and probabilities, (B, H, rows, cols).
// Batch, head and row strides are free, so non-contiguous torch views (a
// transposed (B, T, H, D) projection, a slice) need no copy.
#pragma once

#include <cstdint>

namespace posenc::kernels {

template <class T>
struct BatchedMatrix {
  T* data = nullptr;
  int64_t batch = 1, heads = 1, rows = 0, cols = 0;
  int64_t stride_b = 0, stride_h = 0, stride_r = 0;  // in elements

  T* row(int64_t b, int64_t h, int64_t r) const noexcept { return data + b * stride_b + h * stride_h + r * stride_r; }
};

// A contiguous (batch, heads, rows, cols) array.
template <class T>
BatchedMatrix<T> contiguous_matrix(T* data, int64_t batch, int64_t heads, int64_t rows, int64_t cols) noexcept {
  return {data, batch, heads, rows, cols, heads * rows * cols, rows * cols, cols};
}

}  // namespace posenc::kernels
