// QueryTemperature on the contract (query/key point, q alone): s(p) =
// log(floor((p + 1) / floor_scale) + 1) * attn_scale + 1 times the query at p.
#include "posenc/nn/query_temperature.h"

#include <ATen/ATen.h>

#include <cmath>
#include <vector>

#include "op_support.h"
#include "ops/rope/support.h"

namespace posenc::nn {
namespace {

constexpr const char* kModule = "QueryTemperature";

void check(const FamilySettings& s) {
  const double floor_scale = s.real("floor_scale"), attn_scale = s.real("attn_scale");
  TORCH_CHECK_VALUE(std::isfinite(floor_scale) && floor_scale > 0, "[", kModule, "] floor_scale must be > 0, got ",
                    floor_scale);
  TORCH_CHECK_VALUE(std::isfinite(attn_scale), "[", kModule, "] attn_scale must be finite, got ", attn_scale);
}

at::Tensor scales(const FamilySettings& s, const at::Tensor& positions, at::ScalarType dtype) {
  const at::Tensor p = detail::int64_positions(kModule, positions);
  if (p.numel() && detail::holds_data(p)) {  // traced: no values to check
    const int64_t first = p.min().item<int64_t>();
    TORCH_CHECK_VALUE(first >= 0, "[", kModule, "] positions must be >= 0, got ", first);
  }
  const at::Tensor x = p.to(at::kDouble);
  return (at::log(at::floor((x + 1) / s.real("floor_scale")) + 1) * s.real("attn_scale") + 1).to(dtype);
}

std::vector<at::Tensor> rotate(const FamilySettings& s, const FamilyState&, const RotateCall& call) {
  const at::Tensor& q = call.inputs[0];
  detail::check_rope_input(kModule, "q", q);
  const int64_t t = q.size(-2);
  TORCH_CHECK_VALUE(call.positions, "[", kModule, "] positions must be a tensor or an int, got None");
  const at::Tensor& positions = *call.positions;
  const at::ScalarType compute = detail::compute_dtype(q.scalar_type());
  at::Tensor factor;
  if (positions.dim() == 1 && positions.size(0) == t) {
    factor = scales(s, positions, compute).unsqueeze(-1);  // (T, 1)
  } else if (positions.dim() == 2 && q.dim() == 4 && positions.size(0) == q.size(0) && positions.size(1) == t) {
    factor = scales(s, positions, compute).unsqueeze(1).unsqueeze(-1);  // (B, 1, T, 1)
  } else {
    TORCH_CHECK_VALUE(false, "[", kModule, "] positions must have shape (T) = (", t, ") or (B, T), got ",
                      detail::shape_string(positions.sizes()));
  }
  return {(q.to(compute) * factor).to(q.scalar_type())};
}

FamilyContract contract() {
  FamilyContract c;
  c.module = kModule;
  c.summary =
      "Query temperature by position (Llama 4's NoPE layers, attn_temperature_tuning): forward(q, positions) "
      "multiplies the query at position p (from 0) by s(p) = log(floor((p + 1) / floor_scale) + 1) * attn_scale + 1, "
      "so that attention over a longer context does not flatten. q (..., T, D); positions an int N (0 .. N-1) or an "
      "integer tensor (T) or (B, T); scales in float64, the product in q's compute dtype.";
  SettingSpec floor_scale = real_setting("floor_scale", 8192.0, "positions per step of the log, > 0");
  SettingSpec attn_scale = real_setting("attn_scale", 0.1, "the log's weight");
  floor_scale.positional = attn_scale.positional = true;
  c.settings = {floor_scale, attn_scale};
  c.check = check;
  c.rotate_inputs = {"q"};
  c.positions_count = true;
  c.rotate = rotate;
  c.methods = {{"scales", {"positions", "dtype"},
                [](const FamilySettings& s, const FamilyState&, const MethodCall& call) {
                  TORCH_CHECK_VALUE(call.positions, "[", kModule, "] scales needs positions");
                  return scales(s, *call.positions, call.dtype.value_or(at::kDouble));
                }}};
  c.shown = {"floor_scale", "attn_scale"};
  return c;
}

const FamilyContractRegistration registered_contract(contract());

FamilySettings settings_of(const QueryTemperatureOptions& o) {
  FamilySettings s;
  return s.set("floor_scale", o.floor_scale()).set("attn_scale", o.attn_scale());
}

}  // namespace

QueryTemperatureImpl::QueryTemperatureImpl(const QueryTemperatureOptions& options)
    : FamilyTransformImpl(kModule, settings_of(options)), options_(options) {}

at::Tensor QueryTemperatureImpl::forward(const at::Tensor& q, const at::Tensor& positions) {
  return rotate({q}, positions)[0];
}

at::Tensor QueryTemperatureImpl::scales(const at::Tensor& positions, at::ScalarType dtype) const {
  MethodCall arguments;
  arguments.positions = positions, arguments.dtype = dtype;
  return call("scales", arguments);
}

}  // namespace posenc::nn
