// 2D relative logits for images (Bello et al. 2019, attention augmented
// convolutions; BoTNet, Srinivas et al. 2021): separate tables for row and
// column offsets. On a height x width grid with rows flattened as y*W + x,
// query (y, x) and key (y', x') get
//   out[b,h,(y,x),(y',x')] = rel_h[b,h,(y,x), y'-y+H-1] + rel_w[b,h,(y,x), x'-x+W-1]
// where rel_h = q . table_h^T is (.., HW, 2H-1) and rel_w = q . table_w^T is
// (.., HW, 2W-1), so the logit term is q . (table_h[dy] + table_w[dx]).
// relative_2d_expand is that addressing (BoTNet's rel_to_abs, as index
// arithmetic); relative_2d_reduce is its adjoint (the backward of expand, and
// expand is the backward of reduce):
//   rel_h[(y,x), ry] = sum_{x'} g[(y,x), (y+ry-H+1, x')]   (rows inside the grid)
//   rel_w[(y,x), rx] = sum_{y'} g[(y,x), (y', x+rx-W+1)]
#pragma once

#include <cstdint>

#include "posenc/kernels/batched_matrix.h"

namespace posenc::kernels {

struct Relative2dParams {
  int64_t height = 0, width = 0;  // >= 1 each
};

// Messages (op is the caller's name):
//   "[op] height must be >= 1, got 0"   "[op] width must be >= 1, got 0"
//   "[op] rel_h must have height*width = 20 rows, got 21"
//   "[op] rel_h must have 2*height-1 = 7 columns, got 6"
//   "[op] rel_w must have 2*width-1 = 9 columns, got 6"
//   "[op] out must be (B, H, HW, HW) = (1, 2, 20, 20), got (1, 2, 20, 19)"
// T is float or double.
template <class T>
void relative_2d_expand(const Relative2dParams& params, BatchedMatrix<const T> rel_h, BatchedMatrix<const T> rel_w,
                        BatchedMatrix<T> out, const char* op = "relative_2d_expand");

// grad: (B, H, HW, HW); rel_h: (B, H, HW, 2H-1), rel_w: (B, H, HW, 2W-1), overwritten.
template <class T>
void relative_2d_reduce(const Relative2dParams& params, BatchedMatrix<const T> grad, BatchedMatrix<T> rel_h,
                        BatchedMatrix<T> rel_w, const char* op = "relative_2d_reduce");

}  // namespace posenc::kernels
