// Translation operator of the sinusoidal encoding: the block-diagonal
// rotation T(delta) with PE[p + delta] = T(delta) PE[p] for every p, and
// T(a) T(b) = T(a + b). Each (sin, cos) pair of frequency omega_i is rotated
// by the angle delta*omega_i; the blocks sit at the pair's columns in the
// layout. Output D x D row-major float64.
#pragma once

#include <span>

#include "posenc/kernels/sinusoidal.h"

namespace posenc::kernels {

// Uses params.dim, base and layout (scale and precision do not matter).
void translation_matrix(const SinusoidalParams& params, double delta, std::span<double> out);

}  // namespace posenc::kernels
