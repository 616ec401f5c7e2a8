// The RoPE rotation: one pass over x, row by row (batch, head, position). A
// row reads its position's R/2 cos/sin (a table row shared by every head, so
// it stays in cache), rotates its pairs and writes them back:
//   (a, b) -> (a c - b s, b c + a s), s negated for the inverse.
// float32 math (double for double), rounded once to T. 16-bit rows are
// widened a chunk at a time so that every inner loop vectorizes.
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "posenc/error.h"
#include "posenc/kernels/rope.h"
#include "rope_simd.h"

namespace posenc::kernels {

void validate(const RopeApplyParams& params, const char* op) {
  require(params.head_dim >= 1, op, "head_dim must be positive, got ", params.head_dim);
  require(params.rotary_dim % 2 == 0, op, "rotary_dim must be even, got ", params.rotary_dim);
  require(params.rotary_dim >= 2, op, "rotary_dim must be at least 2, got ", params.rotary_dim);
  require(params.rotary_dim <= params.head_dim, op, "rotary_dim must be at most head_dim (", params.head_dim, "), got ",
          params.rotary_dim);
  require(params.layout == RopeLayout::kHalf || params.layout == RopeLayout::kInterleaved, op,
          "layout must be half or interleaved, got ", static_cast<int>(params.layout));
}

namespace {

using detail::narrow;
using detail::widen;

// Pairs per chunk of a 16-bit row: the widened chunk (2 x 64 floats) stays in registers / L1.
constexpr int64_t kChunk = 64;
// Positions per tile (a 16 KiB cos/sin tile for R = 128 in float32, in L1) and
// heads rotated together per table row; both measured on (1, 32, 4096, 128).
constexpr int64_t kTile = 32;
constexpr int64_t kGroup = 4;
// Below this many rotated values per call, threads cost more than they save.
constexpr int64_t kParallelThreshold = int64_t{1} << 15;

// Half layout: pair j is (a[j], b[j]). Iterations touch disjoint elements, so
// `omp simd` is right even in place (a_out == a_in).
template <bool kInverse, class M>
[[gnu::always_inline]] inline void rotate_pairs(const M* a_in, const M* b_in, M* a_out, M* b_out, const M* c,
                                                const M* s, int64_t n) noexcept {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) {
    const M a = a_in[j];
    const M b = b_in[j];
    const M sj = kInverse ? -s[j] : s[j];
    a_out[j] = a * c[j] - b * sj;
    b_out[j] = b * c[j] + a * sj;
  }
}

// Interleaved layout: pair j is (x[2j], x[2j+1]).
template <bool kInverse, class M>
[[gnu::always_inline]] inline void rotate_interleaved(const M* in, M* out, const M* c, const M* s, int64_t n) noexcept {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) {
    const M a = in[2 * j];
    const M b = in[2 * j + 1];
    const M sj = kInverse ? -s[j] : s[j];
    out[2 * j] = a * c[j] - b * sj;
    out[2 * j + 1] = b * c[j] + a * sj;
  }
}

// Rotates the first 2*half channels of one row. M is the math type (= C).
template <bool kInverse, RopeLayout kLayout, class T, class M>
[[gnu::always_inline]] inline void rotate_row(const T* in, T* out, const M* c, const M* s, int64_t half) noexcept {
  if constexpr (std::is_same_v<T, M>) {
    if constexpr (kLayout == RopeLayout::kHalf) {
      rotate_pairs<kInverse>(in, in + half, out, out + half, c, s, half);
    } else {
      rotate_interleaved<kInverse>(in, out, c, s, half);
    }
  } else {
    alignas(64) float buf[2 * kChunk];
    for (int64_t j0 = 0; j0 < half; j0 += kChunk) {
      const int64_t n = std::min(kChunk, half - j0);
      if constexpr (kLayout == RopeLayout::kHalf) {
        widen(in + j0, buf, n);
        widen(in + half + j0, buf + kChunk, n);
        rotate_pairs<kInverse>(buf, buf + kChunk, buf, buf + kChunk, c + j0, s + j0, n);
        narrow(buf, out + j0, n);
        narrow(buf + kChunk, out + half + j0, n);
      } else {
        widen(in + 2 * j0, buf, 2 * n);
        rotate_interleaved<kInverse>(buf, buf, c + j0, s + j0, n);
        narrow(buf, out + 2 * j0, 2 * n);
      }
    }
  }
}

template <class T>
int64_t row_offset(const RopeView<T>& v, int64_t b, int64_t h, int64_t t) noexcept {
  return b * v.stride_b + h * v.stride_h + t * v.stride_t;
}

