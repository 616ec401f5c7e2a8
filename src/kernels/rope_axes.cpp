// Multi-axis RoPE frequencies: axial 2D/3D blocks, M-RoPE sections (Qwen2-VL
// contiguous, Qwen3-VL interleaved), and the xPos decay rates.
#include "posenc/kernels/rope_axes.h"

#include <cmath>
#include <string>

#include "posenc/error.h"

namespace posenc::kernels {
namespace {

// "16+24+20", for messages about sums.
std::string joined_sum(std::span<const int64_t> values) {
  std::string s;
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) s += '+';
    s += std::to_string(values[i]);
  }
  return s;
}

void check_axial_dims(std::span<const int64_t> dims_per_axis, const char* op) {
  require(!dims_per_axis.empty() && dims_per_axis.size() <= 3, op, "dims_per_axis must have 1 to 3 entries, got ",
          dims_per_axis.size());
  for (size_t a = 0; a < dims_per_axis.size(); ++a) {
    require(dims_per_axis[a] >= 2 && dims_per_axis[a] % 2 == 0, op, "dims_per_axis[", a,
            "] must be even and > 0, got ", dims_per_axis[a]);
  }
}

}  // namespace

void validate_axial_dims(std::span<const int64_t> dims_per_axis, int64_t rotary_dim, const char* op) {
  check_axial_dims(dims_per_axis, op);
  int64_t sum = 0;
  for (int64_t d : dims_per_axis) sum += d;
  require(sum == rotary_dim, op, "dims_per_axis must sum to rotary_dim = ", rotary_dim, ", got ", sum, " (",
          joined_sum(dims_per_axis), ")");
}

RopeAxisFrequencies rope_axial_frequencies(std::span<const int64_t> dims_per_axis, double base,
                                           std::span<const RopeScaling> scaling, std::span<const int64_t> seq_len,
                                           const char* op) {
  check_axial_dims(dims_per_axis, op);
  const size_t n_axes = dims_per_axis.size();
  require(scaling.size() <= 1 || scaling.size() == n_axes, op, "scaling must have 0, 1 or n_axes = ", n_axes,
          " entries, got ", scaling.size());
  require(seq_len.empty() || seq_len.size() == n_axes, op, "seq_len must have 0 or n_axes = ", n_axes,
          " entries, got ", seq_len.size());

  const RopeScaling unscaled;
  RopeAxisFrequencies out;
  for (size_t a = 0; a < n_axes; ++a) {
    const RopeScaling& s = scaling.empty() ? unscaled : scaling[scaling.size() == 1 ? 0 : a];
    const std::optional<int64_t> axis_len = seq_len.empty() ? std::nullopt : std::optional<int64_t>(seq_len[a]);
    // Each axis is a RoPE of its own width: spectrum base^(-2i/dims[a]).
    const RopeFrequencies f = rope_frequencies(dims_per_axis[a], base, s, axis_len, op);
    if (a == 0) {
      out.attention_factor = f.attention_factor;
    } else {
      // One cos/sin table carries a single factor for every axis.
      require(f.attention_factor == out.attention_factor, op,
              "the axes' attention factors must agree (they scale the same cos/sin), got ", out.attention_factor,
              " for axis 0 and ", f.attention_factor, " for axis ", a);
    }
    out.omega.insert(out.omega.end(), f.inv_freq.begin(), f.inv_freq.end());
    out.axis_of.insert(out.axis_of.end(), f.inv_freq.size(), static_cast<int32_t>(a));
  }
  return out;
}

std::vector<int64_t> rope_axial_default_dims(int64_t rotary_dim, int64_t n_axes, const char* op) {
  require(n_axes >= 1 && n_axes <= 3, op, "n_axes must be 1, 2 or 3, got ", n_axes);
  require(rotary_dim >= 1, op, "rotary_dim must be positive, got ", rotary_dim);
  require(rotary_dim % (2 * n_axes) == 0, op, "rotary_dim must be divisible by ", 2 * n_axes,
          " (an even share per axis), got ", rotary_dim);
  return std::vector<int64_t>(static_cast<size_t>(n_axes), rotary_dim / n_axes);
}

RopeAxisFrequencies mrope_frequencies(int64_t rotary_dim, double base, const RopeScaling& scaling,
                                      std::span<const int64_t> mrope_section, bool interleaved,
                                      std::optional<int64_t> seq_len, const char* op) {
  RopeFrequencies f = rope_frequencies(rotary_dim, base, scaling, seq_len, op);
  require(mrope_section.size() == 3, op, "mrope_section must have 3 entries (t, h, w), got ", mrope_section.size());
  int64_t sum = 0;
  for (size_t a = 0; a < 3; ++a) {
    require(mrope_section[a] >= 0, op, "mrope_section[", a, "] must be >= 0, got ", mrope_section[a]);
    sum += mrope_section[a];
  }
  require(sum == rotary_dim / 2, op, "mrope_section must sum to rotary_dim/2 = ", rotary_dim / 2, ", got ", sum,
          " (", joined_sum(mrope_section), ")");

  const int64_t half = rotary_dim / 2;
  RopeAxisFrequencies out;
  out.omega = std::move(f.inv_freq);
  out.attention_factor = f.attention_factor;
  out.axis_of.resize(static_cast<size_t>(half));
  for (int64_t j = 0; j < half; ++j) {
    int32_t axis = 0;
    if (interleaved) {
      // Qwen3-VL apply_interleaved_mrope: h takes slots 1, 4, 7, ... below
      // 3*section[1], w slots 2, 5, 8, ... below 3*section[2]; t the rest.
      if (j % 3 == 1 && j < 3 * mrope_section[1]) axis = 1;
      if (j % 3 == 2 && j < 3 * mrope_section[2]) axis = 2;
    } else {
      // Qwen2-VL: consecutive blocks t | h | w.
      axis = j < mrope_section[0] ? 0 : j < mrope_section[0] + mrope_section[1] ? 1 : 2;
    }
    out.axis_of[static_cast<size_t>(j)] = axis;
  }
  return out;
}

std::vector<double> xpos_zeta(int64_t rotary_dim, double gamma) {
  const char* op = "xpos";
  require(rotary_dim >= 1, op, "rotary_dim must be positive, got ", rotary_dim);
  require(rotary_dim % 2 == 0, op, "rotary_dim must be even, got ", rotary_dim);
  // gamma = 0 would give zeta_0 = 0, whose negative powers (keys) are infinite.
  require(std::isfinite(gamma) && gamma > 0, op, "gamma must be finite and > 0, got ", gamma);
  std::vector<double> zeta(static_cast<size_t>(rotary_dim / 2));
  const long double g = gamma;
  for (int64_t j = 0; j < rotary_dim / 2; ++j) {
    const long double x = 2.0L * static_cast<long double>(j) / static_cast<long double>(rotary_dim);
    zeta[static_cast<size_t>(j)] = static_cast<double>((x + g) / (1.0L + g));
  }
  return zeta;
}

}  // namespace posenc::kernels
