// 2D and 3D sinusoidal encodings for images and video (DETR, MAE, ViViT) at
// the input: the table of kernels/sinusoidal_nd.h over a fixed grid, one row
// per cell in row-major order, so x is (B, H*W, D) or (B, F*H*W, D) with the
// patches flattened the same way. forward(x, start) uses cells start ..
// start+T-1 (e.g. T < H*W after dropping patches); explicit positions index
// the cells.
#pragma once

#include <torch/arg.h>

#include <cstdint>
#include <ostream>

#include "posenc/kernels/sinusoidal_nd.h"
#include "posenc/nn/family_module.h"

namespace posenc::nn {

struct SinusoidalEncoding2dOptions {
  SinusoidalEncoding2dOptions(int64_t height, int64_t width, int64_t dim)
      : height_(height), width_(width), dim_(dim) {}
  TORCH_ARG(int64_t, height);
  TORCH_ARG(int64_t, width);
  TORCH_ARG(int64_t, dim);  // divisible by 4
  TORCH_ARG(double, base) = 10000.0;
  TORCH_ARG(double, scale) = 1.0;
  TORCH_ARG(kernels::SinusoidalLayout, layout) = kernels::SinusoidalLayout::kInterleaved;
  TORCH_ARG(kernels::Precision, precision) = kernels::Precision::kExact;
  // Coordinates c/(S-1) * normalize_scale instead of c (kernels/sinusoidal_nd.h).
  TORCH_ARG(bool, normalize) = false;
  TORCH_ARG(double, normalize_scale) = 6.283185307179586;
  TORCH_ARG(InputMode, mode) = InputMode::kAdd;
};

struct SinusoidalEncoding3dOptions {
  SinusoidalEncoding3dOptions(int64_t frames, int64_t height, int64_t width, int64_t dim)
      : frames_(frames), height_(height), width_(width), dim_(dim) {}
  TORCH_ARG(int64_t, frames);
  TORCH_ARG(int64_t, height);
  TORCH_ARG(int64_t, width);
  TORCH_ARG(int64_t, dim);  // divisible by 6
  TORCH_ARG(double, base) = 10000.0;
  TORCH_ARG(double, scale) = 1.0;
  TORCH_ARG(kernels::SinusoidalLayout, layout) = kernels::SinusoidalLayout::kInterleaved;
  TORCH_ARG(kernels::Precision, precision) = kernels::Precision::kExact;
  TORCH_ARG(bool, normalize) = false;
  TORCH_ARG(double, normalize_scale) = 6.283185307179586;
  TORCH_ARG(InputMode, mode) = InputMode::kAdd;
};

// Front ends of the SinusoidalEncoding2d / 3d contracts (src/nn/families/sinusoidal.cpp), the grid
// fixed by the options.
class SinusoidalEncoding2dImpl : public FamilyInputImpl {
 public:
  // Throws c10::ValueError on bad options ("[sinusoidal-2d] dim must be divisible by 4 ...").
  explicit SinusoidalEncoding2dImpl(const SinusoidalEncoding2dOptions& options);

  void pretty_print(std::ostream& stream) const override;

  const SinusoidalEncoding2dOptions& options() const noexcept { return options_; }
  // (H*W, dim) in `compute`.
  at::Tensor grid(at::ScalarType compute) const;

 private:
  SinusoidalEncoding2dOptions options_;
};

class SinusoidalEncoding3dImpl : public FamilyInputImpl {
 public:
  explicit SinusoidalEncoding3dImpl(const SinusoidalEncoding3dOptions& options);

  void pretty_print(std::ostream& stream) const override;

  const SinusoidalEncoding3dOptions& options() const noexcept { return options_; }
  // (F*H*W, dim) in `compute`.
  at::Tensor grid(at::ScalarType compute) const;

 private:
  SinusoidalEncoding3dOptions options_;
};

TORCH_MODULE(SinusoidalEncoding2d);
TORCH_MODULE(SinusoidalEncoding3d);

}  // namespace posenc::nn
