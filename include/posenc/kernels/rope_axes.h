// Frequencies of multi-axis RoPE, as (omega_j, axis_of[j]) pairs for
// RopeTableSpec (rope.h): frequency j rotates by the coordinate of axis_of[j].
//
// Axial 2D/3D RoPE (images, video; Heo et al. 2024, "Rotary Position Embedding
// for Vision Transformer"): the R/2 rotary frequencies are split into one
// block per axis, dims_per_axis[a]/2 frequencies each, in axis order; block a
// has its own spectrum base^(-2i/dims_per_axis[a]) and its own scaling (a
// larger image or a longer video at inference).
//
// M-RoPE (Qwen2-VL, Wang et al. 2024): one spectrum base^(-2j/R) over the R/2
// frequencies; positions (t, h, w). Contiguous sections (mrope_section, summing
// to R/2): the first section[0] frequencies follow t, the next section[1] h,
// the last section[2] w. Interleaved (Qwen3-VL): frequency j follows h when
// j % 3 == 1 and j < 3*section[1], w when j % 3 == 2 and j < 3*section[2],
// else t.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "posenc/kernels/rope_scaling.h"

namespace posenc::kernels {

struct RopeAxisFrequencies {
  std::vector<double> omega;     // R/2
  std::vector<int32_t> axis_of;  // R/2
  double attention_factor = 1.0;
};

// dims_per_axis: 1..3 even values > 0 summing to the rotary dim. scaling: one
// per axis, or a single one shared by all axes, or empty (default). seq_len:
// empty, or one per axis (the regime of dynamic / longrope on that axis).
// The axes' attention factors must agree (they multiply the same cos/sin).
RopeAxisFrequencies rope_axial_frequencies(std::span<const int64_t> dims_per_axis, double base,
                                           std::span<const RopeScaling> scaling,
                                           std::span<const int64_t> seq_len = {},
                                           const char* op = "rope-axial");

// Throws unless dims_per_axis has 1..3 even entries > 0 summing to rotary_dim:
// "[op] dims_per_axis must sum to rotary_dim = 64, got 60 (32+28)".
void validate_axial_dims(std::span<const int64_t> dims_per_axis, int64_t rotary_dim, const char* op = "rope-axial");

// The even split of rotary_dim over n_axes: [R/n] * n; throws unless each
// share is even.
std::vector<int64_t> rope_axial_default_dims(int64_t rotary_dim, int64_t n_axes, const char* op = "rope-axial");

// M-RoPE: sections summing to rotary_dim/2 (three of them, t/h/w).
RopeAxisFrequencies mrope_frequencies(int64_t rotary_dim, double base, const RopeScaling& scaling,
                                      std::span<const int64_t> mrope_section, bool interleaved,
                                      std::optional<int64_t> seq_len = std::nullopt, const char* op = "mrope");

// xPos (Sun et al. 2022, "A Length-Extrapolatable Transformer"):
//   zeta_j = (2j/R + gamma) / (1 + gamma), gamma = 0.4, j < R/2;
// queries get zeta^(p/scale_base), keys zeta^(-p/scale_base), so q.k carries
// zeta^((i-j)/scale_base).
std::vector<double> xpos_zeta(int64_t rotary_dim, double gamma = 0.4);

}  // namespace posenc::kernels