// Rows t0 .. t0+rows-1 of `group` heads (up to kGroup): consecutive table
// rows, each cos/sin row loaded once for the group. kHalf > 0 fixes R/2 at
// compile time (the common head sizes) so the row loop unrolls.
// rest: channels R..D-1 to copy (0 in place).
template <bool kInverse, RopeLayout kLayout, int64_t kHalf, class T, class M>
void rotate_run(const T* src, int64_t src_stride, int64_t src_head, T* dst, int64_t dst_stride, int64_t dst_head,
                int64_t group, const M* __restrict cos, const M* __restrict sin, int64_t half_dynamic, int64_t rows,
                int64_t rest) noexcept {
  const int64_t half = kHalf > 0 ? kHalf : half_dynamic;
  for (int64_t r = 0; r < rows; ++r) {
    if (group == kGroup) {  // the common case, unrolled
      for (int64_t g = 0; g < kGroup; ++g) {
        rotate_row<kInverse, kLayout>(src + g * src_head, dst + g * dst_head, cos, sin, half);
      }
    } else {
      for (int64_t g = 0; g < group; ++g) {
        rotate_row<kInverse, kLayout>(src + g * src_head, dst + g * dst_head, cos, sin, half);
      }
    }
    if (rest > 0) {
      for (int64_t g = 0; g < group; ++g) {
        std::copy(src + g * src_head + 2 * half, src + g * src_head + 2 * half + rest, dst + g * dst_head + 2 * half);
      }
    }
    src += src_stride;
    dst += dst_stride;
    cos += half;
    sin += half;
  }
}

template <bool kInverse, RopeLayout kLayout, class T, class M>
using RunFn = decltype(&rotate_run<kInverse, kLayout, 0, T, M>);

template <bool kInverse, RopeLayout kLayout, class T, class M>
RunFn<kInverse, kLayout, T, M> pick_run(int64_t half) noexcept {
  switch (half) {
    case 16: return &rotate_run<kInverse, kLayout, 16, T, M>;
    case 32: return &rotate_run<kInverse, kLayout, 32, T, M>;
    case 64: return &rotate_run<kInverse, kLayout, 64, T, M>;
    default: return &rotate_run<kInverse, kLayout, 0, T, M>;
  }
}

template <bool kInverse, RopeLayout kLayout, class T, class C>
void apply_rows(const RopeApplyParams& params, RopeView<const T> in, RopeView<T> out, const C* cos, const C* sin,
                int64_t cos_batch) noexcept {
  const int64_t half = params.rotary_dim / 2;
  const int64_t rest = in.data == out.data ? 0 : params.head_dim - params.rotary_dim;
  const int64_t batch = in.batch, heads = in.heads, seq = in.seq;
  const auto run = pick_run<kInverse, kLayout, T, C>(half);
  // Positions in tiles, every head of a tile before the next: the tile's
  // cos/sin stay in L1/L2 while each head streams a contiguous block of x.
  const int64_t tile = kTile;
  const int64_t tiles = (seq + tile - 1) / tile;
  const int64_t head_groups = (heads + kGroup - 1) / kGroup;
#pragma omp parallel for collapse(3) schedule(static) if (batch * heads * seq * half > kParallelThreshold)
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t k = 0; k < tiles; ++k) {
      for (int64_t hg = 0; hg < head_groups; ++hg) {
        const int64_t h = hg * kGroup;
        const int64_t t0 = k * tile;
        const int64_t table_row = ((cos_batch == 1 ? 0 : b) * seq + t0) * half;
        run(in.data + row_offset(in, b, h, t0), in.stride_t, in.stride_h, out.data + row_offset(out, b, h, t0),
            out.stride_t, out.stride_h, std::min(kGroup, heads - h), cos + table_row, sin + table_row, half,
            std::min(tile, seq - t0), rest);
      }
    }
  }
}

template <class T, class U>
void check_views(const RopeView<T>& a, const char* a_name, const RopeView<U>& b, const char* b_name, int64_t cos_batch,
                 bool tables_given) {
  require(a.batch >= 0 && a.heads >= 0 && a.seq >= 0, "rope", a_name, " sizes must be >= 0, got (", a.batch, ", ",
          a.heads, ", ", a.seq, ")");
  require(a.batch == b.batch && a.heads == b.heads && a.seq == b.seq, "rope", b_name, " must have the shape of ",
          a_name, " (", a.batch, ", ", a.heads, ", ", a.seq, "), got (", b.batch, ", ", b.heads, ", ", b.seq, ")");
  require(cos_batch == 1 || cos_batch == a.batch, "rope", "cos_batch must be 1 or batch (", a.batch, "), got ",
          cos_batch);
  if (a.batch * a.heads * a.seq == 0) return;
  require(a.data != nullptr && b.data != nullptr, "rope", a_name, " and ", b_name, " data must not be null");
  require(tables_given, "rope", "cos and sin must not be null");
}

