// A logit bias computed per tile inside the fused attention (DESIGN.md
// section 2): for biases that depend on more than the offset d = j - i'
// (FIRE: also the query position; CoPE: the content), which must not
// become a (Tq, Tk) tensor. The kernels (attention.h, attention_backward.h)
// ask the term for one tile of (query, key) pairs at a time, from several
// threads at once, so every method is const and the term keeps no state of
// its own beyond its parameters.
//
// Tiles are addressed by positions: rows are queries at key positions
// i' = row0 .. row0 + rows - 1 (i' = i + Tk - Tq), columns keys j = col0 ..
// col0 + cols - 1; element (r, n) of a tile is s[r * stride_r + n * stride_n].
#pragma once

#include <cstdint>

namespace posenc::kernels {

template <class T>
class TileBias {
 public:
  virtual ~TileBias() = default;

  // Name for messages ("fire").
  virtual const char* name() const noexcept = 0;
  // Whether the bias is defined only for keys j <= i' (the attention must be causal).
  virtual bool needs_causal() const noexcept = 0;
  // Elements of T a thread needs as scratch for tiles of up to rows x cols.
  virtual int64_t scratch_size(int64_t rows, int64_t cols) const noexcept = 0;
  // s += b(b, h, i', j) on the tile; pairs the term does not define (causal: j > i') are left alone.
  virtual void add(int64_t batch, int64_t head, int64_t row0, int64_t rows, int64_t col0, int64_t cols, T* s,
                   int64_t stride_r, int64_t stride_n, T* scratch) const noexcept = 0;

  // Parameter gradients, accumulated in double: gradient_size() elements laid
  // out as the term documents. partial += sum over the tile of ds * db/dparams.
  virtual int64_t gradient_size() const noexcept = 0;
  virtual void accumulate_gradient(int64_t batch, int64_t head, int64_t row0, int64_t rows, int64_t col0,
                                   int64_t cols, const T* ds, int64_t stride_r, int64_t stride_n, double* partial,
                                   T* scratch) const noexcept = 0;

  // Terms with state per query row (CoPE: gates over all of the row's keys)
  // say so here; then the kernels call begin_rows once per block of rows
  // before its tiles (the state lives in the thread's scratch between the
  // calls), and the backward passes every tile's ds to accumulate_gradient
  // and ends the block with finish_rows, which adds the term's own gradients
  // of q (rows at dq + r * dq_stride, null: not wanted), of the (batch, head)
  // keys (key j at dk + j * dk_stride, null: not wanted) and of its
  // parameters (partial, null: not wanted). Other terms pay nothing.
  virtual bool needs_rows() const noexcept { return false; }
  virtual void begin_rows(int64_t /*batch*/, int64_t /*head*/, int64_t /*row0*/, int64_t /*rows*/,
                          T* /*scratch*/) const noexcept {}
  virtual void finish_rows(int64_t /*batch*/, int64_t /*head*/, int64_t /*row0*/, int64_t /*rows*/, T* /*dq*/,
                           int64_t /*dq_stride*/, T* /*dk*/, int64_t /*dk_stride*/, double* /*partial*/,
                           T* /*scratch*/) const noexcept {}
};

}  // namespace posenc::kernels
