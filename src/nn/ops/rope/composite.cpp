// The whole RoPE operations behind posenc.apply_rope & co.: check x against
// its positions, build the cos/sin tables once (shared by every head), then
// rotate. They call the table and rotation ops through the dispatcher, so
// the rotation's Autograd kernel makes them differentiable: hence
// CompositeImplicitAutograd.
//   rope        x (..., T, D), positions (T) | (B, T)   [omega: learned frequencies]
//   rope_axial  coords (T, n_axes) | (B, T, n_axes)
//   mrope       positions3 (3, T) | (3, B, T)
//   xpos        q, k (..., T, D), positions (T) | (B, T) -> (q', k')
//   rerotate    k, from/to positions (T) | (B, T)
#include <ATen/ATen.h>
#include <torch/library.h>

#include <string>
#include <tuple>

#include "dispatch.h"
#include "op_support.h"
#include "ops/rope/support.h"

namespace posenc::nn {
namespace {

using detail::given;

using detail::ScalingArg;
using detail::ScalingListArg;

// x and positions checked; positions as int64.
at::Tensor checked_positions(const char* op, const at::Tensor& x, const at::Tensor& positions,
                             std::string_view name = "positions") {
  detail::check_rope_input(op, "x", x);
  const at::Tensor p = detail::int64_positions(op, positions);
  detail::rows_batch(op, {name}, x, p.sizes(), p.sizes());
  return p;
}

// omega replaces base, scaling and seq_len: refuse those that would be ignored.
void check_omega_alone(const at::Tensor& x, const at::Tensor& omega, c10::optional<int64_t> rotary_dim,
                       const ScalingArg& scaling, c10::optional<int64_t> seq_len) {
  const kernels::RopeScaling s = detail::scaling_of(scaling);
  TORCH_CHECK_VALUE(s.type == kernels::RopeType::kDefault, "[rope] omega replaces the frequencies of base and ",
                    "scaling: pass scaling=None with omega, got rope_type '", kernels::rope_type_name(s.type), "'");
  TORCH_CHECK_VALUE(!seq_len.has_value(), "[rope] seq_len selects the regime of a scaling and has no meaning with ",
                    "omega, got ", seq_len.value_or(0));
  const int64_t r = detail::rotary_dim_of(x, rotary_dim);
  TORCH_CHECK_VALUE(omega.dim() != 1 || 2 * omega.numel() == r, "[rope] omega must have rotary_dim/2 = ", r / 2,
                    " frequencies (rotary_dim ", r, "), got ", omega.numel());
}

struct RopeTables {
  at::Tensor cos, sin;
};

RopeTables rope_tables(const at::Tensor& x, const at::Tensor& p, double base, c10::string_view layout,
                       c10::optional<int64_t> rotary_dim, const ScalingArg& scaling, c10::optional<int64_t> seq_len,
                       bool inverse, c10::string_view precision) {
  const int64_t r = detail::rotary_dim_of(x, rotary_dim);
  detail::rope_apply_params("rope", x, r, layout, inverse);  // rotary_dim and layout named as such
  auto [cos, sin] = dispatch::rope_cos_sin(p, r, base, scaling, seq_len, precision,
                                           detail::compute_dtype(x.scalar_type()));
  return {cos, sin};
}

at::Tensor rope(const at::Tensor& x, const at::Tensor& positions, double base, c10::string_view layout,
                c10::optional<int64_t> rotary_dim, const ScalingArg& scaling, c10::optional<int64_t> seq_len,
                bool inverse, c10::string_view precision, const c10::optional<at::Tensor>& omega) {
  const at::Tensor p = checked_positions("rope", x, positions);
  if (given(omega)) {
    check_omega_alone(x, *omega, rotary_dim, scaling, seq_len);
    return dispatch::rope_rotate_omega(x, p, *omega, layout, inverse, precision);
  }
  const RopeTables t = rope_tables(x, p, base, layout, rotary_dim, scaling, seq_len, inverse, precision);
  return dispatch::rope_rotate(x, t.cos, t.sin, layout, inverse);
}

at::Tensor& rope_(at::Tensor& x, const at::Tensor& positions, double base, c10::string_view layout,
                  c10::optional<int64_t> rotary_dim, const ScalingArg& scaling, c10::optional<int64_t> seq_len,
                  bool inverse, c10::string_view precision, const c10::optional<at::Tensor>& omega) {
  const at::Tensor p = checked_positions("rope", x, positions);
  if (given(omega)) {
    check_omega_alone(x, *omega, rotary_dim, scaling, seq_len);
    return dispatch::rope_rotate_omega_(x, p, *omega, layout, inverse, precision);
  }
  const RopeTables t = rope_tables(x, p, base, layout, rotary_dim, scaling, seq_len, inverse, precision);
  return dispatch::rope_rotate_(x, t.cos, t.sin, layout, inverse);
}

at::Tensor rope_axial(const at::Tensor& x, const at::Tensor& coords, at::IntArrayRef dims_per_axis, double base,
                      c10::string_view layout, c10::optional<int64_t> rotary_dim, const ScalingListArg& scaling,
                      at::OptionalIntArrayRef seq_len, bool inverse, c10::string_view precision) {
  constexpr const char* kOp = "rope-axial";
  detail::check_rope_input(kOp, "x", x);
  const at::Tensor c = detail::int64_positions(kOp, coords);
  // n_axes is the last extent once coords has one past (T); name it otherwise.
  const std::string n_axes = c.dim() >= 2 ? std::to_string(c.size(-1)) : "n_axes";
  const detail::RowsShape shape{"coords", "", ", n_axes", ", " + n_axes};
  detail::rows_batch(kOp, shape, x, c.dim() >= 2 ? c.sizes().slice(0, c.dim() - 1) : at::IntArrayRef(), c.sizes());
  const int64_t r = detail::rotary_dim_of(x, rotary_dim);
  detail::rope_apply_params(kOp, x, r, layout, inverse);
  auto [cos, sin] = dispatch::rope_axial_cos_sin(c, r, dims_per_axis, base, scaling, seq_len, precision,
                                                 detail::compute_dtype(x.scalar_type()));
  return dispatch::rope_rotate(x, cos, sin, layout, inverse);
}

at::Tensor mrope(const at::Tensor& x, const at::Tensor& positions3, at::IntArrayRef mrope_section, bool interleaved,
                 double base, c10::string_view layout, c10::optional<int64_t> rotary_dim, const ScalingArg& scaling,
                 c10::optional<int64_t> seq_len, bool inverse, c10::string_view precision) {
  constexpr const char* kOp = "mrope";
  detail::check_rope_input(kOp, "x", x);
  const at::Tensor p = detail::int64_positions(kOp, positions3);
  const bool three = p.dim() >= 2 && p.size(0) == 3;
  detail::rows_batch(kOp, {"positions", "3, "}, x, three ? p.sizes().slice(1) : at::IntArrayRef(), p.sizes());
  const int64_t r = detail::rotary_dim_of(x, rotary_dim);
  detail::rope_apply_params(kOp, x, r, layout, inverse);
  auto [cos, sin] = dispatch::mrope_cos_sin(p, r, mrope_section, interleaved, base, scaling, seq_len, precision,
                                            detail::compute_dtype(x.scalar_type()));
  return dispatch::rope_rotate(x, cos, sin, layout, inverse);
}

std::tuple<at::Tensor, at::Tensor> xpos(const at::Tensor& q, const at::Tensor& k, const at::Tensor& positions,
                                        double scale_base, double gamma, double center, double base,
                                        c10::string_view layout, c10::optional<int64_t> rotary_dim,
                                        c10::string_view precision) {
  constexpr const char* kOp = "xpos";
  detail::check_rope_input(kOp, "q", q);
  detail::check_rope_input(kOp, "k", k);
  const at::Tensor p = detail::int64_positions(kOp, positions);
  detail::rows_batch(kOp, {}, q, p.sizes(), p.sizes());
  detail::rows_batch(kOp, {}, k, p.sizes(), p.sizes());
  TORCH_CHECK_VALUE(q.size(-1) == k.size(-1), "[", kOp, "] q and k must have the same head dim, got ", q.size(-1),
                    " and ", k.size(-1));
  const int64_t r = detail::rotary_dim_of(q, rotary_dim);
  detail::rope_apply_params(kOp, q, r, layout, false);
  const at::ScalarType compute = detail::compute_dtype(q.scalar_type());
  auto [q_cos, q_sin] = dispatch::xpos_cos_sin(p, r, scale_base, gamma, center, false, base, precision, compute);
  auto [k_cos, k_sin] = dispatch::xpos_cos_sin(p, r, scale_base, gamma, center, true, base, precision,
                                               detail::compute_dtype(k.scalar_type()));
  return {dispatch::rope_rotate(q, q_cos, q_sin, layout, false), dispatch::rope_rotate(k, k_cos, k_sin, layout, false)};
}

RopeTables rerotate_tables(const at::Tensor& k, const at::Tensor& from_positions, const at::Tensor& to_positions,
                           double base, c10::string_view layout, c10::optional<int64_t> rotary_dim,
                           const ScalingArg& scaling, c10::optional<int64_t> seq_len, c10::optional<double> to_base,
                           const ScalingArg& to_scaling, c10::optional<int64_t> to_seq_len,
                           c10::string_view precision) {
  constexpr const char* kOp = "rerotate";
  const at::Tensor from = checked_positions(kOp, k, from_positions, "from_positions");
  const at::Tensor to = detail::int64_positions(kOp, to_positions);
  detail::rows_batch(kOp, {"to_positions"}, k, to.sizes(), to.sizes());
  const int64_t r = detail::rotary_dim_of(k, rotary_dim);
  detail::rope_apply_params(kOp, k, r, layout, false);
  auto [cos, sin] = dispatch::rope_rerotate_cos_sin(from, to, r, base, scaling, seq_len, to_base, to_scaling,
                                                    to_seq_len, precision, detail::compute_dtype(k.scalar_type()));
  return {cos, sin};
}

at::Tensor rerotate(const at::Tensor& k, const at::Tensor& from_positions, const at::Tensor& to_positions,
                    double base, c10::string_view layout, c10::optional<int64_t> rotary_dim,
                    const ScalingArg& scaling, c10::optional<int64_t> seq_len, c10::optional<double> to_base,
                    const ScalingArg& to_scaling, c10::optional<int64_t> to_seq_len, c10::string_view precision) {
  const RopeTables t = rerotate_tables(k, from_positions, to_positions, base, layout, rotary_dim, scaling, seq_len,
                                       to_base, to_scaling, to_seq_len, precision);
  return dispatch::rope_rotate(k, t.cos, t.sin, layout, false);
}

at::Tensor& rerotate_(at::Tensor& k, const at::Tensor& from_positions, const at::Tensor& to_positions, double base,
                      c10::string_view layout, c10::optional<int64_t> rotary_dim, const ScalingArg& scaling,
                      c10::optional<int64_t> seq_len, c10::optional<double> to_base, const ScalingArg& to_scaling,
                      c10::optional<int64_t> to_seq_len, c10::string_view precision) {
  TORCH_CHECK(!(at::GradMode::is_enabled() && k.requires_grad()), "[rerotate] inplace=True is not differentiable, ",
              "but k requires grad: use inplace=False, or run under torch.no_grad()");
  const RopeTables t = rerotate_tables(k, from_positions, to_positions, base, layout, rotary_dim, scaling, seq_len,
                                       to_base, to_scaling, to_seq_len, precision);
  return dispatch::rope_rotate_(k, t.cos, t.sin, layout, false);
}

}  // namespace

TORCH_LIBRARY_IMPL(posenc, CompositeImplicitAutograd, m) {
  m.impl("rope", rope);
  m.impl("rope_", rope_);
  m.impl("rope_axial", rope_axial);
  m.impl("mrope", mrope);
  m.impl("xpos", xpos);
  m.impl("rerotate", rerotate);
  m.impl("rerotate_", rerotate_);
}

}  // namespace posenc::nn
