// Relative position vectors inside attention (Shaw et al. 2018; Transformer-XL):
// logits, values and the table gradient. Formulas in relative.h.
//
// For query i the keys j = 0 .. Tk-1 address table rows
//   r(i, j) = clip(j - i - qo, -k, k) + k:
// a constant run (row 0), one row per key (row base_i + j), a constant run
// (row 2k). A block of query rows [i0, i1) reaches the contiguous rows
// r(i1-1, 0) .. r(i0, Tk-1), at most Tk + block - 1 of them, so each kernel is
// a small GEMM against that range plus index arithmetic:
//   logits  P = Q_blk . table[range]^T, then each output row is a shifted
//           slice of its P row between two constant fills;
//   values  bin each probability row onto the range (a shifted copy; the
//           edge bins are the sums of the clipped parts), out_blk = Pbin . table[range];
//   grad    G[range]^T += X_blk^T . Wbin over spans of table rows that one
//           thread each owns, so every row is summed in one fixed order.
// Math in T, no (Tq, Tk, Dh) tensor. Extra memory: the reached table rows
// (packed for logits, at most the table's size), block scratch per thread,
// and for the gradient two sums per query row.
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "posenc/error.h"
#include "posenc/kernels/relative.h"
#include "streaming_copy.h"
#include "small_gemm.h"

namespace posenc::kernels {

void validate_relative(const char* op, const RelativeParams& params, int64_t tables, int64_t rows, int64_t dim,
                       int64_t heads, int64_t head_dim) {
  constexpr int64_t kMaxOffset = int64_t{1} << 62;
  require(params.max_distance >= 0, op, "max_distance must be >= 0, got ", params.max_distance);
  require(params.query_offset >= -kMaxOffset && params.query_offset <= kMaxOffset, op,
          "query_offset must be within +-2^62, got ", params.query_offset);
  // 2k+1 in uint64 cannot overflow for any k >= 0.
  const uint64_t expected_rows = 2 * static_cast<uint64_t>(params.max_distance) + 1;
  require(rows >= 0 && static_cast<uint64_t>(rows) == expected_rows, op, "table must have 2*max_distance+1 = ",
          expected_rows, " rows, got ", rows);
  require(dim == head_dim, op, "table must have head_dim = ", head_dim, " columns, got ", dim);
  require(tables == 1 || tables == heads, op, "table must be shared (1 table) or one per head (", heads,
          " tables), got ", tables);
}

namespace {

using detail::ALayout;
using detail::round_up;
using i128 = __int128;

// ---------------------------------------------------------------------------
// Validation of the views (the table is validate_relative's).

template <class M>
bool is_empty(const M& m) noexcept {
  return m.batch == 0 || m.heads == 0 || m.rows == 0 || m.cols == 0;
}

template <class M>
void require_view(const char* op, const char* name, const M& m) {
  require(m.batch >= 0 && m.heads >= 0 && m.rows >= 0 && m.cols >= 0, op, name,
          " must have extents (B, H, rows, cols) >= 0, got (", m.batch, ", ", m.heads, ", ", m.rows, ", ", m.cols, ")");
}

template <class M>
void require_data(const char* op, const char* name, const M& m) {
  require(m.data != nullptr || is_empty(m), op, name, " must have data for its (", m.batch, ", ", m.heads, ", ",
          m.rows, ", ", m.cols, ") elements, got null");
}

template <class A, class B>
void require_like(const char* op, const char* name, const A& view, const char* like, const B& ref) {
  require(view.batch == ref.batch && view.heads == ref.heads && view.rows == ref.rows, op, name,
          " must be (B, H, Tq) = (", ref.batch, ", ", ref.heads, ", ", ref.rows, ") like ", like, ", got (", view.batch,
          ", ", view.heads, ", ", view.rows, ")");
}

// `first` and `second` are the two (B, H, Tq, .) views; `head_dim` is the one
// that carries Dh.
template <class A, class B, class T>
void validate_call(const char* op, const RelativeParams& params, const char* first_name, const A& first,
                   const char* second_name, const B& second, int64_t head_dim, const RelativeTable<T>& table,
                   const char* table_name) {
  require_view(op, first_name, first);
  require_view(op, second_name, second);
  require_like(op, second_name, second, first_name, first);
  validate_relative(op, params, table.tables, table.rows, table.dim, first.heads, head_dim);
  require_data(op, first_name, first);
  require_data(op, second_name, second);
  require(table.data != nullptr || table.tables == 0 || table.dim == 0, op, table_name, " must have data for its (",
          table.tables, ", ", table.rows, ", ", table.dim, ") elements, got null");
}

// ---------------------------------------------------------------------------
// Offsets. Extents are bounded by memory (< 2^48) once a view is non-empty,
// but k and qo may each be near 2^62, so their sums are formed in 128 bits.

int64_t clamp_to(i128 v, int64_t lo, int64_t hi) noexcept {
  return static_cast<int64_t>(v < lo ? i128{lo} : v > hi ? i128{hi} : v);
}

struct Offsets {
  int64_t k, qo, tk;

