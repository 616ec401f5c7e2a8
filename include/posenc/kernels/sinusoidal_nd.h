// 2D and 3D sinusoidal encodings for images and video (DETR, MAE, ViViT).
// 2D: channels [0, D/2) encode the row y, [D/2, D) the column x, each a 1D
// sinusoidal encoding (sinusoidal.h) of dimension D/2 in the chosen layout.
// 3D: D/3 channels each for t, y, x in that order. Output rows are row-major
// over the grid: row (y*W + x) in 2D, ((t*H + y)*W + x) in 3D.
// With `normalize`, a coordinate c on an axis of size S becomes
// c/(S-1) * normalize_scale in [0, normalize_scale] (0 when S = 1) instead of
// c; DETR uses (c+1)/(S+eps)*2pi, which differs by the offset convention.
#pragma once

#include <cstdint>
#include <span>

#include "posenc/kernels/sinusoidal.h"

namespace posenc::kernels {

struct SinusoidalGridParams {
  int64_t frames = 1;  // 3D only
  int64_t height = 0;
  int64_t width = 0;
  int64_t dim = 0;     // 2D: divisible by 4; 3D: divisible by 6
  double base = 10000.0;
  double scale = 1.0;  // amplitude
  SinusoidalLayout layout = SinusoidalLayout::kInterleaved;
  Precision precision = Precision::kExact;
  bool normalize = false;
  double normalize_scale = 6.283185307179586;  // 2*pi, as DETR
};

// Throws on any bad parameter; `three_d` selects the 3D rules (frames, D % 6).
void validate(const SinusoidalGridParams& params, bool three_d);

// out: (H*W) x D.
template <class T>
void sinusoidal_2d(const SinusoidalGridParams& params, std::span<T> out);
// out: (F*H*W) x D.
template <class T>
void sinusoidal_3d(const SinusoidalGridParams& params, std::span<T> out);

}  // namespace posenc::kernels
