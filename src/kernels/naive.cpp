#include "posenc/kernels/naive.h"

#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include "posenc/error.h"
#include "sincos.h"

namespace posenc::kernels {
namespace {

bool needs_non_negative(NaiveKind kind) {
  return kind == NaiveKind::kBinary || kind == NaiveKind::kSignedBinary;
}

// Writes sin(p * omega_j) for every column, with the exact angle handling.
template <class T>
void sine_rows(const Positions& positions, const std::vector<double>& omega, T* out) {
  const int64_t dim = static_cast<int64_t>(omega.size());
  double max_omega = 0.0;
  for (double w : omega) max_omega = std::max(max_omega, w);
#pragma omp parallel for schedule(static) if (positions.count * dim > (int64_t{1} << 15))
  for (int64_t r = 0; r < positions.count; ++r) {
    const double p = static_cast<double>(positions[r]);
    const bool fast = std::abs(p) * max_omega < detail::kFastAngleLimit;
    T* row = out + r * dim;
    for (int64_t j = 0; j < dim; ++j) {
      double s, c;
      if (fast) {
        detail::sincos_of_product(p, omega[j], s, c);
      } else {
        s = std::sin(p * omega[j]);
      }
      row[j] = static_cast<T>(s);
    }
  }
}

}  // namespace

std::string_view naive_kind_name(NaiveKind kind) noexcept {
  switch (kind) {
    case NaiveKind::kIndex: return "index";
    case NaiveKind::kNormalized: return "normalized";
    case NaiveKind::kBinary: return "binary";
    case NaiveKind::kSignedBinary: return "signed-binary";
    case NaiveKind::kSineBinary: return "sine-binary";
    case NaiveKind::kSineOnly: return "sine-only";
  }
  return "?";
}

void validate(const NaiveParams& params, const Positions& positions) {
  const std::string op(naive_kind_name(params.kind));
  validate_table_size(op.c_str(), positions, params.dim);
  if (params.kind == NaiveKind::kNormalized) {
    require(params.length >= 1, op, "length must be at least 1, got ", params.length);
  }
  if (params.kind == NaiveKind::kSineOnly) {
    require(std::isfinite(params.base) && params.base > 0, op, "base must be finite and > 0, got ",
            params.base);
  }
  if (needs_non_negative(params.kind)) {
    for (int64_t r = 0; r < positions.count; ++r) {
      require(positions[r] >= 0, op, "positions must be >= 0, got ", positions[r]);
    }
  }
}

template <class T>
void naive_table(const NaiveParams& params, const Positions& positions, std::span<T> out) {
  validate(params, positions);
  const int64_t dim = params.dim;
  require(static_cast<int64_t>(out.size()) == positions.count * dim, naive_kind_name(params.kind),
          "out must hold positions x dim = ", positions.count * dim, " values, got ", out.size());
  T* data = out.data();
  switch (params.kind) {
    case NaiveKind::kIndex:
    case NaiveKind::kNormalized: {
      const double denominator = params.kind == NaiveKind::kIndex ? 1.0
                                 : params.length > 1            ? static_cast<double>(params.length - 1)
                                                                 : 0.0;
      for (int64_t r = 0; r < positions.count; ++r) {
        const double p = static_cast<double>(positions[r]);
        const T value = static_cast<T>(denominator == 0.0 ? 0.0 : p / denominator);
        std::fill(data + r * dim, data + (r + 1) * dim, value);
      }
      break;
    }
    case NaiveKind::kBinary:
    case NaiveKind::kSignedBinary: {
      const bool is_signed = params.kind == NaiveKind::kSignedBinary;
      for (int64_t r = 0; r < positions.count; ++r) {
        const auto p = static_cast<uint64_t>(positions[r]);
        for (int64_t j = 0; j < dim; ++j) {
          const int bit = j < 64 ? static_cast<int>((p >> j) & 1u) : 0;
          data[r * dim + j] = static_cast<T>(is_signed ? 2 * bit - 1 : bit);
        }
      }
      break;
    }
    case NaiveKind::kSineBinary: {
      // Column j turns a full circle every 2^(j+2) positions: the continuous bit j.
      std::vector<double> omega(static_cast<size_t>(dim));
      for (int64_t j = 0; j < dim; ++j) omega[j] = std::ldexp(std::numbers::pi, static_cast<int>(-(j + 1)));
      sine_rows(positions, omega, data);
      break;
    }
    case NaiveKind::kSineOnly: {
      std::vector<double> omega(static_cast<size_t>(dim));
      const double log_base = std::log(params.base);
      for (int64_t j = 0; j < dim; ++j) omega[j] = std::exp(-static_cast<double>(j) / static_cast<double>(dim) * log_base);
      sine_rows(positions, omega, data);
      break;
    }
  }
}

template void naive_table<float>(const NaiveParams&, const Positions&, std::span<float>);
template void naive_table<double>(const NaiveParams&, const Positions&, std::span<double>);

}  // namespace posenc::kernels
