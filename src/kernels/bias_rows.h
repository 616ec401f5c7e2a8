// Internal: what the attention-bias kernels (ALiBi, T5; 1D and 2D) share.
// Every bias depends on the key-query offset only, so each output row is a
// window of one per-head vector over offsets: a task builds the slice of that
// vector its rows reach (a few KB, in L1) and copies windows out. The output
// is written once, with streaming stores when it is large: these kernels run
// at write bandwidth, not at arithmetic speed.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <vector>

#include "posenc/error.h"
#include "posenc/kernels/positions.h"
#include "streaming_copy.h"

namespace posenc::kernels::detail {

// A product of extents: exact when it fits in int64, else approximate (for the message).
struct ExtentProduct {
  int64_t value = 1;
  bool overflow = false;
  double approx = 1.0;
};

inline ExtentProduct extent_product(std::initializer_list<int64_t> factors) noexcept {
  ExtentProduct p;
  for (int64_t f : factors) {
    p.approx *= static_cast<double>(f);
    if (!p.overflow && __builtin_mul_overflow(p.value, f, &p.value)) p.overflow = true;
  }
  if (p.approx == 0.0) p = ExtentProduct{0, false, 0.0};  // a zero extent, whatever overflowed before it
  return p;
}

inline std::ostream& operator<<(std::ostream& s, const ExtentProduct& p) {
  if (p.overflow) return s << p.approx;
  return s << p.value;
}

// Factors already checked >= 0. "[op] the bias must have at most 2^31 values (formula), got N"
inline int64_t require_bias_size(const char* op, const char* formula, std::initializer_list<int64_t> factors) {
  const ExtentProduct p = extent_product(factors);
  require(!p.overflow && p.value <= kMaxTableValues, op, "the bias must have at most 2^31 values (", formula,
          "), got ", p);
  return p.value;
}

// |offset| <= 2^62 keeps key - query - offset inside int64 for any extent below 2^62.
inline void require_query_offset(const char* op, int64_t query_offset) {
  constexpr int64_t kLimit = int64_t{1} << 62;
  require(query_offset >= -kLimit && query_offset <= kLimit, op, "query_offset must be within +-2^62, got ",
          query_offset);
}

// Below this many values one thread is faster than waking a team.
inline constexpr int64_t kBiasParallelValues = int64_t{1} << 16;
// Rows per task: the window slice costs (rows + cols - 1) values for rows * cols outputs.
inline constexpr int64_t kBiasRowBlock = 32;
// Columns per task at most: the slice stays in L1/L2 (16 KiB of float32 at 4096).
inline constexpr int64_t kBiasMaxColTile = 4096;

inline int64_t ceil_div(int64_t a, int64_t b) noexcept { return (a + b - 1) / b; }

// Copies finished rows to the output: streaming stores for a large output
// (it will not be read from cache anyway), plain stores for a small one.
template <class T>
class BiasRowWriter {
 public:
  explicit BiasRowWriter(int64_t total_values) noexcept
      : streaming_(total_values * static_cast<int64_t>(sizeof(T)) >= kStreamingBytes) {}
  ~BiasRowWriter() {
    if (streaming_) streaming_fence();
  }
  BiasRowWriter(const BiasRowWriter&) = delete;
  BiasRowWriter& operator=(const BiasRowWriter&) = delete;

  bool streaming() const noexcept { return streaming_; }
  void put(const T* src, T* dst, int64_t n) const noexcept {
    if (streaming_) {
      copy_streaming(src, dst, n);
    } else {
      std::copy(src, src + n, dst);
    }
  }

 private:
  bool streaming_;
};

// How fill_shifted_rows cuts [heads, q_len, k_len] into tasks; the backward
// kernels walk the same tiles so their sums do not depend on the thread count.
struct ShiftedTiling {
  int64_t row_blocks = 0, col_tiles = 0, col_tile = 0;

