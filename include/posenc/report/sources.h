// What posenc analyses: a position table [positions, dim] in float64, built
// through the kernels from a kind's parameters or read from a .npy /
// .safetensors file, with the exact translation operator when one is known.
//
//   sinusoidal (every layout)  PE[p + d] = T(d) PE[p], T the block rotation of
//                              kernels::translation_matrix (Vaswani et al. 2017, §3.5)
//   rope (cos/sin table)       the rotation of each (sin, cos) column pair by d*omega_i
//                              (analysis::rotation_operator)
//   anything else              no exact operator: the translation is fitted by least squares
// Tables are computed in float64 (the kernels' double path), so an exact
// operator leaves a residual ~1e-15.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "posenc/analysis/matrix.h"
#include "posenc/kernels/absolute.h"
#include "posenc/kernels/rope_scaling.h"
#include "posenc/kernels/sinusoidal_nd.h"

namespace posenc::report {

struct TableSource {
  std::string name;         // "sinusoidal", "pe.npy", "ckpt.safetensors:bert.embeddings.position_embeddings.weight"
  std::string description;  // one line: the formula or where the table came from
  analysis::Matrix table;   // [positions, dim]
  // T(delta), dim x dim, with PE[p + delta] = T(delta) PE[p]; empty: none known.
  std::function<analysis::Matrix(int64_t)> exact_operator;
  bool untrained = false;   // a learned table at its initialisation
};

// The kernels' tables in float64; they validate (kernel messages). `name`
// labels the source.
TableSource absolute_source(std::string_view name, const kernels::AbsoluteParams& params,
                            const kernels::Positions& positions);
// [H*W, D], or [F*H*W, D] when three_d.
TableSource grid_source(std::string_view name, bool three_d, const kernels::SinusoidalGridParams& params);
// RoPE's cos/sin table: cos(p omega_i) in columns [0, D/2), sin(p omega_i) in
// [D/2, D), both times the attention factor, p = start .. start + positions - 1;
// seq_len unset: max position + 1 (as `posenc table rope`).
TableSource rope_source(std::string_view name, int64_t dim, double base, const kernels::RopeScaling& scaling,
                        std::optional<int64_t> seq_len, kernels::Precision precision, int64_t start,
                        int64_t positions);
// Axial 2D RoPE's cos/sin table on a height x width grid (rows y*W + x; Heo et
// al. 2024): half the frequencies turn with y, half with x, each half with its
// own spectrum base^(-4i/D); columns as rope_source. No exact operator (a
// shift of the flattened row is not a shift on the grid).
TableSource rope_axial_source(std::string_view name, int64_t height, int64_t width, int64_t dim, double base);
// A learned table at its initialisation: N(0, std^2) entries drawn from `seed`
// (a fixed generator and Box-Muller, so every platform draws the same table).
// Throws "[learned] positions must be at least 1, got 0" (likewise dim) and
// "[learned] std must be finite and > 0, got 0".
TableSource learned_init_source(std::string_view name, int64_t positions, int64_t dim, double std, uint64_t seed);

// One tensor of a .npy / .safetensors file (io::load_tensor: `tensor` names
// it, else the file's only one or the one named like a position table),
// squeezed of leading 1s ([1, 197, 768] -> [197, 768]). Throws, with `op` the
// caller's name,
//   "[op] tensor 'w' of x.safetensors must be 2-D [positions, dim] (leading 1s are squeezed), got [2, 3, 4]"
//   "[op] tensor 'w' of x.safetensors has a non-finite value at (3, 7): nan"
// and io's errors unchanged.
TableSource file_source(std::string_view op, const std::string& path, const std::optional<std::string>& tensor);

// True for a SOURCE that names a file (".npy" or ".safetensors") rather than a kind.
bool is_file_source(std::string_view source) noexcept;

}  // namespace posenc::report