  // Keys j < left use row 0, j >= right row 2k, j in [left, right) row base + j.
  struct Span {
    int64_t left, right, base;
  };
  Span span(int64_t i) const noexcept {
    const i128 s = i128{i} + qo;
    const int64_t left = clamp_to(s - k, 0, tk);
    const int64_t right = clamp_to(s + k + 1, 0, tk);
    // When some key is unclipped, base + j lies in [0, 2k] and base fits.
    return {left, right, left < right ? static_cast<int64_t>(i128{k} - s) : 0};
  }
  int64_t row(int64_t i, int64_t j) const noexcept {
    const Span s = span(i);
    return j < s.left ? 0 : j >= s.right ? 2 * k : s.base + j;
  }
  // Table rows reached by query rows [i0, i1) (i1 > i0, tk > 0): [first, last].
  int64_t first(int64_t i1) const noexcept { return row(i1 - 1, 0); }
  int64_t last(int64_t i0) const noexcept { return row(i0, tk - 1); }
};

// One aligned allocation cut into equal per-thread slices; default-initialized
// (the kernels write before they read).
template <class T>
class Scratch {
 public:
  Scratch(int threads, int64_t per_thread)
      : per_(round_up(std::max<int64_t>(per_thread, 1), kAlign)), raw_(new T[threads * per_ + kAlign]) {
    const auto addr = reinterpret_cast<uintptr_t>(raw_.get());
    base_ = raw_.get() + (round_up(static_cast<int64_t>(addr), 64) - static_cast<int64_t>(addr)) / sizeof(T);
  }
  T* slice(int thread) const noexcept { return base_ + thread * per_; }

