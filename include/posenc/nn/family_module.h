// The C++ holders of the families on the contract (family_contract.h), one
// per point: the tensors a contract names, registered as parameters and
// buffers under those names, and the contract's functions applied to them.
// FamilyBias holds a logit-bias family, FamilyTransform a query/key one,
// FamilyInput an input one (an InputEncoding: added to or concatenated with x). The
// public classes (KerpleBias, FireBias, RotaryEmbedding, QueryTemperature, ...)
// are typed front ends that turn their options into settings;
// FamilyBias(module, settings) / FamilyTransform(module, settings) /
// FamilyInput(module, settings) build any registered one.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <optional>
#include <ostream>
#include <string_view>
#include <vector>

#include <torch/nn/module.h>

#include "posenc/nn/attention_bias.h"
#include "posenc/nn/family_contract.h"
#include "posenc/nn/input_encoding.h"

namespace posenc::nn {

class FamilyBiasImpl : public AttentionBiasImpl {
 public:
  // The contract's settings completed and checked, its state created and drawn.
  FamilyBiasImpl(std::string_view module, const FamilySettings& settings);

  // The contract's initial draws again (torch's default generator).
  void reset_parameters();
  // [H, q_len, k_len] (contract.dense): -inf where masked; differentiable.
  at::Tensor bias(int64_t q_len, int64_t k_len) override;
  // A term of q and k (contract.dense_qk, CoPE), [B, H, Tq, Tk].
  at::Tensor bias(const at::Tensor& q, const at::Tensor& k, double scale,
                  const std::optional<at::Tensor>& key_padding_mask = std::nullopt);
  void add_terms(AttentionTerms& terms, int64_t q_len, int64_t k_len, at::ScalarType compute) override;
  void pretty_print(std::ostream& stream) const override;

  // A named method of the contract (FIRE's "threshold").
  at::Tensor call(std::string_view method, const MethodCall& arguments = {}) const;
  const FamilyContract& contract() const noexcept { return *contract_; }
  const FamilySettings& settings() const noexcept { return settings_; }
  const FamilyState& state() const noexcept { return state_; }
  const at::Tensor& tensor(std::string_view name) const { return contract_->tensor(state_, name); }

 private:
  FamilyBiasImpl(const FamilyContract& contract, FamilySettings settings);

  const FamilyContract* contract_;
  FamilySettings settings_;
  FamilyState state_;  // the registered handles (to() changes them in place), absent ones undefined
};

TORCH_MODULE(FamilyBias);

class FamilyTransformImpl : public torch::nn::Module {
 public:
  FamilyTransformImpl(std::string_view module, const FamilySettings& settings);

  void reset_parameters();
  // contract.rotate: one tensor per input (q and k, or q alone), at `positions` (unset: the family's default).
  std::vector<at::Tensor> rotate(const std::vector<at::Tensor>& inputs,
                                 const std::optional<at::Tensor>& positions = std::nullopt);
  void pretty_print(std::ostream& stream) const override;

  at::Tensor call(std::string_view method, const MethodCall& arguments = {}) const;
  const FamilyContract& contract() const noexcept { return *contract_; }
  const FamilySettings& settings() const noexcept { return settings_; }
  const FamilyState& state() const noexcept { return state_; }
  const at::Tensor& tensor(std::string_view name) const { return contract_->tensor(state_, name); }

 private:
  FamilyTransformImpl(const FamilyContract& contract, FamilySettings settings);

  const FamilyContract* contract_;
  FamilySettings settings_;
  FamilyState state_;
};

TORCH_MODULE(FamilyTransform);

class FamilyInputImpl : public InputEncodingImpl {
 public:
  // `grid`: a grid family's sizes ({height, width} or {frames, height, width}), fixed for the module; its
  // cells are the positions.
  FamilyInputImpl(std::string_view module, const FamilySettings& settings, InputMode mode = InputMode::kAdd,
                  std::vector<int64_t> grid = {});
  void reset_parameters();
  // contract.embed: positions start .. start+count-1 (cells of the grid), or the positions given.
  at::Tensor encode_range(int64_t start, int64_t count, at::ScalarType compute) override;
  at::Tensor encode(const at::Tensor& positions, at::ScalarType compute) override;
  // contract.embed with this module's state (a grid family reads `sizes`).
  at::Tensor embed(const EmbedCall& call) const;
  void pretty_print(std::ostream& stream) const override;
  const FamilyContract& contract() const noexcept { return *contract_; }
  const FamilySettings& settings() const noexcept { return settings_; }
  const FamilyState& state() const noexcept { return state_; }
  const at::Tensor& tensor(std::string_view name) const { return contract_->tensor(state_, name); }
  const std::vector<int64_t>& grid_sizes() const noexcept { return grid_; }

 private:
  FamilyInputImpl(const FamilyContract& contract, FamilySettings settings, InputMode mode, std::vector<int64_t> grid);
  const FamilyContract* contract_;
  FamilySettings settings_;
  FamilyState state_;
  std::vector<int64_t> grid_;
};

TORCH_MODULE(FamilyInput);

}  // namespace posenc::nn
