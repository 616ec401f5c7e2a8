// Rotary position embedding (Su et al. 2021, RoFormer): rotate each pair of
// channels of a query or key by the angle theta = position * omega_j.
//
//   half (GPT-NeoX, HF Llama): pair j = (j, j + R/2)
//   interleaved (GPT-J, RoFormer): pair j = (2j, 2j + 1)
//   (x_a, x_b) -> (a*(x_a cos - x_b sin), a*(x_b cos + x_a sin)), j < R/2
// for rotary_dim R <= D (channels R .. D-1 untouched) and the attention factor
// a of the scaling (rope_scaling.h). inverse applies the transpose, angle
// -theta: the backward of the forward, and its inverse when a = 1.
//
// The work is split in two: a cos/sin table [rows, R/2] (once per position,
// shared by every head and by q and k), then the rotation of x, one pass over
// memory. Angles of Precision::kExact are formed as an exact double product
// reduced modulo 2*pi (DESIGN.md section 3), so tables are within a few float32
// ulps of cos/sin of the exact angle for |p| <= 2^24 and beyond; kFp32
// reproduces the common float32 formula (omega and p rounded to float32, the
// product in float32) for matching existing checkpoints.
//
// The same table builder serves axial RoPE (frequency j follows the
// coordinate of its axis), M-RoPE (frequency j follows its section's
// position), xPos (a per-row power of zeta folded into cos and sin) and
// re-rotation (the angle difference of two position / frequency sets).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "posenc/kernels/half_types.h"
#include "posenc/kernels/sinusoidal.h"  // Precision

namespace posenc::kernels {

enum class RopeLayout { kHalf, kInterleaved };

// "half" | "interleaved"; throws "[op] layout must be one of half, interleaved, got 'x'".
RopeLayout parse_rope_layout(std::string_view name, const char* op = "rope");
std::string_view rope_layout_name(RopeLayout layout) noexcept;

// ---------------------------------------------------------------------------
// cos/sin tables

// What the angle of (row r, frequency j) is:
//   theta[r, j] = pos[r, axis_of[j]] * omega[j]  -  pos_from[r, axis_of[j]] * omega_from[j]
// (the second term only when re-rotating), and the factor multiplying cos and sin:
//   scale[r, j] = attention_factor * zeta[j]^((pos[r, axis_of[j]] - xpos_center) * xpos_power)
// (the zeta term only for xPos). Positions are int64 [rows, n_axes], row-major.
struct RopeTableSpec {
  std::span<const double> omega;          // R/2 frequencies, finite
  std::span<const int32_t> axis_of;       // R/2 axis indices in [0, n_axes), or empty: axis 0
  int64_t n_axes = 1;                     // position columns per row, 1..3
  double attention_factor = 1.0;
  Precision precision = Precision::kExact;
  std::span<const double> omega_from;     // empty, or R/2: re-rotation from (pos_from, omega_from)
  std::span<const double> xpos_zeta;      // empty, or R/2 values in (0, 1]
  double xpos_power = 0.0;                // +1/scale_base for queries, -1/scale_base for keys
  double xpos_center = 0.0;               // subtracted from the position in the xPos power only
};

// Throws on an empty or non-finite omega, a bad axis index or n_axes, sizes
// of omega_from / xpos_zeta other than omega's, non-finite factors. `op` names the caller.
void validate(const RopeTableSpec& spec, const char* op = "rope");

// cos, sin: [rows, R/2] each. pos_from is null unless spec.omega_from is set.
// Runs of consecutive positions (1 axis, no re-rotation) take a rotation
// recurrence re-anchored from exact angles; everything else is exact per entry.
template <class T>  // float or double
void rope_cos_sin(const RopeTableSpec& spec, const int64_t* pos, const int64_t* pos_from, int64_t rows, T* cos,
                  T* sin);

// Positions start .. start+count-1 (1 axis, no re-rotation): the cache build.
template <class T>  // float or double
void rope_cos_sin_range(const RopeTableSpec& spec, int64_t start, int64_t count, T* cos, T* sin);

// ---------------------------------------------------------------------------
// Rotation

struct RopeApplyParams {
  int64_t head_dim = 0;    // D
  int64_t rotary_dim = 0;  // R: even, 2 <= R <= D
  RopeLayout layout = RopeLayout::kHalf;
  bool inverse = false;
};

// Throws "[op] rotary_dim must be even, got 7", "[op] rotary_dim must be at
// most head_dim (64), got 96", ...
void validate(const RopeApplyParams& params, const char* op = "rope");

// x viewed as (batch, heads, seq, D) with unit stride along D. Any (..., T, D)
// tensor is one: leading dims merged into heads (batch = 1), or batch = B
// when positions are (B, T).
template <class T>
struct RopeView {
  T* data = nullptr;
  int64_t batch = 1, heads = 1, seq = 0;
  int64_t stride_b = 0, stride_h = 0, stride_t = 0;  // in elements
};

// out = rotate(in). in and out may be the same view (in place) but must not
// otherwise overlap. cos/sin: [cos_batch, seq, R/2] with cos_batch 1 (shared
// by every batch row) or in.batch. C is double for T = double, else float
// (float32 math, rounded once to T). Channels R .. D-1 are copied when out is
// not in.
template <class T, class C>
void rope_apply(const RopeApplyParams& params, RopeView<const T> in, RopeView<T> out, const C* cos, const C* sin,
                int64_t cos_batch);

// The gradient with respect to the angles, summed over heads:
//   grad_theta[b, t, j] = sum_h (g_b * y_a - g_a * y_b),  y = rotate(x)
// (negated for inverse), [cos_batch, seq, R/2], overwritten. With
// theta = p * omega_j, dL/domega_j = sum_{b,t} p[b,t] * grad_theta[b,t,j]
// (learned frequencies); x and grad share the view shape.
template <class T, class C>
void rope_angle_grad(const RopeApplyParams& params, RopeView<const T> x, RopeView<const T> grad, const C* cos,
                     const C* sin, int64_t cos_batch, C* grad_theta);

}  // namespace posenc::kernels
