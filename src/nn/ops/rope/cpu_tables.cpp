// CPU kernels of the RoPE table ops (kernels/rope.h, rope_scaling.h,
// rope_axes.h): frequencies, and cos/sin tables for plain, axial, M-RoPE,
// xPos and re-rotation angles. Each validates once (in the kernels), fills
// float32 or float64 tables, and rounds once to the requested dtype.
//   positions S -> cos, sin: S + [R/2]
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "op_support.h"
#include "posenc/kernels/positions.h"
#include "posenc/kernels/rope.h"
#include "posenc/kernels/rope_axes.h"
#include "posenc/kernels/rope_scaling.h"
#include "ops/rope/support.h"

namespace posenc::nn {
namespace {

using detail::ScalingArg;
using detail::ScalingListArg;
using detail::to_std;
using Tables = std::tuple<at::Tensor, at::Tensor>;

kernels::Precision parse_precision(c10::string_view precision, const char* op) {
  return detail::translate_errors([&] { return kernels::parse_precision(to_std(precision), op); });
}

// cos, sin of shape rows_shape + [half] in dtype; fill(cos, sin) writes them
// as float or double (dtype's compute type) and is skipped when there are no rows.
template <class Fill>
Tables make_tables(at::IntArrayRef rows_shape, int64_t half, at::ScalarType dtype, Fill&& fill) {
  const at::ScalarType compute = detail::compute_dtype(dtype);
  const std::vector<int64_t> sizes = detail::table_sizes(rows_shape, half);
  at::Tensor cos = at::empty(sizes, at::TensorOptions().dtype(compute));
  at::Tensor sin = at::empty(sizes, at::TensorOptions().dtype(compute));
  if (cos.numel() > 0) {
    detail::translate_errors([&] {
      if (compute == at::kDouble) {
        fill(cos.data_ptr<double>(), sin.data_ptr<double>());
      } else {
        fill(cos.data_ptr<float>(), sin.data_ptr<float>());
      }
    });
  }
  return {cos.to(dtype), sin.to(dtype)};
}

// Validates the spec with the kernels' messages.
void check_spec(const kernels::RopeTableSpec& spec, const char* op) {
  detail::translate_errors([&] { kernels::validate(spec, op); });
}

kernels::RopeFrequencies frequencies(const char* op, int64_t dim, double base, const ScalingArg& scaling,
                                     c10::optional<int64_t> seq_len) {
  return detail::translate_errors([&] {
    return kernels::rope_frequencies(dim, base, detail::scaling_of(scaling),
                                     seq_len ? std::optional<int64_t>(*seq_len) : std::nullopt, op);
  });
}

std::vector<std::string> rope_scaling_keys() { return detail::rope_scaling_keys(); }

// -> (float64 [dim/2], attention factor)
std::tuple<at::Tensor, double> rope_inv_freq(int64_t dim, double base, const ScalingArg& scaling,
                                             c10::optional<int64_t> seq_len) {
  const kernels::RopeFrequencies f = frequencies("rope", dim, base, scaling, seq_len);
  at::Tensor inv_freq = at::empty({static_cast<int64_t>(f.inv_freq.size())}, at::TensorOptions().dtype(at::kDouble));
  std::copy(f.inv_freq.begin(), f.inv_freq.end(), inv_freq.data_ptr<double>());
  return {inv_freq, f.attention_factor};
}

// positions: S -> S + [dim/2]
Tables rope_cos_sin(const at::Tensor& positions, int64_t dim, double base, const ScalingArg& scaling,
                    c10::optional<int64_t> seq_len, c10::string_view precision, c10::optional<at::ScalarType> dtype) {
  const at::ScalarType out = detail::output_dtype("rope", dtype);
  const at::Tensor p = detail::int64_positions("rope", positions);
  const kernels::RopeFrequencies f = frequencies("rope", dim, base, scaling, detail::default_seq_len(p, seq_len));
  kernels::RopeTableSpec spec;
  spec.omega = f.inv_freq;
  spec.attention_factor = f.attention_factor;
  spec.precision = parse_precision(precision, "rope");
  check_spec(spec, "rope");
  return make_tables(p.sizes(), static_cast<int64_t>(f.inv_freq.size()), out, [&](auto* cos, auto* sin) {
    kernels::rope_cos_sin(spec, p.data_ptr<int64_t>(), nullptr, p.numel(), cos, sin);
  });
}

// -> [count, dim/2], positions start .. start+count-1
Tables rope_cos_sin_range(int64_t start, int64_t count, int64_t dim, double base, const ScalingArg& scaling,
                          c10::optional<int64_t> seq_len, c10::string_view precision,
                          c10::optional<at::ScalarType> dtype) {
  const at::ScalarType out = detail::output_dtype("rope", dtype);
  // The regime of the whole range, as for explicit positions: last + 1.
  const c10::optional<int64_t> length =
      seq_len ? seq_len : c10::optional<int64_t>(std::max<int64_t>(start + count, 1));
  const kernels::RopeFrequencies f = frequencies("rope", dim, base, scaling, length);
  detail::translate_errors(
      [&] { kernels::validate_table_size("rope", kernels::Positions::range(start, count), dim); });
  kernels::RopeTableSpec spec;
  spec.omega = f.inv_freq;
  spec.attention_factor = f.attention_factor;
  spec.precision = parse_precision(precision, "rope");
  check_spec(spec, "rope");
  return make_tables({count}, static_cast<int64_t>(f.inv_freq.size()), out, [&](auto* cos, auto* sin) {
    kernels::rope_cos_sin_range(spec, start, count, cos, sin);
  });
}

// Positions or coordinates whose last dimension holds the axes, as int64.
at::Tensor int64_coords(const char* op, std::string_view name, const at::Tensor& coords) {
  TORCH_CHECK_VALUE(coords.defined(), "[", op, "] ", name, " must be a tensor, got None");
  TORCH_CHECK_TYPE(detail::is_position_dtype(coords.scalar_type()), "[", op, "] ", name, " must be ",
                   detail::kPositionDtypes, ", got ", coords.scalar_type());
  TORCH_CHECK_VALUE(coords.device().is_cpu(), "[", op, "] ", name, " must be on the CPU, got ", coords.device());
  return coords.to(at::kLong);
}

// coords: S + [n_axes] -> S + [R/2]
Tables rope_axial_cos_sin(const at::Tensor& coords, int64_t rotary_dim, at::IntArrayRef dims_per_axis, double base,
                          const ScalingListArg& scaling, at::OptionalIntArrayRef seq_len,
                          c10::string_view precision, c10::optional<at::ScalarType> dtype) {
  constexpr const char* kOp = "rope-axial";
  const at::ScalarType out = detail::output_dtype(kOp, dtype);
  const at::Tensor c = int64_coords(kOp, "coords", coords).contiguous();
  TORCH_CHECK_VALUE(c.dim() >= 1 && c.size(-1) >= 1 && c.size(-1) <= 3, "[", kOp,
                    "] coords must have shape (..., n_axes) with n_axes 1, 2 or 3, got ",
                    detail::shape_string(c.sizes()));
  const int64_t n_axes = c.size(-1);
  const int64_t rows = c.numel() / n_axes;
  std::vector<int64_t> dims(dims_per_axis.begin(), dims_per_axis.end());
  detail::translate_errors([&] {
    if (dims.empty()) {
      dims = kernels::rope_axial_default_dims(rotary_dim, n_axes, kOp);
    } else {
      kernels::validate_axial_dims(dims, rotary_dim, kOp);
    }
  });
  TORCH_CHECK_VALUE(static_cast<int64_t>(dims.size()) == n_axes, "[", kOp,
                    "] dims_per_axis must have one entry per axis of coords (", n_axes, "), got ", dims.size());
  // Per-axis regime: max coordinate + 1 on each axis unless given.
  std::vector<int64_t> lengths;
  if (seq_len.has_value()) {
    lengths.assign(seq_len->begin(), seq_len->end());
  } else if (rows > 0) {
    const at::Tensor last = std::get<0>(c.reshape({rows, n_axes}).max(0));
    for (int64_t a = 0; a < n_axes; ++a) lengths.push_back(std::max<int64_t>(last[a].item<int64_t>(), 0) + 1);
  }
  const std::vector<kernels::RopeScaling> scalings = detail::scalings_of(scaling);
  const kernels::RopeAxisFrequencies f = detail::translate_errors(
      [&] { return kernels::rope_axial_frequencies(dims, base, scalings, lengths, kOp); });
  kernels::RopeTableSpec spec;
  spec.omega = f.omega;
  spec.axis_of = f.axis_of;
  spec.n_axes = n_axes;
  spec.attention_factor = f.attention_factor;
  spec.precision = parse_precision(precision, kOp);
  check_spec(spec, kOp);
  return make_tables(c.sizes().slice(0, c.dim() - 1), static_cast<int64_t>(f.omega.size()), out,
                     [&](auto* cos, auto* sin) {
                       kernels::rope_cos_sin(spec, c.data_ptr<int64_t>(), nullptr, rows, cos, sin);
                     });
}

// positions3: [3] + S -> S + [R/2]
Tables mrope_cos_sin(const at::Tensor& positions3, int64_t rotary_dim, at::IntArrayRef mrope_section,
                     bool interleaved, double base, const ScalingArg& scaling, c10::optional<int64_t> seq_len,
                     c10::string_view precision, c10::optional<at::ScalarType> dtype) {
  constexpr const char* kOp = "mrope";
  const at::ScalarType out = detail::output_dtype(kOp, dtype);
  const at::Tensor p = int64_coords(kOp, "positions", positions3);
  TORCH_CHECK_VALUE(p.dim() >= 1 && p.size(0) == 3, "[", kOp,
                    "] positions must have shape (3, ...) (t, h, w first), got ", detail::shape_string(p.sizes()));
  const at::Tensor rows_by_axis = p.movedim(0, -1).contiguous();  // S + [3]
  const std::vector<int64_t> sections(mrope_section.begin(), mrope_section.end());
  const kernels::RopeAxisFrequencies f = detail::translate_errors([&] {
    const c10::optional<int64_t> length = detail::default_seq_len(p, seq_len);
    return kernels::mrope_frequencies(rotary_dim, base, detail::scaling_of(scaling), sections, interleaved,
                                      length ? std::optional<int64_t>(*length) : std::nullopt, kOp);
  });
  kernels::RopeTableSpec spec;
  spec.omega = f.omega;
  spec.axis_of = f.axis_of;
  spec.n_axes = 3;
  spec.attention_factor = f.attention_factor;
  spec.precision = parse_precision(precision, kOp);
  check_spec(spec, kOp);
  return make_tables(p.sizes().slice(1), static_cast<int64_t>(f.omega.size()), out, [&](auto* cos, auto* sin) {
    kernels::rope_cos_sin(spec, rows_by_axis.data_ptr<int64_t>(), nullptr, rows_by_axis.numel() / 3, cos, sin);
  });
}

// positions: S -> S + [R/2], scaled by zeta^(+-(p - center)/scale_base)
Tables xpos_cos_sin(const at::Tensor& positions, int64_t rotary_dim, double scale_base, double gamma,
                    double center, bool keys, double base, c10::string_view precision,
                    c10::optional<at::ScalarType> dtype) {
  constexpr const char* kOp = "xpos";
  const at::ScalarType out = detail::output_dtype(kOp, dtype);
  const at::Tensor p = detail::int64_positions(kOp, positions);
  TORCH_CHECK_VALUE(std::isfinite(scale_base) && scale_base > 0, "[", kOp,
                    "] scale_base must be finite and > 0, got ", scale_base);
  TORCH_CHECK_VALUE(std::isfinite(gamma) && gamma > 0, "[", kOp, "] gamma must be finite and > 0, got ", gamma);
  const kernels::RopeFrequencies f = frequencies(kOp, rotary_dim, base, c10::nullopt, c10::nullopt);
  const std::vector<double> zeta = kernels::xpos_zeta(rotary_dim, gamma);
  kernels::RopeTableSpec spec;
  spec.omega = f.inv_freq;
  spec.attention_factor = f.attention_factor;
  spec.precision = parse_precision(precision, kOp);
  spec.xpos_zeta = zeta;
  spec.xpos_power = (keys ? -1.0 : 1.0) / scale_base;
  spec.xpos_center = center;
  check_spec(spec, kOp);
  return make_tables(p.sizes(), static_cast<int64_t>(f.inv_freq.size()), out, [&](auto* cos, auto* sin) {
    kernels::rope_cos_sin(spec, p.data_ptr<int64_t>(), nullptr, p.numel(), cos, sin);
  });
}

// from_positions, to_positions: S -> S + [dim/2]
Tables rope_rerotate_cos_sin(const at::Tensor& from_positions, const at::Tensor& to_positions, int64_t dim,
                             double base, const ScalingArg& scaling, c10::optional<int64_t> seq_len,
                             c10::optional<double> to_base, const ScalingArg& to_scaling,
                             c10::optional<int64_t> to_seq_len, c10::string_view precision,
                             c10::optional<at::ScalarType> dtype) {
  constexpr const char* kOp = "rerotate";
  const at::ScalarType out = detail::output_dtype(kOp, dtype);
  const at::Tensor from = detail::int64_positions(kOp, from_positions);
  const at::Tensor to = detail::int64_positions(kOp, to_positions);
  TORCH_CHECK_VALUE(from.sizes() == to.sizes(), "[", kOp, "] from_positions and to_positions must have the same ",
                    "shape, got ", detail::shape_string(from.sizes()), " and ", detail::shape_string(to.sizes()));
  const kernels::RopeFrequencies f_from = frequencies(kOp, dim, base, scaling, detail::default_seq_len(from, seq_len));
  const bool same_scaling = !to_scaling.has_value() || !to_scaling->defined();
  const kernels::RopeFrequencies f_to =
      frequencies(kOp, dim, to_base.value_or(base), same_scaling ? scaling : to_scaling,
                  detail::default_seq_len(to, to_seq_len ? to_seq_len : seq_len));
  kernels::RopeTableSpec spec;
  spec.omega = f_to.inv_freq;
  spec.attention_factor = f_to.attention_factor / f_from.attention_factor;
  spec.precision = parse_precision(precision, kOp);
  spec.omega_from = f_from.inv_freq;
  check_spec(spec, kOp);
  return make_tables(from.sizes(), static_cast<int64_t>(f_to.inv_freq.size()), out, [&](auto* cos, auto* sin) {
    kernels::rope_cos_sin(spec, to.data_ptr<int64_t>(), from.data_ptr<int64_t>(), to.numel(), cos, sin);
  });
}

}  // namespace

TORCH_LIBRARY_IMPL(posenc, CPU, m) {
  m.impl("rope_cos_sin", rope_cos_sin);
  m.impl("rope_axial_cos_sin", rope_axial_cos_sin);
  m.impl("mrope_cos_sin", mrope_cos_sin);
  m.impl("xpos_cos_sin", xpos_cos_sin);
  m.impl("rope_rerotate_cos_sin", rope_rerotate_cos_sin);
}

TORCH_LIBRARY_IMPL(posenc, CompositeExplicitAutograd, m) {
  m.impl("rope_scaling_keys", rope_scaling_keys);
  m.impl("rope_inv_freq", rope_inv_freq);
  m.impl("rope_cos_sin_range", rope_cos_sin_range);
}

}  // namespace posenc::nn