  ShiftedTiling(int64_t q_len, int64_t k_len) noexcept {
    row_blocks = ceil_div(q_len, kBiasRowBlock);
    col_tiles = ceil_div(k_len, kBiasMaxColTile);
    // Balanced tiles, a multiple of 16 values so tile starts stay 64-byte aligned in aligned rows.
    col_tile = col_tiles == 0 ? 0 : std::min(k_len, (ceil_div(k_len, col_tiles) + 15) / 16 * 16);
  }
  int64_t window_capacity() const noexcept { return kBiasRowBlock + col_tile - 1; }
};

// out[h, i, j] = v_h(j - i - query_offset) for h < heads, i < q_len, j < k_len
// ([heads, q_len, k_len] contiguous). fill(h, o_first, n, dst) writes
// dst[t] = v_h(o_first + t) for t < n; it must not throw. Row i of a block
// [i0, i1) starts at window position i1 - 1 - i.
template <class T, class Fill>
void fill_shifted_rows(int64_t heads, int64_t q_len, int64_t k_len, int64_t query_offset, T* out, const Fill& fill) {
  if (heads == 0 || q_len == 0 || k_len == 0) return;
  const ShiftedTiling tiling(q_len, k_len);
  const int64_t tasks_per_head = tiling.row_blocks * tiling.col_tiles;
  const int64_t tasks = heads * tasks_per_head;
  const int64_t total = heads * q_len * k_len;
  const int64_t capacity = tiling.window_capacity();
  // Scratch allocated here, where a failure can still throw to the caller.
  std::vector<T> windows(static_cast<size_t>(omp_get_max_threads() * capacity));
#pragma omp parallel if (total > kBiasParallelValues)
  {
    T* window = windows.data() + omp_get_thread_num() * capacity;
    BiasRowWriter<T> writer(total);
#pragma omp for schedule(static)
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t h = task / tasks_per_head;
      const int64_t rb = task % tasks_per_head / tiling.col_tiles;
      const int64_t ct = task % tiling.col_tiles;
      const int64_t i0 = rb * kBiasRowBlock, i1 = std::min(q_len, i0 + kBiasRowBlock);
      const int64_t j0 = ct * tiling.col_tile, j1 = std::min(k_len, j0 + tiling.col_tile);
      fill(h, j0 - (i1 - 1) - query_offset, (j1 - j0) + (i1 - i0) - 1, window);
      T* head_out = out + h * q_len * k_len;
      for (int64_t i = i0; i < i1; ++i) writer.put(window + (i1 - 1 - i), head_out + i * k_len + j0, j1 - j0);
    }
  }
}

// out[h, (y,x), (y',x')] = v_h(y' - y, x' - x) on a height x width grid
// flattened as y*W + x ([heads, HW, HW] contiguous). fill(h, y, strip) writes
// strip[y' * (2W-1) + dx + W-1] = v_h(y' - y, dx) for y' < H, |dx| < W; it
// must not throw. A task is one (head, query row y): W output rows.
template <class T, class Fill>
void fill_grid_rows(int64_t heads, int64_t height, int64_t width, T* out, const Fill& fill) {
  const int64_t hw = height * width;
  const int64_t span = 2 * width - 1;
  const int64_t total = heads * hw * hw;
  const int64_t capacity = height * span + hw;  // strip + staging row
  std::vector<T> scratch(static_cast<size_t>(omp_get_max_threads() * capacity));
#pragma omp parallel if (total > kBiasParallelValues)
  {
    T* strip = scratch.data() + omp_get_thread_num() * capacity;
    T* staging = strip + height * span;
    BiasRowWriter<T> writer(total);
#pragma omp for schedule(static)
    for (int64_t task = 0; task < heads * height; ++task) {
      const int64_t h = task / height, y = task % height;
      fill(h, y, strip);
      for (int64_t x = 0; x < width; ++x) {
        T* out_row = out + (h * hw + y * width + x) * hw;
        // Small rows go straight out; large outputs are staged and streamed whole.
        T* row = writer.streaming() ? staging : out_row;
        for (int64_t yk = 0; yk < height; ++yk) {
          const T* src = strip + yk * span + (width - 1 - x);
          std::copy(src, src + width, row + yk * width);
        }
        if (writer.streaming()) writer.put(staging, out_row, hw);
      }
    }
  }
}

}  // namespace posenc::kernels::detail
