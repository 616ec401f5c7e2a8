// Kernels of the 2D / 3D sinusoidal grids (kernels/sinusoidal_nd.h):
//   sinusoidal_2d -> [height*width, dim],  row y*W + x
//   sinusoidal_3d -> [frames*height*width, dim],  row (t*H + y)*W + x
// No tensor input, so they are registered as CompositeExplicitAutograd.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "op_support.h"
#include "posenc/kernels/sinusoidal_nd.h"

namespace posenc::nn {
namespace {

using detail::to_std;

kernels::SinusoidalGridParams grid_params(const char* op, int64_t frames, int64_t height, int64_t width,
                                          int64_t dim, double base, double scale, c10::string_view layout,
                                          c10::string_view precision, bool normalize, double normalize_scale) {
  return detail::translate_errors([&] {
    return kernels::SinusoidalGridParams{frames,
                                         height,
                                         width,
                                         dim,
                                         base,
                                         scale,
                                         kernels::parse_layout(to_std(layout), op),
                                         kernels::parse_precision(to_std(precision), op),
                                         normalize,
                                         normalize_scale};
  });
}

// Rows of the grid, or -1 when an extent is not positive or the product overflows
// (the kernel then reports the argument).
int64_t grid_cells(std::initializer_list<int64_t> extents) {
  int64_t cells = 1;
  for (int64_t e : extents) {
    if (e < 1 || cells > kernels::kMaxTableValues / e) return -1;
    cells *= e;
  }
  return cells;
}

at::Tensor sinusoidal_2d(int64_t height, int64_t width, int64_t dim, double base, double scale,
                         c10::string_view layout, c10::string_view precision, bool normalize, double normalize_scale,
                         c10::optional<at::ScalarType> dtype) {
  const at::ScalarType out_dtype = detail::output_dtype("sinusoidal-2d", dtype);
  const kernels::SinusoidalGridParams params =
      grid_params("sinusoidal-2d", 1, height, width, dim, base, scale, layout, precision, normalize, normalize_scale);
  return detail::make_table({grid_cells({height, width}), dim}, detail::compute_dtype(out_dtype),
                            [&](auto out) { kernels::sinusoidal_2d(params, out); })
      .to(out_dtype);
}

at::Tensor sinusoidal_3d(int64_t frames, int64_t height, int64_t width, int64_t dim, double base, double scale,
                         c10::string_view layout, c10::string_view precision, bool normalize, double normalize_scale,
                         c10::optional<at::ScalarType> dtype) {
  const at::ScalarType out_dtype = detail::output_dtype("sinusoidal-3d", dtype);
  const kernels::SinusoidalGridParams params = grid_params("sinusoidal-3d", frames, height, width, dim, base, scale,
                                                           layout, precision, normalize, normalize_scale);
  return detail::make_table({grid_cells({frames, height, width}), dim}, detail::compute_dtype(out_dtype),
                            [&](auto out) { kernels::sinusoidal_3d(params, out); })
      .to(out_dtype);
}

}  // namespace

TORCH_LIBRARY_IMPL(posenc, CompositeExplicitAutograd, m) {
  m.impl("sinusoidal_2d", sinusoidal_2d);
  m.impl("sinusoidal_3d", sinusoidal_3d);
}

}  // namespace posenc::nn
