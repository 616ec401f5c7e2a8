// What the rotary families (rope.cpp, mrope.cpp) share: a Hugging Face
// rope_scaling dict as a contract setting (SettingJson) and back, and the
// checks and the rotation of q and k by one table per compute dtype.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include "posenc/kernels/rope.h"
#include "posenc/kernels/rope_scaling.h"
#include "posenc/nn/family_contract.h"

namespace posenc::nn::families {

// The dict's keys read as RopeScaling::make does for Python's RopeScaling(**dict): an unknown key
// is refused ("[rope] unknown rope_scaling key 'foo'", or where an HF key belongs instead).
kernels::RopeScaling scaling_from_json(const std::string& text);
// None (or an unscaled scaling) is the default RoPE.
kernels::RopeScaling scaling_setting(const SettingJson* setting);
// A dict shared by every axis (one element), or a list with one per axis (null: default); None: empty.
std::vector<kernels::RopeScaling> scalings_setting(const SettingJson* setting);
// The scaling as a setting value: None when unscaled.
SettingValue scaling_value(const kernels::RopeScaling& scaling);
SettingValue scalings_value(const std::vector<kernels::RopeScaling>& scalings);

// rotary_dim None as head_dim (a contract's derive).
void derive_rotary_dim(FamilySettings& s);
// head_dim >= 1 and (head_dim, rotary_dim, layout) valid, under the module's name; returns R.
int64_t checked_rotary_dim(const char* module, const FamilySettings& s);
// q and k floating (..., T, head_dim): "[RotaryEmbedding] k must have head_dim = 64 channels in its last
// dimension, got shape (2, 4, 16, 32)".
void check_qk(const char* module, const at::Tensor& q, const at::Tensor& k, int64_t head_dim);
// q and k rotated by tables(compute dtype), computed once when both share it.
using RopeTables = std::function<std::pair<at::Tensor, at::Tensor>(at::ScalarType)>;
std::vector<at::Tensor> rotate_both(const at::Tensor& q, const at::Tensor& k, kernels::RopeLayout layout,
                                    const RopeTables& tables);

}  // namespace posenc::nn::families
