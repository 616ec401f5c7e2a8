#include "posenc/kernels/learnable_sinusoidal.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "posenc/error.h"
#include "sincos.h"
#include "sinusoid_engine.h"

namespace posenc::kernels {
namespace {

constexpr const char* kOp = "learnable-sinusoidal";

template <class T>
std::vector<double> validated_omega(const LearnableSinusoidalParams& params, const Positions& positions,
                                    std::span<const T> omega) {
  require(!omega.empty(), kOp, "omega must hold at least 1 frequency, got 0");
  require(std::isfinite(params.scale), kOp, "scale must be finite, got ", params.scale);
  validate_table_size(kOp, positions, 2 * static_cast<int64_t>(omega.size()));
  std::vector<double> result(omega.size());
  for (size_t i = 0; i < omega.size(); ++i) {
    const double w = static_cast<double>(omega[i]);
    require(std::isfinite(w), kOp, "omega must be finite, got ", w, " at index ", i);
    result[i] = w;
  }
  return result;
}

}  // namespace

template <class T>
void learnable_sinusoidal_forward(const LearnableSinusoidalParams& params, const Positions& positions,
                                  std::span<const T> omega, std::span<T> out) {
  const std::vector<double> w = validated_omega(params, positions, omega);
  const int64_t dim = 2 * static_cast<int64_t>(w.size());
  require(static_cast<int64_t>(out.size()) == positions.count * dim, kOp,
          "out must hold positions x dim = ", positions.count * dim, " values, got ", out.size());
  const detail::SinusoidRows rows{w, params.scale, params.layout, Precision::kExact, dim};
  if (positions.is_range()) {
    detail::sinusoid_rows_arithmetic(rows, static_cast<double>(positions.start), 1.0, positions.count,
                                     out.data());
  } else {
    detail::sinusoid_rows_list(rows, positions.data, positions.count, out.data());
  }
}

template <class T>
void learnable_sinusoidal_backward(const LearnableSinusoidalParams& params, const Positions& positions,
                                   std::span<const T> omega, std::span<const T> grad_out,
                                   std::span<T> grad_omega) {
  const std::vector<double> w = validated_omega(params, positions, omega);
  const int64_t half = static_cast<int64_t>(w.size());
  const int64_t dim = 2 * half;
  require(static_cast<int64_t>(grad_out.size()) == positions.count * dim, kOp,
          "grad_out must hold positions x dim = ", positions.count * dim, " values, got ", grad_out.size());
  require(grad_omega.size() == w.size(), kOp, "grad_omega must hold ", half, " values, got ",
          grad_omega.size());
  double max_abs_position = 0.0;
  for (int64_t r = 0; r < positions.count; ++r) {
    max_abs_position = std::max(max_abs_position, std::abs(static_cast<double>(positions[r])));
  }
  double max_omega = 0.0;
  for (double v : w) max_omega = std::max(max_omega, std::abs(v));
  const bool fast = max_abs_position * max_omega < detail::kFastAngleLimit;

  std::vector<double> total(static_cast<size_t>(half), 0.0);
#pragma omp parallel if (positions.count * half > (int64_t{1} << 15))
  {
    std::vector<double> partial(static_cast<size_t>(half), 0.0);
#pragma omp for schedule(static) nowait
    for (int64_t r = 0; r < positions.count; ++r) {
      const double p = static_cast<double>(positions[r]);
      const T* g = grad_out.data() + r * dim;
      for (int64_t i = 0; i < half; ++i) {
        double s, c;
        if (fast) {
          detail::sincos_of_product(p, w[i], s, c);
        } else {
          s = std::sin(p * w[i]);
          c = std::cos(p * w[i]);
        }
        const PairColumns cols = pair_columns(params.layout, dim, i);
        // d/dw [sin(p w)] = p cos(p w);  d/dw [cos(p w)] = -p sin(p w)
        partial[i] += p * (static_cast<double>(g[cols.sin_col]) * c - static_cast<double>(g[cols.cos_col]) * s);
      }
    }
#pragma omp critical
    for (int64_t i = 0; i < half; ++i) total[i] += partial[i];
  }
  for (int64_t i = 0; i < half; ++i) grad_omega[i] = static_cast<T>(params.scale * total[i]);
}

#define POSENC_INSTANTIATE(T)                                                                        \
  template void learnable_sinusoidal_forward<T>(const LearnableSinusoidalParams&, const Positions&,  \
                                                std::span<const T>, std::span<T>);                   \
  template void learnable_sinusoidal_backward<T>(const LearnableSinusoidalParams&, const Positions&, \
                                                 std::span<const T>, std::span<const T>, std::span<T>);
POSENC_INSTANTIATE(float)
POSENC_INSTANTIATE(double)
#undef POSENC_INSTANTIATE

}  // namespace posenc::kernels
