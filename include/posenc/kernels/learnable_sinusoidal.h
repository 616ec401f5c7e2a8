// Sinusoids with learnable frequencies (Wang et al., ICLR 2021, "On Position
// Embeddings in BERT"): the sinusoidal layouts with omega given as an input
// of D/2 values, and the gradient with respect to omega:
//   dL/domega_i = sum_p p * s * (g[p, sin_col] cos(p omega_i) - g[p, cos_col] sin(p omega_i)).
// Angles are formed exactly as in sinusoidal.h (double, reduced mod 2*pi).
#pragma once

#include <cstdint>
#include <span>

#include "posenc/kernels/positions.h"
#include "posenc/kernels/sinusoidal.h"

namespace posenc::kernels {

struct LearnableSinusoidalParams {
  SinusoidalLayout layout = SinusoidalLayout::kInterleaved;
  double scale = 1.0;
};

// omega: D/2 values (finite); out: N*D.
template <class T>
void learnable_sinusoidal_forward(const LearnableSinusoidalParams& params, const Positions& positions,
                                  std::span<const T> omega, std::span<T> out);

// grad_out: N*D; grad_omega: D/2 values, overwritten (not accumulated).
template <class T>
void learnable_sinusoidal_backward(const LearnableSinusoidalParams& params, const Positions& positions,
                                   std::span<const T> omega, std::span<const T> grad_out,
                                   std::span<T> grad_omega);

}  // namespace posenc::kernels