 private:
  static constexpr int64_t kAlign = 64 / sizeof(T);
  int64_t per_;
  std::unique_ptr<T[]> raw_;
  T* base_ = nullptr;
};

// Below this much work (multiply-adds plus elements of the (Tq, Tk) matrix)
// a parallel region costs more than it saves.
constexpr int64_t kParallelWork = int64_t{1} << 18;

int thread_count(int64_t work) noexcept { return work < kParallelWork ? 1 : omp_get_max_threads(); }

// Sum of n values in one fixed order (vector lanes, then lanes in order), so
// the same inputs give the same bits whatever thread computes it.
template <class T>
T sum_values(const T* p, int64_t n) noexcept {
  using S = detail::Simd<T>;
  using V = typename S::V;
  constexpr int64_t kLanes = S::kLanes;
  V a0{}, a1{}, a2{}, a3{};
  int64_t j = 0;
  for (; j + 4 * kLanes <= n; j += 4 * kLanes) {
    a0 += S::load(p + j);
    a1 += S::load(p + j + kLanes);
    a2 += S::load(p + j + 2 * kLanes);
    a3 += S::load(p + j + 3 * kLanes);
  }
  for (; j + kLanes <= n; j += kLanes) a0 += S::load(p + j);
  const V s = (a0 + a1) + (a2 + a3);
  T total = 0;
  for (int64_t l = 0; l < kLanes; ++l) total += s[l];
  for (; j < n; ++j) total += p[j];
  return total;
}

// dst[0 .. n) = src[0 .. n) for the short runs of the binning: vector moves
// inline (a libc call costs more than the copy at these lengths).
template <class T>
void copy_values(const T* __restrict src, T* __restrict dst, int64_t n) noexcept {
  using S = detail::Simd<T>;
  int64_t j = 0;
  for (; j + S::kLanes <= n; j += S::kLanes) S::store(dst + j, S::load(src + j));
  for (; j < n; ++j) dst[j] = src[j];
}

// An odd number of cache lines at least n elements long: rows this far apart
// fall in different L1 sets.
template <class T>
int64_t padded_stride(int64_t n) noexcept {
  const int64_t lines = round_up(n * static_cast<int64_t>(sizeof(T)), 64) / 64;
  return (lines | 1) * 64 / static_cast<int64_t>(sizeof(T));
}

// Micro-tiles, rows x vectors of accumulators within the register file (32
// vectors with AVX-512, 16 otherwise). Where the vector runs along table rows
// (logits, grad): 8 x 3; where it runs along Dh (values): 6 x up to 4.
constexpr bool kWide = detail::kVectorRegisters >= 32;
constexpr int kTableTileRows = kWide ? 8 : 4;
constexpr int kTableTileVectors = 3;
constexpr int kDimTileRows = kWide ? 6 : 3;

// ---------------------------------------------------------------------------
// logits

// q: (B, H, Tq, Dh), out: (B, H, Tq, Tk).
template <class T>
void logits_impl(const RelativeParams& params, BatchedMatrix<const T> q, RelativeTable<const T> table,
                 BatchedMatrix<T> out) {
  const int64_t nb = q.batch, nh = q.heads, tq = q.rows, dh = q.cols, tk = out.cols;
  if (nb == 0 || nh == 0 || tq == 0 || tk == 0) return;
  // Written once and not read here again: stream it past the caches when large.
  const bool streaming = nb * nh * tq * tk * static_cast<int64_t>(sizeof(T)) > detail::kStreamingBytes;
  if (dh == 0) {  // empty dot products
    const int64_t rows = nb * nh * tq;
#pragma omp parallel for num_threads(thread_count(rows * tk)) schedule(static)
    for (int64_t n = 0; n < rows; ++n) {
      detail::fill_row(out.row(n / (nh * tq), n / tq % nh, n % tq), tk, T(0), streaming);
    }
    if (streaming) detail::streaming_fence();
    return;
  }

  using S = detail::Simd<T>;
  constexpr int64_t kLanes = S::kLanes;
  constexpr int kRows = kTableTileRows;
  constexpr int64_t kCols = kTableTileVectors * kLanes;
  constexpr int64_t kBlock = 4 * kRows;  // query rows per block

  const Offsets off{params.max_distance, params.query_offset, tk};
  const int64_t k = params.max_distance;
  const int64_t r_first = off.first(tq), r_last = off.last(0);
  const int64_t nr = r_last - r_first + 1;

  // The reached table rows, transposed: packed[t][d][c] = table[t][r_first + c][d],
  // zero up to np so that whole tiles can be read. A row stride of an odd
  // number of cache lines keeps the Dh rows of a tile in different L1 sets.
  const int64_t np = round_up(nr + kCols, kLanes), ns = padded_stride<T>(np);
  const int64_t nt = table.tables;
  // P holds a block's products: columns c_a .. c_a + width, width <= wmax.
  const int64_t wmax = round_up(std::min(nr, tk + kBlock - 1) + kLanes - 1, kCols), ps = padded_stride<T>(wmax);
  const int64_t nblocks = (tq + kBlock - 1) / kBlock;
  const int64_t items = nh * nb * nblocks;

  const int threads = thread_count(nb * nh * tq * (std::min(nr, tk) * dh + tk));
  Scratch<T> packed_buf(1, nt * dh * ns);
  Scratch<T> scratch(threads, kBlock * dh + kBlock * ps);
  T* const packed = packed_buf.slice(0);

#pragma omp parallel num_threads(threads)
  {
    // Pack: (table, 16 reached rows) per step.
    const int64_t steps = (np + 15) / 16;
#pragma omp for schedule(static)
    for (int64_t s = 0; s < nt * steps; ++s) {
      const int64_t t = s / steps, c0 = s % steps * 16, cn = std::min<int64_t>(16, np - c0);
      const int64_t valid = std::clamp<int64_t>(nr - c0, 0, cn);
      T* dst = packed + t * dh * ns + c0;
      for (int64_t d = 0; d < dh; ++d) {
        for (int64_t c = valid; c < cn; ++c) dst[d * ns + c] = T(0);
      }
      if (valid == 0) continue;
      const T* src = table.data + (t * table.rows + r_first + c0) * dh;
      for (int64_t d = 0; d < dh; ++d) {
        for (int64_t c = 0; c < valid; ++c) dst[d * ns + c] = src[c * dh + d];
      }
    }  // implicit barrier: every table packed before any block reads it

    T* const qb = scratch.slice(omp_get_thread_num());  // (kBlock, Dh)
    T* const pb = qb + kBlock * dh;                     // (kBlock, ps)
#pragma omp for schedule(dynamic, 1)
    for (int64_t it = 0; it < items; ++it) {
      const int64_t h = it / (nb * nblocks), b = it / nblocks % nb, blk = it % nblocks;
      const int64_t i0 = blk * kBlock, i1 = std::min(tq, i0 + kBlock), mb = i1 - i0;
      const int64_t mbp = round_up(mb, kRows);
      const T* tt = packed + (nt == 1 ? 0 : h) * dh * ns;

      // Q block, contiguous; padded rows are zero (their products are never read).
      for (int64_t ii = 0; ii < mbp; ++ii) {
        if (ii < mb) {
          copy_values(q.row(b, h, i0 + ii), qb + ii * dh, dh);
        } else {
          std::fill(qb + ii * dh, qb + (ii + 1) * dh, T(0));
        }
      }
      // Columns from c_a (vector aligned) cover the block's rows [r_lo, r_hi].
      const int64_t c_lo = off.first(i1) - r_first, c_hi = off.last(i0) - r_first;
      const int64_t c_a = c_lo - c_lo % kLanes;
      const int64_t width = round_up(c_hi + 1 - c_a, kCols);
      for (int64_t n0 = 0; n0 < width; n0 += kCols) {
        for (int64_t m0 = 0; m0 < mbp; m0 += kRows) {
          detail::gemm_tile<T, kRows, kTableTileVectors, ALayout::kRows>(
              dh, qb + m0 * dh, dh, tt + c_a + n0, ns, pb + m0 * ps + n0, ps, kRows, kCols, false);
        }
      }
      // Skew: out[i, j] = P[i, r(i, j) - shift]. A row with left-clipped keys
      // puts row 0 in the block's range, so then shift = 0.
      const int64_t shift = r_first + c_a;
      for (int64_t ii = 0; ii < mb; ++ii) {
        const Offsets::Span sp = off.span(i0 + ii);
        const T* prow = pb + ii * ps;
        T* orow = out.row(b, h, i0 + ii);
        if (sp.left > 0) detail::fill_row(orow, sp.left, prow[-shift], streaming);
        if (sp.right > sp.left) {
          detail::copy_row(prow + (sp.base + sp.left - shift), orow + sp.left, sp.right - sp.left, streaming);
        }
        if (sp.right < tk) detail::fill_row(orow + sp.right, tk - sp.right, prow[2 * k - shift], streaming);
      }
    }
    if (streaming) detail::streaming_fence();
  }
}

// ---------------------------------------------------------------------------
// values

// Row ii of a block's bins over table rows [lo, lo + width): probabilities of
// unclipped keys land on their row, each clipped run on its edge row.
template <class T>
void bin_row(const Offsets& off, int64_t i, const T* src, int64_t lo, int64_t width, T* bins) noexcept {
  const Offsets::Span sp = off.span(i);
  const int64_t tk = off.tk;
  // Unclipped keys whose row falls inside [lo, lo + width).
  const int64_t j0 = std::max(sp.left, lo - sp.base), j1 = std::min(sp.right, lo + width - sp.base);
  if (j1 > j0) {
    const int64_t c0 = sp.base + j0 - lo, c1 = sp.base + j1 - lo;
    std::fill(bins, bins + c0, T(0));
    copy_values(src + j0, bins + c0, j1 - j0);
    std::fill(bins + c1, bins + width, T(0));
  } else {
    std::fill(bins, bins + width, T(0));
  }
  if (sp.left > 0 && lo == 0) bins[0] += sum_values(src, sp.left);
  if (sp.right < tk && lo + width - 1 == 2 * off.k) bins[width - 1] += sum_values(src + sp.right, tk - sp.right);
}

// probs: (B, H, Tq, Tk), out: (B, H, Tq, Dh).
template <class T>
void values_impl(const RelativeParams& params, BatchedMatrix<const T> probs, RelativeTable<const T> table,
                 BatchedMatrix<T> out) {
  const int64_t nb = probs.batch, nh = probs.heads, tq = probs.rows, tk = probs.cols, dh = out.cols;
  if (nb == 0 || nh == 0 || tq == 0 || dh == 0) return;
  if (tk == 0) {  // empty sums
    for (int64_t n = 0; n < nb * nh * tq; ++n) {
      T* row = out.row(n / (nh * tq), n / tq % nh, n % tq);
      std::fill(row, row + dh, T(0));
    }
    return;
  }

  using S = detail::Simd<T>;
  constexpr int64_t kLanes = S::kLanes;
  constexpr int kRows = kDimTileRows;
  constexpr int64_t kBlock = 6 * kRows;

  const Offsets off{params.max_distance, params.query_offset, tk};
  const int64_t r_first = off.first(tq), r_last = off.last(0);
  const int64_t nr = r_last - r_first + 1;
  const int64_t ps = padded_stride<T>(std::min(nr, tk + kBlock - 1));
  const int64_t dh_full = dh - dh % kLanes, tail = dh % kLanes;
  const int64_t nt = table.tables;
  const int64_t nblocks = (tq + kBlock - 1) / kBlock;
  const int64_t items = nh * nb * nblocks;

  const int threads = thread_count(nb * nh * tq * (std::min(nr, tk) * dh + tk));
  // The last dh % lanes columns of the reached rows, zero-padded to one vector.
  Scratch<T> tail_buf(1, tail > 0 ? nt * nr * kLanes : 0);
  Scratch<T> scratch(threads, kBlock * ps);
  T* const tails = tail_buf.slice(0);

#pragma omp parallel num_threads(threads)
  {
    if (tail > 0) {
#pragma omp for schedule(static)
      for (int64_t n = 0; n < nt * nr; ++n) {
        const T* src = table.data + (n / nr * table.rows + r_first + n % nr) * dh + dh_full;
        for (int64_t l = 0; l < kLanes; ++l) tails[n * kLanes + l] = l < tail ? src[l] : T(0);
      }
    }
    T* const pb = scratch.slice(omp_get_thread_num());  // (kBlock, ps)
#pragma omp for schedule(dynamic, 1)
    for (int64_t it = 0; it < items; ++it) {
      const int64_t h = it / (nb * nblocks), b = it / nblocks % nb, blk = it % nblocks;
      const int64_t i0 = blk * kBlock, i1 = std::min(tq, i0 + kBlock), mb = i1 - i0;
      const int64_t t = nt == 1 ? 0 : h;
      const int64_t lo = off.first(i1), width = off.last(i0) - lo + 1;
      for (int64_t ii = 0; ii < round_up(mb, kRows); ++ii) {
        if (ii < mb) {
          bin_row(off, i0 + ii, probs.row(b, h, i0 + ii), lo, width, pb + ii * ps);
        } else {
          std::fill(pb + ii * ps, pb + ii * ps + width, T(0));  // read by the last tile, never stored
        }
      }
      const T* rows = table.data + (t * table.rows + lo) * dh;
      for (int64_t m0 = 0; m0 < mb; m0 += kRows) {
        const int64_t rows_here = std::min<int64_t>(kRows, mb - m0);
        T* orow = out.row(b, h, i0 + m0);
        for (int64_t n0 = 0; n0 < dh_full; n0 += 4 * kLanes) {
          const int nv = static_cast<int>(std::min<int64_t>(4, (dh_full - n0) / kLanes));
          detail::gemm_tile_nv<T, kRows, ALayout::kRows>(nv, width, pb + m0 * ps, ps, rows + n0, dh, orow + n0,
                                                         out.stride_r, rows_here, nv * kLanes, false);
        }
        if (tail > 0) {
          detail::gemm_tile<T, kRows, 1, ALayout::kRows>(width, pb + m0 * ps, ps,
                                                         tails + (t * nr + lo - r_first) * kLanes, kLanes,
                                                         orow + dh_full, out.stride_r, rows_here, tail, false);
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------
// table_grad

// weights: (B, H, Tq, Tk), x: (B, H, Tq, Dh), grad: [tables, 2k+1, Dh].
// Per task (a table and a span of its rows), transposed: GT[d, r] +=
// sum_ii X[ii, d] Wbin[ii, r], so the bins are the vector operand and are
// read along their rows.
template <class T>
void table_grad_impl(const RelativeParams& params, BatchedMatrix<const T> weights, BatchedMatrix<const T> x,
                     RelativeTable<T> grad) {
  const int64_t nb = weights.batch, nh = weights.heads, tq = weights.rows, tk = weights.cols, dh = x.cols;
  const int64_t nt = grad.tables, rows = grad.rows;
  if (nt == 0 || dh == 0) return;
  T* const g = grad.data;
  if (nb == 0 || nh == 0 || tq == 0 || tk == 0) {
    std::fill(g, g + nt * rows * dh, T(0));
    return;
  }

  using S = detail::Simd<T>;
  constexpr int64_t kLanes = S::kLanes;
  constexpr int kRows = kTableTileRows;                  // of Dh
  constexpr int64_t kCols = kTableTileVectors * kLanes;  // of table rows
  constexpr int64_t kBlock = 64;                         // query rows per product (its depth)
  constexpr int64_t kAhead = 4;                          // rows prefetched ahead while binning

  const Offsets off{params.max_distance, params.query_offset, tk};
  const int64_t k = params.max_distance;
  const int64_t r_first = off.first(tq), r_last = off.last(0);
  const int64_t nr = r_last - r_first + 1;
  // About 8 spans per table (the work per row is uneven), each small enough
  // that its transposed gradient (Dh x span) stays within 256 KiB of L2; a
  // whole number of tiles. None of it depends on the thread count.
  const int64_t dhp = round_up(dh, std::max<int64_t>(kRows, kLanes));
  const int64_t span_max = std::max<int64_t>(1, (int64_t{256} << 10) / static_cast<int64_t>(sizeof(T)) / dhp / kCols);
  const int64_t span = std::min(span_max, (nr + 8 * kCols - 1) / (8 * kCols)) * kCols;
  const int64_t nspans = (nr + span - 1) / span;
  const int64_t ws = padded_stride<T>(span);
  const int64_t nblocks = (tq + kBlock - 1) / kBlock;
  const int64_t edge_rows = nb * nh * tq;

  const int threads = thread_count(nb * nh * tq * (std::min(nr, tk) * dh + tk));
  // Sums of each row's clipped runs, [b][h][i][left, right].
  std::vector<T> edges(static_cast<size_t>(2 * edge_rows));
  Scratch<T> scratch(threads, kBlock * ws + dhp * ws + kBlock * dhp);

#pragma omp parallel num_threads(threads)
  {
#pragma omp for schedule(static) nowait
    for (int64_t t = 0; t < nt; ++t) {  // rows no query reaches
      std::fill(g + t * rows * dh, g + (t * rows + r_first) * dh, T(0));
      std::fill(g + (t * rows + r_last + 1) * dh, g + (t + 1) * rows * dh, T(0));
    }
#pragma omp for schedule(static)
    for (int64_t n = 0; n < edge_rows; ++n) {
      const int64_t b = n / (nh * tq), h = n / tq % nh, i = n % tq;
      const Offsets::Span sp = off.span(i);
      const T* w = weights.row(b, h, i);
      edges[2 * n] = sp.left > 0 ? sum_values(w, sp.left) : T(0);
      edges[2 * n + 1] = sp.right < tk ? sum_values(w + sp.right, tk - sp.right) : T(0);
    }  // implicit barrier: edge sums ready

    T* const wb = scratch.slice(omp_get_thread_num());  // (kBlock, ws): bins, one row per query
    T* const gtb = wb + kBlock * ws;                    // (dhp, ws): the span's gradient, transposed
    T* const xb = gtb + dhp * ws;                       // (kBlock, dhp)
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < nt * nspans; ++task) {
      const int64_t t = task / nspans;
      const int64_t ra = r_first + task % nspans * span, rb = std::min(r_last + 1, ra + span);
      for (int64_t d = 0; d < dh; ++d) std::fill(gtb + d * ws, gtb + d * ws + (rb - ra), T(0));
      // Fixed order for every row: heads using table t, batch, query blocks, rows.
      for (int64_t h = (nt == 1 ? 0 : t); h < (nt == 1 ? nh : t + 1); ++h) {
        for (int64_t b = 0; b < nb; ++b) {
          for (int64_t blk = 0; blk < nblocks; ++blk) {
            const int64_t i0 = blk * kBlock, i1 = std::min(tq, i0 + kBlock), mb = i1 - i0;
            const int64_t lo = std::max(ra, off.first(i1)), hi = std::min(rb, off.last(i0) + 1);
            if (lo >= hi) continue;
            const int64_t width = hi - lo;
            for (int64_t ii = 0; ii < mb; ++ii) {
              const int64_t i = i0 + ii;
              const T* w = weights.row(b, h, i);
              T* bins = wb + ii * ws;
              const Offsets::Span sp = off.span(i);
              const int64_t j0 = std::max(sp.left, lo - sp.base), j1 = std::min(sp.right, hi - sp.base);
              // Zero up to the last tile's edge: tiles read whole vectors.
              const int64_t wp = round_up(width, kCols);
              if (j1 > j0) {
                if (ii + kAhead < mb) {  // row i + kAhead reads the same keys shifted by kAhead
                  const T* next = weights.row(b, h, i + kAhead) + j0 + kAhead;
                  detail::prefetch_row(next, j1 - j0);
                }
                const int64_t c0 = sp.base + j0 - lo, c1 = sp.base + j1 - lo;
                std::fill(bins, bins + c0, T(0));
                copy_values(w + j0, bins + c0, j1 - j0);
                std::fill(bins + c1, bins + wp, T(0));
              } else {
                std::fill(bins, bins + wp, T(0));
              }
              const int64_t n = (b * nh + h) * tq + i;
              if (lo == 0) bins[0] += edges[2 * n];
              if (hi - 1 == 2 * k) bins[width - 1] += edges[2 * n + 1];
              const T* xr = x.row(b, h, i);
              copy_values(xr, xb + ii * dhp, dh);
              std::fill(xb + ii * dhp + dh, xb + (ii + 1) * dhp, T(0));
            }
            for (int64_t n0 = 0; n0 < width; n0 += kCols) {
              for (int64_t m0 = 0; m0 < dh; m0 += kRows) {
                detail::gemm_tile<T, kRows, kTableTileVectors, ALayout::kColumns>(
                    mb, xb + m0, dhp, wb + n0, ws, gtb + m0 * ws + (lo - ra) + n0, ws,
                    std::min<int64_t>(kRows, dh - m0), std::min(kCols, width - n0), true);
              }
            }
          }
        }
      }
      T* const gt = g + t * rows * dh;
      for (int64_t r = ra; r < rb; ++r) {
        for (int64_t d = 0; d < dh; ++d) gt[r * dh + d] = gtb[d * ws + r - ra];
      }
    }
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// Public entry points: validate once, then the unchecked kernels.

template <class T>
void relative_logits(const RelativeParams& params, BatchedMatrix<const T> q, RelativeTable<const T> table,
                     BatchedMatrix<T> out, const char* op) {
  validate_call(op, params, "q", q, "out", out, q.cols, table, "table");
  logits_impl(params, q, table, out);
}

template <class T>
void relative_values(const RelativeParams& params, BatchedMatrix<const T> probs, RelativeTable<const T> table,
                     BatchedMatrix<T> out, const char* op) {
  validate_call(op, params, "probs", probs, "out", out, out.cols, table, "table");
  values_impl(params, probs, table, out);
}

template <class T>
void relative_table_grad(const RelativeParams& params, BatchedMatrix<const T> weights, BatchedMatrix<const T> x,
                         RelativeTable<T> grad, const char* op) {
  validate_call(op, params, "weights", weights, "x", x, x.cols, grad, "grad");
  table_grad_impl(params, weights, x, grad);
}

template void relative_logits<float>(const RelativeParams&, BatchedMatrix<const float>, RelativeTable<const float>,
                                     BatchedMatrix<float>, const char*);
template void relative_logits<double>(const RelativeParams&, BatchedMatrix<const double>, RelativeTable<const double>,
                                      BatchedMatrix<double>, const char*);
template void relative_values<float>(const RelativeParams&, BatchedMatrix<const float>, RelativeTable<const float>,
                                     BatchedMatrix<float>, const char*);
template void relative_values<double>(const RelativeParams&, BatchedMatrix<const double>, RelativeTable<const double>,
                                      BatchedMatrix<double>, const char*);
template void relative_table_grad<float>(const RelativeParams&, BatchedMatrix<const float>, BatchedMatrix<const float>,
                                         RelativeTable<float>, const char*);
template void relative_table_grad<double>(const RelativeParams&, BatchedMatrix<const double>,
                                          BatchedMatrix<const double>, RelativeTable<double>, const char*);

}  // namespace posenc::kernels
