// RoPE from C++ (torch.ops.posenc.rope* & co., docs/rope.md), taking the
// kernels' typed parameter structs, through the dispatcher like
// posenc/nn/absolute_ops.h. Bad arguments throw c10::ValueError with the
// kernels' messages; a wrong tensor dtype throws c10::TypeError.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <utility>

#include "posenc/kernels/rope.h"
#include "posenc/kernels/rope_scaling.h"
#include "posenc/kernels/sinusoidal.h"

namespace posenc::nn::ops {

// RoPE (kernels/rope*.h, docs/rope.md). x is (..., T, D) in any of the four
// floating dtypes, positions are integers (T), or (B, T) when x is
// (B, ..., T, D); the result has x's shape and dtype (float32 math, float64
// for float64 x, one rounding). Differentiable with respect to x (the
// backward is the inverse rotation) and to omega / cos / sin where taken.
// Tables are computed once per position and shared by every head.

struct RopeOptions {
  std::optional<int64_t> rotary_dim;  // R (even, <= D); unset: D
  double base = 10000.0;
  kernels::RopeLayout layout = kernels::RopeLayout::kHalf;
  kernels::RopeScaling scaling;      // Hugging Face rope_scaling, default: none
  std::optional<int64_t> seq_len;    // regime of dynamic / longrope; unset: max position + 1
  bool inverse = false;              // rotate by -theta
  kernels::Precision precision = kernels::Precision::kExact;
};

// (inv_freq, float64 [dim/2]; attention factor); seq_len unset: the original length
std::pair<at::Tensor, double> rope_inv_freq(int64_t dim, double base = 10000.0,
                                            const kernels::RopeScaling& scaling = {},
                                            std::optional<int64_t> seq_len = std::nullopt);
// (cos, sin): positions S -> S + [dim/2] each, attention factor included (uses base, scaling, seq_len, precision)
std::pair<at::Tensor, at::Tensor> rope_cos_sin(const at::Tensor& positions, int64_t dim,
                                               const RopeOptions& options = {}, at::ScalarType dtype = at::kFloat);
// positions start .. start+count-1 -> [count, dim/2] each
std::pair<at::Tensor, at::Tensor> rope_cos_sin_range(int64_t start, int64_t count, int64_t dim,
                                                     const RopeOptions& options = {},
                                                     at::ScalarType dtype = at::kFloat);
// Rotation by given tables cos/sin (T, R/2) or (B, T, R/2); differentiable wrt x, cos and sin.
at::Tensor rope_rotate(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin,
                       kernels::RopeLayout layout = kernels::RopeLayout::kHalf, bool inverse = false);
// In place; refused while x, cos or sin requires grad (under grad mode).
at::Tensor& rope_rotate_(at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin,
                         kernels::RopeLayout layout = kernels::RopeLayout::kHalf, bool inverse = false);

// Tables for the positions, then the rotation.
at::Tensor rope(const at::Tensor& x, const at::Tensor& positions, const RopeOptions& options = {});
at::Tensor& rope_(at::Tensor& x, const at::Tensor& positions, const RopeOptions& options = {});
// Learned frequencies omega [R/2] (angle p * omega) in place of base and scaling (which
// must be left at their defaults); differentiable wrt x and omega.
at::Tensor rope_learned(const at::Tensor& x, const at::Tensor& positions, const at::Tensor& omega,
                        const RopeOptions& options = {});

// Axial 2D/3D RoPE: coords (T, n_axes) or (B, T, n_axes).
struct RopeAxialOptions {
  std::vector<int64_t> dims_per_axis;          // empty: the even split of R
  std::optional<int64_t> rotary_dim;           // unset: D
  double base = 10000.0;
  kernels::RopeLayout layout = kernels::RopeLayout::kHalf;
  std::vector<kernels::RopeScaling> scaling;   // empty, one shared, or one per axis
  std::vector<int64_t> seq_len;                // empty (max coordinate + 1 per axis), or one per axis
  bool inverse = false;
  kernels::Precision precision = kernels::Precision::kExact;
};
// coords S + [n_axes] -> S + [R/2] each
std::pair<at::Tensor, at::Tensor> rope_axial_cos_sin(const at::Tensor& coords, int64_t rotary_dim,
                                                     const RopeAxialOptions& options = {},
                                                     at::ScalarType dtype = at::kFloat);
at::Tensor rope_axial(const at::Tensor& x, const at::Tensor& coords, const RopeAxialOptions& options = {});

// M-RoPE (Qwen2-VL; interleaved: Qwen3-VL): positions3 (3, T) or (3, B, T), rows t, h, w.
struct MRopeOptions {
  std::vector<int64_t> mrope_section;  // three sizes summing to R/2
  bool interleaved = false;
  std::optional<int64_t> rotary_dim;   // unset: D
  double base = 10000.0;
  kernels::RopeLayout layout = kernels::RopeLayout::kHalf;
  kernels::RopeScaling scaling;
  std::optional<int64_t> seq_len;      // unset: max position + 1
  bool inverse = false;
  kernels::Precision precision = kernels::Precision::kExact;
};
// positions3 [3] + S -> S + [R/2] each
std::pair<at::Tensor, at::Tensor> mrope_cos_sin(const at::Tensor& positions3, int64_t rotary_dim,
                                                const MRopeOptions& options, at::ScalarType dtype = at::kFloat);
at::Tensor mrope(const at::Tensor& x, const at::Tensor& positions3, const MRopeOptions& options);

// xPos (Sun et al. 2022): q scaled by zeta^((p - center)/scale_base), k by its inverse, both rotated.
struct XposOptions {
  double scale_base = 512.0;
  double gamma = 0.4;
  double center = 0.0;                // only moves the scales' magnitude; q.k is unchanged
  std::optional<int64_t> rotary_dim;  // unset: D
  double base = 10000.0;
  kernels::RopeLayout layout = kernels::RopeLayout::kHalf;
  kernels::Precision precision = kernels::Precision::kExact;
};
// The tables of the queries (keys = false) or of the keys: S -> S + [R/2] each
std::pair<at::Tensor, at::Tensor> xpos_cos_sin(const at::Tensor& positions, int64_t rotary_dim, bool keys,
                                               const XposOptions& options = {}, at::ScalarType dtype = at::kFloat);
std::pair<at::Tensor, at::Tensor> xpos(const at::Tensor& q, const at::Tensor& k, const at::Tensor& positions,
                                       const XposOptions& options = {});

// Re-rotation of cached keys: keys rotated at from_positions (with the from frequencies)
// become keys rotated at to_positions (with the to frequencies), in one rotation by the
// exact angle difference, attention factor ratio af_to / af_from.
struct RerotateOptions {
  std::optional<int64_t> rotary_dim;                // unset: D
  double base = 10000.0;
  kernels::RopeLayout layout = kernels::RopeLayout::kHalf;
  kernels::RopeScaling scaling;
  std::optional<int64_t> seq_len;                   // unset: max(from_positions) + 1
  std::optional<double> to_base;                    // unset: base
  std::optional<kernels::RopeScaling> to_scaling;   // unset: scaling
  std::optional<int64_t> to_seq_len;                // unset: seq_len if set, else max(to_positions) + 1
  kernels::Precision precision = kernels::Precision::kExact;
};
// (cos, sin) of the angle differences: S -> S + [dim/2] each
std::pair<at::Tensor, at::Tensor> rerotate_cos_sin(const at::Tensor& from_positions, const at::Tensor& to_positions,
                                                   int64_t dim, const RerotateOptions& options = {},
                                                   at::ScalarType dtype = at::kFloat);
at::Tensor rerotate(const at::Tensor& k, const at::Tensor& from_positions, const at::Tensor& to_positions,
                    const RerotateOptions& options = {});
at::Tensor& rerotate_(at::Tensor& k, const at::Tensor& from_positions, const at::Tensor& to_positions,
                      const RerotateOptions& options = {});

}  // namespace posenc::nn::ops
