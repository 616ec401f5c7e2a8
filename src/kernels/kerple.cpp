#include "posenc/kernels/kerple.h"

#include <cmath>

#include "posenc/error.h"

namespace posenc::kernels {
namespace {

// |d| for column c of a row: d = c - (k_len - 1).
inline double distance(int64_t column, int64_t k_len) noexcept {
  return std::abs(static_cast<double>(column - (k_len - 1)));
}

}  // namespace

KerpleKind parse_kerple_kind(std::string_view name, const char* op) {
  if (name == "log") return KerpleKind::kLog;
  if (name == "power") return KerpleKind::kPower;
  fail_argument(op, "kind must be \"log\" or \"power\", got \"", name, "\"");
}

std::string_view kerple_kind_name(KerpleKind kind) noexcept { return kind == KerpleKind::kPower ? "power" : "log"; }

int64_t kerple_columns(const KerpleParams& params) noexcept {
  return params.q_len > 0 && params.k_len > 0 ? params.q_len + params.k_len - 1 : 0;
}

void validate(const KerpleParams& params, const char* op) {
  require(params.num_heads >= 1, op, "num_heads must be >= 1, got ", params.num_heads);
  require(params.q_len >= 0, op, "q_len must be >= 0, got ", params.q_len);
  require(params.k_len >= 0, op, "k_len must be >= 0, got ", params.k_len);
}

template <class T>
void validate_kerple_values(const KerpleParams& params, const T* r1, const T* r2, const char* op) {
  require(r1 != nullptr && r2 != nullptr, op, "r1 and r2 must not be null");
  for (int64_t h = 0; h < params.num_heads; ++h) {
    // Written so that NaN fails too.
    require(r1[h] > 0 && std::isfinite(static_cast<double>(r1[h])), op, "r1 must be > 0, got ", r1[h], " (head ", h,
            ")");
    require(r2[h] > 0 && std::isfinite(static_cast<double>(r2[h])), op, "r2 must be > 0, got ", r2[h], " (head ", h,
            ")");
    // The power kernel |d|^r2 is conditionally positive definite only for r2 <= 2 (the paper's Prop. 2).
    require(params.kind != KerpleKind::kPower || r2[h] <= 2, op, "r2 must be <= 2, got ", r2[h], " (head ", h, ")");
  }
}

template <class T>
void kerple_offset_bias(const KerpleParams& params, const T* r1, const T* r2, T* out, const char* op) {
  validate(params, op);
  const int64_t columns = kerple_columns(params);
  if (columns == 0) return;
  validate_kerple_values(params, r1, r2, op);
  require(out != nullptr, op, "out must not be null");
  const bool power = params.kind == KerpleKind::kPower;
  for (int64_t h = 0; h < params.num_heads; ++h) {
    const double a = static_cast<double>(r1[h]), b = static_cast<double>(r2[h]);
    T* row = out + h * columns;
    for (int64_t c = 0; c < columns; ++c) {
      const double x = distance(c, params.k_len);
      // pow(0, b) = 0 for b > 0; log1p keeps r2|d| << 1 exact.
      row[c] = static_cast<T>(power ? -a * std::pow(x, b) : -a * std::log1p(b * x));
    }
  }
}

template <class T>
void kerple_offset_bias_backward(const KerpleParams& params, const T* r1, const T* r2, const T* grad, T* grad_r1,
                                 T* grad_r2, const char* op) {
  validate(params, op);
  require(grad_r1 != nullptr && grad_r2 != nullptr, op, "grad_r1 and grad_r2 must not be null");
  const int64_t columns = kerple_columns(params);
  if (columns > 0) {
    validate_kerple_values(params, r1, r2, op);
    require(grad != nullptr, op, "grad must not be null");
  }
  const bool power = params.kind == KerpleKind::kPower;
  for (int64_t h = 0; h < params.num_heads; ++h) {
    const double a = columns > 0 ? static_cast<double>(r1[h]) : 0.0;
    const double b = columns > 0 ? static_cast<double>(r2[h]) : 0.0;
    double g1 = 0.0, g2 = 0.0;
    const T* row = grad + h * columns;
    for (int64_t c = 0; c < columns; ++c) {
      const double x = distance(c, params.k_len), g = static_cast<double>(row[c]);
      if (power) {
        if (x == 0.0) continue;  // |d|^r2 = 0 and its r2-derivative tends to 0
        const double p = std::pow(x, b);
        g1 -= g * p;
        g2 -= g * a * p * std::log(x);
      } else {
        g1 -= g * std::log1p(b * x);
        g2 -= g * a * x / (1.0 + b * x);
      }
    }
    grad_r1[h] = static_cast<T>(g1);
    grad_r2[h] = static_cast<T>(g2);
  }
}

#define POSENC_INSTANTIATE(T)                                                                                  \
  template void validate_kerple_values<T>(const KerpleParams&, const T*, const T*, const char*);              \
  template void kerple_offset_bias<T>(const KerpleParams&, const T*, const T*, T*, const char*);              \
  template void kerple_offset_bias_backward<T>(const KerpleParams&, const T*, const T*, const T*, T*, T*,     \
                                               const char*);
POSENC_INSTANTIATE(float)
POSENC_INSTANTIATE(double)
#undef POSENC_INSTANTIATE

}  // namespace posenc::kernels
