#include "ops/rope/support.h"

#include <algorithm>
#include <limits>
#include <sstream>

#include "op_support.h"

namespace posenc::nn::detail {

std::vector<std::string> rope_scaling_keys() {
  return {"rope_type",
          "type",
          "factor",
          "original_max_position_embeddings",
          "max_position_embeddings",
          "beta_fast",
          "beta_slow",
          "mscale",
          "mscale_all_dim",
          "truncate",
          "attention_factor",
          "short_factor",
          "long_factor",
          "low_freq_factor",
          "high_freq_factor",
          "partial_rotary_factor"};
}

kernels::RopeScaling make_rope_scaling(
    const c10::optional<std::string>& rope_type, const c10::optional<std::string>& type,
    c10::optional<double> factor, c10::optional<int64_t> original_max_position_embeddings,
    c10::optional<int64_t> max_position_embeddings, c10::optional<double> beta_fast, c10::optional<double> beta_slow,
    c10::optional<double> mscale, c10::optional<double> mscale_all_dim, c10::optional<bool> truncate,
    c10::optional<double> attention_factor, const c10::optional<std::vector<double>>& short_factor,
    const c10::optional<std::vector<double>>& long_factor, c10::optional<double> low_freq_factor,
    c10::optional<double> high_freq_factor, c10::optional<double> partial_rotary_factor) {
  TORCH_CHECK_VALUE(!rope_type || !type || *rope_type == *type, "[rope] rope_scaling keys 'rope_type' ('",
                    *rope_type, "') and 'type' ('", type.value_or(""), "') disagree");
  const c10::optional<std::string>& name = rope_type ? rope_type : type;
  kernels::RopeScaling s;
  s.factor = std_optional(factor);
  s.original_max_position_embeddings = std_optional(original_max_position_embeddings);
  s.max_position_embeddings = std_optional(max_position_embeddings);
  s.beta_fast = std_optional(beta_fast);
  s.beta_slow = std_optional(beta_slow);
  s.mscale = std_optional(mscale);
  s.mscale_all_dim = std_optional(mscale_all_dim);
  s.truncate = std_optional(truncate);
  s.attention_factor = std_optional(attention_factor);
  s.short_factor = short_factor.value_or(std::vector<double>{});
  s.long_factor = long_factor.value_or(std::vector<double>{});
  s.low_freq_factor = std_optional(low_freq_factor);
  s.high_freq_factor = std_optional(high_freq_factor);
  s.partial_rotary_factor = std_optional(partial_rotary_factor);
  if (name) {
    s.type = translate_errors([&] { return kernels::parse_rope_type(*name, "rope"); });
  } else {
    // Without a type, the keys would be read under "default" and refused one
    // by one; name the missing key instead.
    const bool any = factor || original_max_position_embeddings || max_position_embeddings || beta_fast ||
                     beta_slow || mscale || mscale_all_dim || truncate || attention_factor || short_factor ||
                     long_factor || low_freq_factor || high_freq_factor || partial_rotary_factor;
    TORCH_CHECK_VALUE(!any, "[rope] rope_scaling needs the key 'rope_type' (one of default, linear, ntk, dynamic, ",
                      "yarn, longrope, llama3, proportional)");
  }
  return s;
}

kernels::RopeScaling scaling_of(const ScalingArg& arg) {
  return arg.has_value() && arg->defined() ? (*arg)->scaling : kernels::RopeScaling{};
}

std::vector<kernels::RopeScaling> scalings_of(const ScalingListArg& arg) {
  std::vector<kernels::RopeScaling> out;
  if (!arg.has_value()) return out;
  for (const auto& s : *arg) out.push_back(s.defined() ? s->scaling : kernels::RopeScaling{});
  return out;
}

ScalingArg scaling_arg(const kernels::RopeScaling& scaling) {
  if (kernels::is_unscaled(scaling)) return c10::nullopt;
  return c10::make_intrusive<RopeScalingObject>(scaling);
}

ScalingListArg scaling_list_arg(const std::vector<kernels::RopeScaling>& scalings) {
  if (scalings.empty()) return c10::nullopt;
  std::vector<c10::intrusive_ptr<RopeScalingObject>> out;
  for (const kernels::RopeScaling& s : scalings) out.push_back(c10::make_intrusive<RopeScalingObject>(s));
  return out;
}

std::string shape_string(at::IntArrayRef sizes) {
  std::ostringstream s;
  s << '(';
  for (size_t i = 0; i < sizes.size(); ++i) s << (i ? ", " : "") << sizes[i];
  s << ')';
  return s.str();
}

void check_rope_input(std::string_view op, std::string_view name, const at::Tensor& x) {
  TORCH_CHECK_VALUE(x.defined(), "[", op, "] ", name, " must be a tensor, got None");
  TORCH_CHECK_TYPE(is_float_dtype(x.scalar_type()), "[", op, "] ", name,
                   " must be float32, float64, bfloat16 or float16, got ", x.scalar_type());
  TORCH_CHECK_VALUE(x.device().is_cpu(), "[", op, "] ", name, " must be on the CPU, got ", x.device());
  TORCH_CHECK_VALUE(x.dim() >= 2, "[", op, "] ", name, " must have shape (..., T, D), got ", shape_string(x.sizes()));
}

int64_t rows_batch(std::string_view op, const RowsShape& shape, const at::Tensor& x, at::IntArrayRef rows,
                   at::IntArrayRef got) {
  const int64_t tokens = x.size(-2);
  const bool batched_x = x.dim() >= 3;
  if (rows.size() == 1 && rows[0] == tokens) return 1;
  if (rows.size() == 2 && batched_x && rows[0] == x.size(0) && rows[1] == tokens) return rows[0];
  std::ostringstream expected;
  expected << "(" << shape.lead << "T" << shape.tail_symbol << ") = (" << shape.lead << tokens << shape.tail_value
           << ")";
  if (batched_x) {
    expected << " or (" << shape.lead << "B, T" << shape.tail_symbol << ") = (" << shape.lead << x.size(0) << ", "
             << tokens << shape.tail_value << ")";
  }
  std::ostringstream message;
  message << "[" << op << "] " << shape.name << " must have shape " << expected.str() << ", got "
          << shape_string(got);
  C10_THROW_ERROR(ValueError, message.str());
}

c10::optional<int64_t> default_seq_len(const at::Tensor& positions, c10::optional<int64_t> seq_len) {
  if (seq_len.has_value() || positions.numel() == 0) return seq_len;
  const int64_t last = positions.max().item<int64_t>();
  return last == std::numeric_limits<int64_t>::max() ? last : std::max<int64_t>(last, 0) + 1;
}

kernels::RopeApplyParams rope_apply_params(const char* op, const at::Tensor& x, int64_t rotary_dim,
                                           c10::string_view layout, bool inverse) {
  return translate_errors([&] {
    kernels::RopeApplyParams params{x.size(-1), rotary_dim, kernels::parse_rope_layout(to_std(layout), op), inverse};
    kernels::validate(params, op);
    return params;
  });
}

}  // namespace posenc::nn::detail
