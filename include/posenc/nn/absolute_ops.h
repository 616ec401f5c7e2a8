// The absolute-encoding ops from C++ (sinusoidal, learned, learnable
// sinusoidal, the naive kinds, the 2D/3D grids), taking the kernels' typed
// parameter structs. Each
// call goes through the dispatcher (torch.ops.posenc.*), so gradients flow
// where the op has an Autograd kernel (learnable_sinusoidal wrt omega,
// learned wrt table). Outputs are computed in float32 (float64 when dtype is
// float64) and rounded once to dtype. Bad arguments throw c10::ValueError
// (Python ValueError) with the kernels' messages, e.g.
// "[sinusoidal] dim must be even, got 7"; a wrong tensor dtype throws
// c10::TypeError.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "posenc/kernels/absolute.h"
#include "posenc/kernels/learnable_sinusoidal.h"
#include "posenc/kernels/sinusoidal.h"
#include "posenc/kernels/sinusoidal_nd.h"

namespace posenc::nn::ops {

// positions: integer tensor of any shape S -> S + [params.dim]
at::Tensor sinusoidal(const at::Tensor& positions, const kernels::SinusoidalParams& params,
                      at::ScalarType dtype = at::kFloat);
// positions start .. start+count-1 -> [count, params.dim] (rotation recurrence along positions)
at::Tensor sinusoidal_range(int64_t start, int64_t count, const kernels::SinusoidalParams& params,
                            at::ScalarType dtype = at::kFloat);
// omega_i = base^(-2i/dim) -> float64 [dim/2]
at::Tensor sinusoidal_frequencies(int64_t dim, double base = 10000.0);

// The parameter-only kinds of kernels/absolute.h: S -> S + [params.dim]
at::Tensor absolute(const at::Tensor& positions, const kernels::AbsoluteParams& params,
                    at::ScalarType dtype = at::kFloat);
at::Tensor absolute_range(int64_t start, int64_t count, const kernels::AbsoluteParams& params,
                          at::ScalarType dtype = at::kFloat);
// Every kind torch.ops.posenc.absolute accepts: the kinds above, "learned", "learnable-sinusoidal".
std::vector<std::string> absolute_kinds();

// positions: S, omega: [D/2] (differentiable) -> S + [D], omega's dtype
at::Tensor learnable_sinusoidal(const at::Tensor& positions, const at::Tensor& omega,
                                const kernels::LearnableSinusoidalParams& params = {});
// table: [rows, dim] (differentiable), positions: S in [0, rows) -> S + [dim], table's dtype
at::Tensor learned(const at::Tensor& table, const at::Tensor& positions);

// [height*width, dim], row y*W + x
at::Tensor sinusoidal_2d(const kernels::SinusoidalGridParams& params, at::ScalarType dtype = at::kFloat);
// [frames*height*width, dim], row (t*H + y)*W + x
at::Tensor sinusoidal_3d(const kernels::SinusoidalGridParams& params, at::ScalarType dtype = at::kFloat);

// T(delta), float64 [dim, dim], with PE[p + delta] = T(delta) PE[p] (uses dim, base, layout)
at::Tensor translation_matrix(double delta, const kernels::SinusoidalParams& params);

}  // namespace posenc::nn::ops