template <bool kInverse, class T, class C>
void dispatch_layout(const RopeApplyParams& params, RopeView<const T> in, RopeView<T> out, const C* cos, const C* sin,
                     int64_t cos_batch) {
  if (params.layout == RopeLayout::kHalf) {
    apply_rows<kInverse, RopeLayout::kHalf>(params, in, out, cos, sin, cos_batch);
  } else {
    apply_rows<kInverse, RopeLayout::kInterleaved>(params, in, out, cos, sin, cos_batch);
  }
}

// One row's pairs widened to the math type: (a[j], b[j]), j < half.
template <class T, class M>
void load_pairs(const T* row, RopeLayout layout, int64_t half, M* a, M* b) noexcept {
  if (layout == RopeLayout::kHalf) {
    for (int64_t j = 0; j < half; ++j) {
      a[j] = widen(row[j]);
      b[j] = widen(row[half + j]);
    }
  } else {
    for (int64_t j = 0; j < half; ++j) {
      a[j] = widen(row[2 * j]);
      b[j] = widen(row[2 * j + 1]);
    }
  }
}

}  // namespace

template <class T, class C>
void rope_apply(const RopeApplyParams& params, RopeView<const T> in, RopeView<T> out, const C* cos, const C* sin,
                int64_t cos_batch) {
  validate(params);
  check_views(in, "in", out, "out", cos_batch, cos != nullptr && sin != nullptr);
  if (in.data == out.data) {
    require(in.stride_b == out.stride_b && in.stride_h == out.stride_h && in.stride_t == out.stride_t, "rope",
            "in place (in and out share data) needs equal strides");
  }
  if (in.batch * in.heads * in.seq == 0) return;
  if (params.inverse) {
    dispatch_layout<true>(params, in, out, cos, sin, cos_batch);
  } else {
    dispatch_layout<false>(params, in, out, cos, sin, cos_batch);
  }
}

template <class T, class C>
void rope_angle_grad(const RopeApplyParams& params, RopeView<const T> x, RopeView<const T> grad, const C* cos,
                     const C* sin, int64_t cos_batch, C* grad_theta) {
  validate(params);
  check_views(x, "x", grad, "grad", cos_batch, cos != nullptr && sin != nullptr);
  const int64_t half = params.rotary_dim / 2;
  const int64_t seq = x.seq;
  if (cos_batch * seq == 0) return;
  require(grad_theta != nullptr, "rope", "grad_theta must not be null");
  const double sign = params.inverse ? -1.0 : 1.0;
  // Each (table row, j) sums its batch rows and heads in a fixed order in
  // double: deterministic whatever the thread count.
#pragma omp parallel if (cos_batch * seq * x.heads * params.rotary_dim > kParallelThreshold)
  {
    std::vector<C> xa(half), xb(half), ga(half), gb(half);
    std::vector<double> acc(half);
#pragma omp for collapse(2) schedule(static)
    for (int64_t cb = 0; cb < cos_batch; ++cb) {
      for (int64_t t = 0; t < seq; ++t) {
        const int64_t table_row = (cb * seq + t) * half;
        const C* c = cos + table_row;
        const C* s = sin + table_row;
        std::fill(acc.begin(), acc.end(), 0.0);
        const int64_t b_first = cos_batch == 1 ? 0 : cb;
        const int64_t b_end = cos_batch == 1 ? x.batch : cb + 1;
        for (int64_t b = b_first; b < b_end; ++b) {
          for (int64_t h = 0; h < x.heads; ++h) {
            load_pairs(x.data + row_offset(x, b, h, t), params.layout, half, xa.data(), xb.data());
            load_pairs(grad.data + row_offset(grad, b, h, t), params.layout, half, ga.data(), gb.data());
            for (int64_t j = 0; j < half; ++j) {
              const C sj = params.inverse ? -s[j] : s[j];
              const C ya = xa[j] * c[j] - xb[j] * sj;
              const C yb = xb[j] * c[j] + xa[j] * sj;
              acc[j] += static_cast<double>(gb[j] * ya - ga[j] * yb);
            }
          }
        }
        for (int64_t j = 0; j < half; ++j) grad_theta[table_row + j] = static_cast<C>(sign * acc[j]);
      }
    }
  }
}

#define POSENC_INSTANTIATE(T, C)                                                                                       \
  template void rope_apply<T, C>(const RopeApplyParams&, RopeView<const T>, RopeView<T>, const C*, const C*, int64_t); \
  template void rope_angle_grad<T, C>(const RopeApplyParams&, RopeView<const T>, RopeView<const T>, const C*,          \
                                      const C*, int64_t, C*);
POSENC_INSTANTIATE(float, float)
POSENC_INSTANTIATE(double, double)
POSENC_INSTANTIATE(bfloat16, float)
POSENC_INSTANTIATE(float16, float)
#undef POSENC_INSTANTIATE

}  // namespace posenc::kernels
