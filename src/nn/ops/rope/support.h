// Private helpers of the RoPE ops (ops/rope/cpu_*.cpp, composite.cpp,
// autograd.cpp) and modules: the typed scaling object that travels
// through the op schemas, shape checks that name the expected shapes, and
// the default sequence length.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "posenc/kernels/rope.h"
#include "posenc/kernels/rope_scaling.h"

namespace posenc::nn::detail {

// torch.classes.posenc.RopeScaling: a kernels::RopeScaling as one typed op
// argument. Python builds it from a Hugging Face rope_scaling dict (one
// keyword per key), the C++ API from the struct; the ops only read it.
struct RopeScalingObject : torch::CustomClassHolder {
  explicit RopeScalingObject(kernels::RopeScaling s) : scaling(std::move(s)) {}
  kernels::RopeScaling scaling;
};

using ScalingArg = c10::optional<c10::intrusive_ptr<RopeScalingObject>>;
using ScalingListArg = c10::optional<std::vector<c10::intrusive_ptr<RopeScalingObject>>>;

// The Hugging Face keys the RopeScaling constructor accepts, "type" (the
// legacy name of "rope_type") included.
std::vector<std::string> rope_scaling_keys();

// The constructor of torch.classes.posenc.RopeScaling: one argument per key.
// rope_type (or its legacy name type; both given must agree) is required as
// soon as another key is set; nothing set is the default (unscaled) RoPE.
kernels::RopeScaling make_rope_scaling(
    const c10::optional<std::string>& rope_type, const c10::optional<std::string>& type,
    c10::optional<double> factor, c10::optional<int64_t> original_max_position_embeddings,
    c10::optional<int64_t> max_position_embeddings, c10::optional<double> beta_fast, c10::optional<double> beta_slow,
    c10::optional<double> mscale, c10::optional<double> mscale_all_dim, c10::optional<bool> truncate,
    c10::optional<double> attention_factor, const c10::optional<std::vector<double>>& short_factor,
    const c10::optional<std::vector<double>>& long_factor, c10::optional<double> low_freq_factor,
    c10::optional<double> high_freq_factor, c10::optional<double> partial_rotary_factor);

// None is the default (unscaled) RoPE.
kernels::RopeScaling scaling_of(const ScalingArg& arg);
std::vector<kernels::RopeScaling> scalings_of(const ScalingListArg& arg);
// For the C++ API: a default scaling travels as None.
ScalingArg scaling_arg(const kernels::RopeScaling& scaling);
ScalingListArg scaling_list_arg(const std::vector<kernels::RopeScaling>& scalings);

// "(3, 16)"
std::string shape_string(at::IntArrayRef sizes);

// x (..., T, D): a floating CPU tensor with at least 2 dimensions.
void check_rope_input(std::string_view op, std::string_view name, const at::Tensor& x);

// The batch of a table whose rows follow `rows` = (T) or (B, T) against
// x (..., T, D): 1 for (T), B for (B, T) when x is (B, ..., T, D). Otherwise
// throws "[op] positions must have shape (T) = (16) or (B, T) = (2, 16), got (3, 16)";
// `lead` and `tail` decorate the shapes (e.g. lead "3, " for M-RoPE's
// positions, tail ", n_axes" / ", 2" for axial coordinates) and `got` is the
// argument's whole shape.
struct RowsShape {
  RowsShape(std::string_view name_ = "positions", std::string lead_ = "", std::string tail_symbol_ = "",
            std::string tail_value_ = "")
      : name(name_), lead(std::move(lead_)), tail_symbol(std::move(tail_symbol_)), tail_value(std::move(tail_value_)) {}
  std::string_view name;
  std::string lead;         // before T / B, T, e.g. "3, "
  std::string tail_symbol;  // after T, e.g. ", n_axes"
  std::string tail_value;   // e.g. ", 2"
};
int64_t rows_batch(std::string_view op, const RowsShape& shape, const at::Tensor& x, at::IntArrayRef rows,
                   at::IntArrayRef got);

// The regime length of dynamic / longrope scalings when the caller gives
// none: max position + 1 (Hugging Face's convention), at least 1; None for no
// positions. positions: int64, any shape.
c10::optional<int64_t> default_seq_len(const at::Tensor& positions, c10::optional<int64_t> seq_len);

// The rotary dimension: rotary_dim, or all of x's last dimension.
inline int64_t rotary_dim_of(const at::Tensor& x, c10::optional<int64_t> rotary_dim) {
  return rotary_dim.value_or(x.size(-1));
}

// Validates (D, R, layout) for x (..., T, D) with the kernel's messages and
// returns the parameters.
kernels::RopeApplyParams rope_apply_params(const char* op, const at::Tensor& x, int64_t rotary_dim,
                                           c10::string_view layout, bool inverse);

template <class T>
std::optional<T> std_optional(const c10::optional<T>& v) {
  return v ? std::optional<T>(*v) : std::nullopt;
}

inline c10::string_view view_of(std::string_view s) noexcept { return c10::string_view(s.data(), s.size()); }

}  // namespace posenc::nn::detail
