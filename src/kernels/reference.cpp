// Plain long-double loops, deliberately naive: the yardstick for the tests
// and the benchmarks' correctness checks.
#include "posenc/kernels/reference.h"

#include <cmath>

namespace posenc::kernels::reference {
namespace {

void put_pair(std::vector<double>& out, int64_t row, int64_t dim, int64_t i, long double s, long double c,
              SinusoidalLayout layout) {
  double* r = out.data() + row * dim;
  switch (layout) {
    case SinusoidalLayout::kInterleaved:
      r[2 * i] = static_cast<double>(s);
      r[2 * i + 1] = static_cast<double>(c);
      break;
    case SinusoidalLayout::kHalf:
      r[i] = static_cast<double>(s);
      r[i + dim / 2] = static_cast<double>(c);
      break;
    case SinusoidalLayout::kCosSin:
      r[2 * i] = static_cast<double>(c);
      r[2 * i + 1] = static_cast<double>(s);
      break;
  }
}

}  // namespace

std::vector<double> sinusoidal_with_omega(const std::vector<double>& positions, const std::vector<double>& omega,
                                          double scale, SinusoidalLayout layout) {
  const int64_t dim = 2 * static_cast<int64_t>(omega.size());
  std::vector<double> out(positions.size() * static_cast<size_t>(dim));
  for (size_t r = 0; r < positions.size(); ++r) {
    for (size_t i = 0; i < omega.size(); ++i) {
      const long double angle = static_cast<long double>(positions[r]) * static_cast<long double>(omega[i]);
      put_pair(out, static_cast<int64_t>(r), dim, static_cast<int64_t>(i), scale * sinl(angle),
               scale * cosl(angle), layout);
    }
  }
  return out;
}

std::vector<double> sinusoidal(const std::vector<double>& positions, int64_t dim, double base, double scale,
                               SinusoidalLayout layout) {
  std::vector<double> omega(static_cast<size_t>(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i) {
    omega[static_cast<size_t>(i)] = static_cast<double>(powl(static_cast<long double>(base), -2.0L * i / dim));
  }
  return sinusoidal_with_omega(positions, omega, scale, layout);
}

std::vector<double> naive(const NaiveParams& params, const std::vector<int64_t>& positions) {
  const int64_t dim = params.dim;
  std::vector<double> out(positions.size() * static_cast<size_t>(dim));
  for (size_t r = 0; r < positions.size(); ++r) {
    const int64_t p = positions[r];
    for (int64_t j = 0; j < dim; ++j) {
      double v = 0.0;
      switch (params.kind) {
        case NaiveKind::kIndex: v = static_cast<double>(p); break;
        case NaiveKind::kNormalized:
          v = params.length == 1 ? 0.0 : static_cast<double>(p) / static_cast<double>(params.length - 1);
          break;
        case NaiveKind::kBinary: v = j < 63 ? static_cast<double>((p / (int64_t{1} << j)) % 2) : 0.0; break;
        case NaiveKind::kSignedBinary:
          v = j < 63 ? 2.0 * static_cast<double>((p / (int64_t{1} << j)) % 2) - 1.0 : -1.0;
          break;
        case NaiveKind::kSineBinary:
          v = static_cast<double>(sinl(static_cast<long double>(p) * 3.14159265358979323846264338327950288L /
                                       powl(2.0L, static_cast<long double>(j + 1))));
          break;
        case NaiveKind::kSineOnly:
          v = static_cast<double>(sinl(static_cast<long double>(p) *
                                       powl(static_cast<long double>(params.base), -static_cast<long double>(j) / dim)));
          break;
      }
      out[r * static_cast<size_t>(dim) + static_cast<size_t>(j)] = v;
    }
  }
  return out;
}

std::vector<double> grid(const SinusoidalGridParams& params, bool three_d) {
  const int64_t axes = three_d ? 3 : 2;
  const int64_t axis_dim = params.dim / axes;
  const std::vector<int64_t> sizes = three_d ? std::vector<int64_t>{params.frames, params.height, params.width}
                                             : std::vector<int64_t>{params.height, params.width};
  int64_t cells = 1;
  for (int64_t s : sizes) cells *= s;
  std::vector<double> out(static_cast<size_t>(cells * params.dim));
  for (int64_t cell = 0; cell < cells; ++cell) {
    int64_t rest = cell;
    std::vector<int64_t> coord(static_cast<size_t>(axes));
    for (int64_t a = axes - 1; a >= 0; --a) {
      coord[a] = rest % sizes[a];
      rest /= sizes[a];
    }
    for (int64_t a = 0; a < axes; ++a) {
      double c = static_cast<double>(coord[a]);
      if (params.normalize) c = sizes[a] > 1 ? c / static_cast<double>(sizes[a] - 1) * params.normalize_scale : 0.0;
      const std::vector<double> enc = sinusoidal({c}, axis_dim, params.base, params.scale, params.layout);
      for (int64_t j = 0; j < axis_dim; ++j) out[cell * params.dim + a * axis_dim + j] = enc[j];
    }
  }
  return out;
}

}  // namespace posenc::kernels::reference
