// The C++ holders of the families on the contract (family_contract.h), one
// per point: the tensors a contract names, registered as parameters and
// buffers under those names, and the contract's functions applied to them.
// FamilyBias holds a logit-bias family, FamilyTransform a query/key one,
// FamilyInput an input one (an InputEncoding: added to or concatenated with x),
// FamilyRelative a relative-vectors one (a RelativeEncoding). The public classes
// (KerpleBias, FireBias, RotaryEmbedding, ShawRelative, ...) are typed front ends
// that turn their options into settings; FamilyBias(module, settings),
// FamilyTransform(...), FamilyInput(...) and FamilyRelative(...) build any
// registered one. What they share (the contract, the settings, the state and
// its registration) is FamilyHeld.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <torch/nn/module.h>

#include "posenc/nn/attention_bias.h"
#include "posenc/nn/family_contract.h"
#include "posenc/nn/input_encoding.h"
#include "posenc/nn/relative_encoding.h"

namespace posenc::nn {

// A holder's contract, its complete settings and its state (the registered handles: to() changes them in
// place; absent ones undefined), with the accessors every holder offers.
class FamilyHeld {
 public:
  // A named method of the contract (FIRE's "threshold").
  at::Tensor call(std::string_view method, const MethodCall& arguments = {}) const {
    return contract_->call(method, settings_, state_, arguments);
  }
  const FamilyContract& contract() const noexcept { return *contract_; }
  const FamilySettings& settings() const noexcept { return settings_; }
  const FamilyState& state() const noexcept { return state_; }
  const at::Tensor& tensor(std::string_view name) const { return contract_->tensor(state_, name); }
  // The submodule called name (contract.submodules: a torch Linear or LayerNorm), or nullptr when these
  // settings give the module none.
  std::shared_ptr<torch::nn::Module> submodule(std::string_view name) const;

 protected:
  FamilyHeld(const FamilyContract& contract, FamilySettings settings)
      : contract_(&contract), settings_(std::move(settings)) {}
  // The contract's fresh state, its present tensors registered on `owner` (the module itself) under their names,
  // those of a submodule in it (built first, with torch's constructor); borrowed ones left undefined.
  void register_state(torch::nn::Module& owner);
  // The layer's tensors a contract borrows ("q_proj.weight", ...), checked against the contract's shapes.
  void borrow(std::string_view prefix, const torch::nn::Module& from);
  // The contract's initial draws again (torch's default generator), under no_grad.
  void reset_state();
  // "posenc::nn::KerpleBias(num_heads=4, kind=log, ...)".
  void print(std::ostream& stream) const;

  const FamilyContract* contract_;
  FamilySettings settings_;
  FamilyState state_;
  std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>> submodules_;
};

class FamilyBiasImpl : public AttentionBiasImpl, public FamilyHeld {
 public:
  // The contract's settings completed and checked, its state created and drawn.
  FamilyBiasImpl(std::string_view module, const FamilySettings& settings);

  void reset_parameters() { reset_state(); }
  // [H, q_len, k_len] (contract.dense): -inf where masked; differentiable.
  at::Tensor bias(int64_t q_len, int64_t k_len) override;
  // A term of q and k (contract.dense_qk, CoPE), [B, H, Tq, Tk].
  at::Tensor bias(const at::Tensor& q, const at::Tensor& k, double scale,
                  const std::optional<at::Tensor>& key_padding_mask = std::nullopt);
  void add_terms(AttentionTerms& terms, int64_t q_len, int64_t k_len, at::ScalarType compute) override;
  void pretty_print(std::ostream& stream) const override { print(stream); }

 private:
  FamilyBiasImpl(const FamilyContract& contract, FamilySettings settings);
};

TORCH_MODULE(FamilyBias);

class FamilyTransformImpl : public torch::nn::Module, public FamilyHeld {
 public:
  FamilyTransformImpl(std::string_view module, const FamilySettings& settings);

  void reset_parameters() { reset_state(); }
  // contract.rotate: one tensor per input (q and k, or q alone), at `positions` (unset: the family's default).
  std::vector<at::Tensor> rotate(const std::vector<at::Tensor>& inputs,
                                 const std::optional<at::Tensor>& positions = std::nullopt);
  void pretty_print(std::ostream& stream) const override { print(stream); }

 private:
  FamilyTransformImpl(const FamilyContract& contract, FamilySettings settings);
};

TORCH_MODULE(FamilyTransform);

class FamilyInputImpl : public InputEncodingImpl, public FamilyHeld {
 public:
  // `grid`: a grid family's sizes ({height, width} or {frames, height, width}), fixed for the module; its
  // cells are the positions.
  FamilyInputImpl(std::string_view module, const FamilySettings& settings, InputMode mode = InputMode::kAdd,
                  std::vector<int64_t> grid = {});
  void reset_parameters() { reset_state(); }
  // contract.embed: positions start .. start+count-1 (cells of the grid), or the positions given.
  at::Tensor encode_range(int64_t start, int64_t count, at::ScalarType compute) override;
  at::Tensor encode(const at::Tensor& positions, at::ScalarType compute) override;
  // contract.embed with this module's state (a grid family reads `sizes`).
  at::Tensor embed(const EmbedCall& call) const;
  void pretty_print(std::ostream& stream) const override { print(stream); }
  const std::vector<int64_t>& grid_sizes() const noexcept { return grid_; }

 private:
  FamilyInputImpl(const FamilyContract& contract, FamilySettings settings, InputMode mode, std::vector<int64_t> grid);
  std::vector<int64_t> grid_;
};

TORCH_MODULE(FamilyInput);

class FamilyRelativeImpl : public RelativeEncodingImpl, public FamilyHeld {
 public:
  FamilyRelativeImpl(std::string_view module, const FamilySettings& settings);
  void reset_parameters() { reset_state(); }
  // contract.relative_logits / relative_values / terms.
  at::Tensor logits(const at::Tensor& q, const at::Tensor& k) override;
  bool has_values() const override;
  at::Tensor values(const at::Tensor& probs) override;
  void add_terms(AttentionTerms& terms, int64_t q_len, int64_t k_len, at::ScalarType compute) override;
  // The layer's projections, for a contract that borrows them (its "q_proj.*" / "k_proj.*" entries);
  // ignored by the others.
  void share_projections(const torch::nn::Linear& query, const torch::nn::Linear& key) override;
  void pretty_print(std::ostream& stream) const override { print(stream); }

 private:
  FamilyRelativeImpl(const FamilyContract& contract, FamilySettings settings);
};

TORCH_MODULE(FamilyRelative);

}  // namespace posenc::nn
