// CPU kernels of the fixed 1D tables: sinusoidal, sinusoidal_range,
// sinusoidal_frequencies, absolute_table, absolute_table_range and
// translation_matrix. Each validates once (in the kernel), computes in float
// or double, and rounds once to the requested dtype.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>

#include "op_support.h"
#include "posenc/kernels/absolute.h"
#include "posenc/kernels/sinusoidal.h"
#include "posenc/kernels/translation.h"

namespace posenc::nn {
namespace {

using detail::to_std;

kernels::SinusoidalParams sinusoidal_params(const char* op, int64_t dim, double base, double scale,
                                            c10::string_view layout, c10::string_view precision) {
  return detail::translate_errors([&] {
    return kernels::SinusoidalParams{dim, base, scale, kernels::parse_layout(to_std(layout), op),
                                     kernels::parse_precision(to_std(precision), op)};
  });
}

kernels::AbsoluteParams absolute_params(c10::string_view kind, int64_t dim, double base, double scale,
                                        c10::string_view layout, c10::string_view precision, int64_t length) {
  return detail::translate_errors([&] {
    return kernels::AbsoluteParams{kernels::parse_absolute_kind(to_std(kind)),
                                   dim,
                                   base,
                                   scale,
                                   kernels::parse_layout(to_std(layout), "absolute"),
                                   kernels::parse_precision(to_std(precision), "absolute"),
                                   length};
  });
}

// positions: any integer shape S -> S + [dim]
at::Tensor sinusoidal(const at::Tensor& positions, int64_t dim, double base, double scale, c10::string_view layout,
                      c10::string_view precision, c10::optional<at::ScalarType> dtype) {
  const at::ScalarType out_dtype = detail::output_dtype("sinusoidal", dtype);
  const at::Tensor p = detail::int64_positions("sinusoidal", positions);
  const kernels::SinusoidalParams params = sinusoidal_params("sinusoidal", dim, base, scale, layout, precision);
  return detail::make_table(detail::table_sizes(p.sizes(), dim), detail::compute_dtype(out_dtype),
                            [&](auto out) { kernels::sinusoidal_table(params, detail::as_positions(p), out); })
      .to(out_dtype);
}

// -> [count, dim], positions start .. start+count-1
at::Tensor sinusoidal_range(int64_t start, int64_t count, int64_t dim, double base, double scale,
                            c10::string_view layout, c10::string_view precision,
                            c10::optional<at::ScalarType> dtype) {
  const at::ScalarType out_dtype = detail::output_dtype("sinusoidal", dtype);
  const kernels::SinusoidalParams params = sinusoidal_params("sinusoidal", dim, base, scale, layout, precision);
  return detail::make_table({count, dim}, detail::compute_dtype(out_dtype),
                            [&](auto out) {
                              kernels::sinusoidal_table(params, kernels::Positions::range(start, count), out);
                            })
      .to(out_dtype);
}

// -> float64 [dim/2]
at::Tensor sinusoidal_frequencies(int64_t dim, double base) {
  return detail::translate_errors([&] {
    kernels::validate(kernels::SinusoidalParams{dim, base}, "sinusoidal");
    const std::vector<double> omega = kernels::sinusoidal_frequencies(dim, base);
    at::Tensor out = at::empty({static_cast<int64_t>(omega.size())}, at::TensorOptions().dtype(at::kDouble));
    std::copy(omega.begin(), omega.end(), out.data_ptr<double>());
    return out;
  });
}

// positions: S -> S + [dim]
at::Tensor absolute_table(c10::string_view kind, const at::Tensor& positions, int64_t dim, double base,
                          double scale, c10::string_view layout, c10::string_view precision, int64_t length,
                          c10::optional<at::ScalarType> dtype) {
  const at::ScalarType out_dtype = detail::output_dtype("absolute", dtype);
  const at::Tensor p = detail::int64_positions("absolute", positions);
  const kernels::AbsoluteParams params = absolute_params(kind, dim, base, scale, layout, precision, length);
  return detail::make_table(detail::table_sizes(p.sizes(), dim), detail::compute_dtype(out_dtype),
                            [&](auto out) { kernels::absolute_table(params, detail::as_positions(p), out); })
      .to(out_dtype);
}

// -> [count, dim]
at::Tensor absolute_table_range(c10::string_view kind, int64_t start, int64_t count, int64_t dim, double base,
                                double scale, c10::string_view layout, c10::string_view precision,
                                int64_t length, c10::optional<at::ScalarType> dtype) {
  const at::ScalarType out_dtype = detail::output_dtype("absolute", dtype);
  const kernels::AbsoluteParams params = absolute_params(kind, dim, base, scale, layout, precision, length);
  return detail::make_table({count, dim}, detail::compute_dtype(out_dtype),
                            [&](auto out) {
                              kernels::absolute_table(params, kernels::Positions::range(start, count), out);
                            })
      .to(out_dtype);
}

// -> float64 [dim, dim]
at::Tensor translation_matrix(double delta, int64_t dim, double base, c10::string_view layout) {
  const kernels::SinusoidalParams params = sinusoidal_params("translation", dim, base, 1.0, layout, "exact");
  return detail::make_table_as<double>({dim, dim},
                                       [&](std::span<double> out) { kernels::translation_matrix(params, delta, out); });
}

}  // namespace

TORCH_LIBRARY_IMPL(posenc, CPU, m) {
  m.impl("sinusoidal", sinusoidal);
  m.impl("absolute_table", absolute_table);
}

TORCH_LIBRARY_IMPL(posenc, CompositeExplicitAutograd, m) {
  m.impl("sinusoidal_range", sinusoidal_range);
  m.impl("sinusoidal_frequencies", sinusoidal_frequencies);
  m.impl("absolute_table_range", absolute_table_range);
  m.impl("translation_matrix", translation_matrix);
}

}  // namespace posenc::nn
