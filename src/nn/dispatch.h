// Calls into the posenc ops through the dispatcher, with the schemas' own
// argument types (ops/schemas.cpp). The autograd kernels, the routing ops and
// the public C++ API (posenc/nn/ops.h) go through these, so every call sees
// the registered Autograd and CPU kernels.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

namespace posenc::nn::dispatch {

at::Tensor sinusoidal(const at::Tensor& positions, int64_t dim, double base, double scale, c10::string_view layout,
                      c10::string_view precision, c10::optional<at::ScalarType> dtype);
at::Tensor sinusoidal_range(int64_t start, int64_t count, int64_t dim, double base, double scale,
                            c10::string_view layout, c10::string_view precision,
                            c10::optional<at::ScalarType> dtype);
at::Tensor sinusoidal_frequencies(int64_t dim, double base);

at::Tensor absolute_table(c10::string_view kind, const at::Tensor& positions, int64_t dim, double base,
                          double scale, c10::string_view layout, c10::string_view precision, int64_t length,
                          c10::optional<at::ScalarType> dtype);
at::Tensor absolute_table_range(c10::string_view kind, int64_t start, int64_t count, int64_t dim, double base,
                                double scale, c10::string_view layout, c10::string_view precision,
                                int64_t length, c10::optional<at::ScalarType> dtype);
at::Tensor absolute(c10::string_view kind, const at::Tensor& positions, int64_t dim, double base, double scale,
                    c10::string_view layout, c10::string_view precision, int64_t length,
                    c10::optional<at::ScalarType> dtype, const c10::optional<at::Tensor>& table,
                    const c10::optional<at::Tensor>& omega);
at::Tensor absolute_range(c10::string_view kind, int64_t start, int64_t count, int64_t dim, double base,
                          double scale, c10::string_view layout, c10::string_view precision, int64_t length,
                          c10::optional<at::ScalarType> dtype, const c10::optional<at::Tensor>& table,
                          const c10::optional<at::Tensor>& omega);
std::vector<std::string> absolute_kinds();

at::Tensor learnable_sinusoidal(const at::Tensor& positions, const at::Tensor& omega, c10::string_view layout,
                                double scale);
at::Tensor learnable_sinusoidal_backward(const at::Tensor& grad_out, const at::Tensor& positions,
                                         const at::Tensor& omega, c10::string_view layout, double scale);

at::Tensor learned(const at::Tensor& table, const at::Tensor& positions);
at::Tensor learned_backward(const at::Tensor& grad_out, const at::Tensor& positions, int64_t rows);

at::Tensor sinusoidal_2d(int64_t height, int64_t width, int64_t dim, double base, double scale,
                         c10::string_view layout, c10::string_view precision, bool normalize, double normalize_scale,
                         c10::optional<at::ScalarType> dtype);
at::Tensor sinusoidal_3d(int64_t frames, int64_t height, int64_t width, int64_t dim, double base, double scale,
                         c10::string_view layout, c10::string_view precision, bool normalize, double normalize_scale,
                         c10::optional<at::ScalarType> dtype);
at::Tensor translation_matrix(double delta, int64_t dim, double base, c10::string_view layout);

}  // namespace posenc::nn::dispatch
