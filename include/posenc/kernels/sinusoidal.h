// Fixed sinusoidal encoding (Vaswani et al. 2017, "Attention Is All You Need").
//
//   omega_i = base^(-2i/D),  i = 0 .. D/2-1
//   interleaved: PE[p, 2i] = s*sin(p omega_i),  PE[p, 2i+1]   = s*cos(p omega_i)
//   half:        PE[p, i]  = s*sin(p omega_i),  PE[p, i+D/2]  = s*cos(p omega_i)   (tensor2tensor)
//   cos-sin:     PE[p, 2i] = s*cos(p omega_i),  PE[p, 2i+1]   = s*sin(p omega_i)
// with s = params.scale (amplitude, default 1). Output is row-major [N, D].
//
// Precision::kExact forms p*omega_i in double, reduces it modulo 2*pi and only
// then rounds: every float32 value is within 5e-7 of the exact value for
// |p| <= 2^24. Precision::kFp32 reproduces the common float32 formula
// (omega rounded to float32, the product p*omega in float32) for matching
// existing checkpoints; its error grows with p.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "posenc/kernels/positions.h"

namespace posenc::kernels {

enum class SinusoidalLayout { kInterleaved, kHalf, kCosSin };
enum class Precision { kExact, kFp32 };

// "interleaved" | "half" | "cos-sin"; throws "[op] layout must be one of
// interleaved, half, cos-sin, got 'x'".
SinusoidalLayout parse_layout(std::string_view name, const char* op = "sinusoidal");
std::string_view layout_name(SinusoidalLayout layout) noexcept;
// "exact" | "fp32".
Precision parse_precision(std::string_view name, const char* op = "sinusoidal");
std::string_view precision_name(Precision precision) noexcept;

struct SinusoidalParams {
  int64_t dim = 0;        // D, even
  double base = 10000.0;  // finite, > 0
  double scale = 1.0;     // amplitude, finite
  SinusoidalLayout layout = SinusoidalLayout::kInterleaved;
  Precision precision = Precision::kExact;
};

// Throws on odd or non-positive dim, non-finite or non-positive base,
// non-finite scale. `op` names the caller in the message.
void validate(const SinusoidalParams& params, const char* op = "sinusoidal");

// omega_i = base^(-2i/D) in double, D/2 values.
std::vector<double> sinusoidal_frequencies(int64_t dim, double base);

// Fills out[N*D] (N = positions.count). Validates params and sizes.
template <class T>
void sinusoidal_table(const SinusoidalParams& params, const Positions& positions, std::span<T> out);

// Column index of sin(p omega_i) and cos(p omega_i) for a layout.
struct PairColumns {
  int64_t sin_col;
  int64_t cos_col;
};
PairColumns pair_columns(SinusoidalLayout layout, int64_t dim, int64_t i) noexcept;

}  // namespace posenc::kernels
