// Relative position vectors from C++ (torch.ops.posenc.relative_*,
// docs/relative.md), through the dispatcher like posenc/nn/absolute_ops.h, so
// the gradients flow. Shapes:
//   q, k, v: (B, H, T, Dh); logits, probs: (B, H, Tq, Tk)
//   relative table: [2k+1, Dh] shared by the heads, or [H, 2k+1, Dh];
//   row r holds offset r - k, and query i / key j use clip(j - (i + query_offset), -k, k) + k.
// Bad arguments throw c10::ValueError with the kernels' messages, e.g.
// "[relative_logits] table must have 2*max_distance+1 = 9 rows, got 8".
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <utility>

#include "posenc/kernels/relative.h"
#include "posenc/kernels/relative_2d.h"

namespace posenc::nn::ops {

// q (B, H, Tq, Dh) -> (B, H, Tq, Tk) with out[b,h,i,j] = q[b,h,i] . table[row(i, j)];
// k_len unset: Tq. Differentiable wrt q and table; no (Tq, Tk, Dh) tensor is formed.
at::Tensor relative_logits(const at::Tensor& q, const at::Tensor& table, const kernels::RelativeParams& params,
                           std::optional<int64_t> k_len = std::nullopt);
// probs (B, H, Tq, Tk) -> (B, H, Tq, Dh) with out[b,h,i] = sum_j probs[b,h,i,j] table[row(i, j)]; differentiable.
at::Tensor relative_values(const at::Tensor& probs, const at::Tensor& table, const kernels::RelativeParams& params);
// q (B, H, HW, Dh), table_h [2*height-1, Dh] (or [H, ..]), table_w [2*width-1, Dh] (or [H, ..])
// -> (B, H, HW, HW): q_(y,x) . (table_h[y'-y+height-1] + table_w[x'-x+width-1]); differentiable.
at::Tensor relative_logits_2d(const at::Tensor& q, const at::Tensor& table_h, const at::Tensor& table_w,
                              const kernels::Relative2dParams& params);
// [2k+1, dim]: row r is the sinusoid of offset r - k, interleaved (sin, cos) pairs; omega
// [dim/2] (learnable, differentiable) replaces base^(-2i/dim). dtype unset: omega's, else float32.
at::Tensor sinusoidal_relative_table(int64_t max_distance, int64_t dim, double base = 10000.0,
                                     const std::optional<at::Tensor>& omega = std::nullopt,
                                     std::optional<at::ScalarType> dtype = std::nullopt);

}  // namespace posenc::nn::ops
