#include "posenc/kernels/sinusoidal.h"

#include <cmath>

#include "posenc/error.h"
#include "sinusoid_engine.h"

namespace posenc::kernels {

SinusoidalLayout parse_layout(std::string_view name, const char* op) {
  if (name == "interleaved") return SinusoidalLayout::kInterleaved;
  if (name == "half") return SinusoidalLayout::kHalf;
  if (name == "cos-sin") return SinusoidalLayout::kCosSin;
  fail_argument(op, "layout must be one of interleaved, half, cos-sin, got '", name, "'");
}

std::string_view layout_name(SinusoidalLayout layout) noexcept {
  switch (layout) {
    case SinusoidalLayout::kInterleaved: return "interleaved";
    case SinusoidalLayout::kHalf: return "half";
    case SinusoidalLayout::kCosSin: return "cos-sin";
  }
  return "?";
}

Precision parse_precision(std::string_view name, const char* op) {
  if (name == "exact") return Precision::kExact;
  if (name == "fp32") return Precision::kFp32;
  fail_argument(op, "precision must be one of exact, fp32, got '", name, "'");
}

std::string_view precision_name(Precision precision) noexcept {
  return precision == Precision::kExact ? "exact" : "fp32";
}

void validate(const SinusoidalParams& params, const char* op) {
  require(params.dim >= 1, op, "dim must be positive, got ", params.dim);
  require(params.dim % 2 == 0, op, "dim must be even, got ", params.dim);
  require(std::isfinite(params.base) && params.base > 0, op, "base must be finite and > 0, got ",
          params.base);
  require(std::isfinite(params.scale), op, "scale must be finite, got ", params.scale);
}

std::vector<double> sinusoidal_frequencies(int64_t dim, double base) {
  std::vector<double> omega(static_cast<size_t>(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i) {
    // In long double, then rounded once: omega_i is the double nearest the
    // true base^(-2i/D), which is what lets a double product stay exact.
    const long double exponent = -2.0L * static_cast<long double>(i) / static_cast<long double>(dim);
    omega[static_cast<size_t>(i)] = static_cast<double>(powl(static_cast<long double>(base), exponent));
  }
  return omega;
}

PairColumns pair_columns(SinusoidalLayout layout, int64_t dim, int64_t i) noexcept {
  switch (layout) {
    case SinusoidalLayout::kInterleaved: return {2 * i, 2 * i + 1};
    case SinusoidalLayout::kHalf: return {i, i + dim / 2};
    case SinusoidalLayout::kCosSin: return {2 * i + 1, 2 * i};
  }
  return {0, 0};
}

template <class T>
void sinusoidal_table(const SinusoidalParams& params, const Positions& positions, std::span<T> out) {
  validate(params);
  validate_table_size("sinusoidal", positions, params.dim);
  require(static_cast<int64_t>(out.size()) == positions.count * params.dim, "sinusoidal",
          "out must hold positions x dim = ", positions.count * params.dim, " values, got ", out.size());
  const std::vector<double> omega = sinusoidal_frequencies(params.dim, params.base);
  const detail::SinusoidRows rows{omega, params.scale, params.layout, params.precision, params.dim};
  if (positions.is_range()) {
    detail::sinusoid_rows_arithmetic(rows, static_cast<double>(positions.start), 1.0, positions.count,
                                     out.data());
  } else {
    detail::sinusoid_rows_list(rows, positions.data, positions.count, out.data());
  }
}

template void sinusoidal_table<float>(const SinusoidalParams&, const Positions&, std::span<float>);
template void sinusoidal_table<double>(const SinusoidalParams&, const Positions&, std::span<double>);

}  // namespace posenc::kernels
