#include "posenc/kernels/translation.h"

#include <algorithm>
#include <cmath>

#include "posenc/error.h"

namespace posenc::kernels {
namespace {
constexpr int64_t kMaxTranslationDim = 46340;  // floor(sqrt(kMaxTableValues))
static_assert(kMaxTranslationDim * kMaxTranslationDim <= kMaxTableValues);
}  // namespace

void translation_matrix(const SinusoidalParams& params, double delta, std::span<double> out) {
  validate(params, "translation");
  require(std::isfinite(delta), "translation", "delta must be finite, got ", delta);
  const int64_t dim = params.dim;
  // The dense D x D matrix obeys the same size limit as every table.
  require(dim <= kMaxTranslationDim, "translation", "dim must be at most ", kMaxTranslationDim,
          " (a dense dim x dim matrix), got ", dim);
  require(static_cast<int64_t>(out.size()) == dim * dim, "translation", "out must hold dim x dim = ", dim * dim,
          " values, got ", out.size());
  std::fill(out.begin(), out.end(), 0.0);
  const std::vector<double> omega = sinusoidal_frequencies(dim, params.base);
  for (int64_t i = 0; i < dim / 2; ++i) {
    // sin(x + d) = sin x cos d + cos x sin d;  cos(x + d) = cos x cos d - sin x sin d
    const double c = std::cos(delta * omega[i]);
    const double s = std::sin(delta * omega[i]);
    const PairColumns k = pair_columns(params.layout, dim, i);
    out[k.sin_col * dim + k.sin_col] = c;
    out[k.sin_col * dim + k.cos_col] = s;
    out[k.cos_col * dim + k.cos_col] = c;
    out[k.cos_col * dim + k.sin_col] = -s;
  }
}

}  // namespace posenc::kernels
