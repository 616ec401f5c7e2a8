// The holders of the contracts (posenc/nn/family_module.h): every call goes
// through the family's contract, so no family writes a module body of its own.
#include "posenc/nn/family_module.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <ostream>
#include <string>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <utility>
#include <vector>

namespace posenc::nn {

namespace {

// The present entries of `sub`, by index into the state.
std::vector<size_t> entries_of(const FamilyContract& contract, const FamilySettings& settings,
                               const SubmoduleSpec& sub) {
  std::vector<size_t> out;
  for (size_t i = 0; i < contract.state.size(); ++i) {
    if (contract.submodule_of(contract.state[i]) == &sub && contract.present(settings, contract.state[i])) {
      out.push_back(i);
    }
  }
  return out;
}

// torch's module of the submodule's kind, at the contract's shapes (its constructor draws as torch's does).
std::shared_ptr<torch::nn::Module> build_submodule(const FamilyContract& contract, const FamilySettings& settings,
                                                   const SubmoduleSpec& sub, const std::vector<size_t>& entries,
                                                   const std::vector<std::vector<int64_t>>& shapes) {
  const std::vector<int64_t>& weight = shapes.at(entries.at(0));
  if (sub.kind == "Linear") {
    TORCH_CHECK(weight.size() == 2, "[", contract.module, "] ", sub.name, ": a Linear's weight is 2-D");
    return torch::nn::Linear(torch::nn::LinearOptions(weight[1], weight[0]).bias(entries.size() > 1)).ptr();
  }
  TORCH_CHECK(sub.kind == "LayerNorm", "[", contract.module, "] ", sub.name, ": unknown submodule kind '", sub.kind, "'");
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions(weight).eps(settings.real(sub.eps))).ptr();
}

}  // namespace

void FamilyHeld::register_state(torch::nn::Module& owner) {
  // Submodules first: their constructors' draws precede the contract's, as in a module building a Linear.
  std::vector<std::vector<size_t>> owned;
  if (!contract_->submodules.empty()) {
    const std::vector<std::vector<int64_t>> shapes = contract_->shapes(settings_);
    for (const SubmoduleSpec& sub : contract_->submodules) {
      owned.push_back(entries_of(*contract_, settings_, sub));
      if (owned.back().empty()) continue;
      submodules_.emplace_back(sub.name, build_submodule(*contract_, settings_, sub, owned.back(), shapes));
    }
  }
  state_ = contract_->init(settings_);
  for (size_t s = 0, built = 0; s < contract_->submodules.size(); ++s) {
    if (owned[s].empty()) continue;
    const auto& [name, module] = submodules_[built++];
    owner.register_module(name, module);
    at::NoGradGuard no_grad;
    const auto parameters = module->named_parameters(/*recurse=*/false);
    for (size_t i : owned[s]) {
      at::Tensor tensor = parameters[contract_->state[i].name.substr(name.size() + 1)];
      tensor.copy_(state_[i]);
      state_[i] = tensor;
    }
  }
  for (size_t i = 0; i < state_.size(); ++i) {
    const StateSpec& spec = contract_->state[i];
    if (!state_[i].defined() || contract_->submodule_of(spec)) continue;  // absent, borrowed or a submodule's
    state_[i] = contract_->trained(settings_, spec) ? owner.register_parameter(spec.name, state_[i])
                                                    : owner.register_buffer(spec.name, state_[i]);
  }
}

std::shared_ptr<torch::nn::Module> FamilyHeld::submodule(std::string_view name) const {
  for (const auto& [key, module] : submodules_) {
    if (key == name) return module;
  }
  return nullptr;
}

void FamilyHeld::borrow(std::string_view prefix, const torch::nn::Module& from) {
  const std::vector<std::vector<int64_t>> shapes = contract_->shapes(settings_);
  const auto parameters = from.named_parameters(/*recurse=*/false);
  for (size_t i = 0; i < contract_->state.size(); ++i) {
    const StateSpec& spec = contract_->state[i];
    if (!spec.borrowed || !contract_->present(settings_, spec)) continue;
    if (spec.name.compare(0, prefix.size(), prefix) != 0 || spec.name[prefix.size()] != '.') continue;
    const std::string own = spec.name.substr(prefix.size() + 1);
    const at::Tensor* tensor = parameters.find(own);
    if (!tensor && own == "bias") {  // a projection without bias: zeros, the same product
      state_[i] = at::zeros(shapes.at(i));
      continue;
    }
    const at::IntArrayRef got = tensor && tensor->defined() ? tensor->sizes() : at::IntArrayRef{};
    TORCH_CHECK_VALUE(tensor && tensor->defined() && got == at::IntArrayRef(shapes.at(i)), "[", contract_->module,
                      "] the layer's ", spec.name, " must have shape ", at::IntArrayRef(shapes.at(i)), ", got ", got);
    state_[i] = *tensor;
  }
}

void FamilyHeld::reset_state() {
  at::NoGradGuard no_grad;
  if (contract_->reset) contract_->reset(settings_, state_);
}

void FamilyHeld::print(std::ostream& stream) const {
  stream << "posenc::nn::" << contract_->module << "(" << contract_->describe(settings_) << ")";
}

namespace {

// The contract called `module`, refused by a holder of another point: "[QueryTemperature] acts at the query
// point, not at the input".
const FamilyContract& contract_at(std::string_view module, const char* point, const char* where) {
  const FamilyContract& contract = family_contract(module);
  TORCH_CHECK_VALUE(contract.point() == point, "[", contract.module, "] acts at the ", contract.point(),
                    " point, not at the ", where);
  return contract;
}

}  // namespace

// ---------------------------------------------------------------------------
// FamilyBias

FamilyBiasImpl::FamilyBiasImpl(std::string_view module, const FamilySettings& settings)
    : FamilyBiasImpl(family_contract(module), family_contract(module).complete(settings)) {}

FamilyBiasImpl::FamilyBiasImpl(const FamilyContract& contract, FamilySettings settings)
    : AttentionBiasImpl(contract.module, settings.integer("num_heads")), FamilyHeld(contract, std::move(settings)) {
  register_state(*this);
}

at::Tensor FamilyBiasImpl::bias(int64_t q_len, int64_t k_len) {
  TORCH_CHECK_VALUE(q_len >= 0 && k_len >= 0, "[", name(), "] q_len and k_len must be >= 0, got ", q_len, " and ",
                    k_len);
  TORCH_CHECK_VALUE(contract_->dense, "[", name(), "] the term depends on q and k, not on the lengths alone: use "
                    "bias(q, k, scale) or let the attention compute it (add_terms)");
  return contract_->dense(settings_, state_, q_len, k_len);
}

at::Tensor FamilyBiasImpl::bias(const at::Tensor& q, const at::Tensor& k, double scale,
                                const std::optional<at::Tensor>& key_padding_mask) {
  TORCH_CHECK_VALUE(contract_->dense_qk, "[", name(), "] the term depends on the lengths alone: use bias(q_len, k_len)");
  return contract_->dense_qk(settings_, state_, q, k, scale, key_padding_mask);
}

void FamilyBiasImpl::add_terms(AttentionTerms& terms, int64_t q_len, int64_t k_len, at::ScalarType compute) {
  contract_->terms(settings_, state_, terms, q_len, k_len, compute);
}

// ---------------------------------------------------------------------------
// FamilyTransform

FamilyTransformImpl::FamilyTransformImpl(std::string_view module, const FamilySettings& settings)
    : FamilyTransformImpl(family_contract(module), family_contract(module).complete(settings)) {}

FamilyTransformImpl::FamilyTransformImpl(const FamilyContract& contract, FamilySettings settings)
    : torch::nn::Module(contract.module), FamilyHeld(contract, std::move(settings)) {
  TORCH_CHECK_VALUE(contract.rotate, "[", contract.module, "] acts at the ", contract.point(),
                    " point: hold it in a FamilyBias");
  register_state(*this);
}

std::vector<at::Tensor> FamilyTransformImpl::rotate(const std::vector<at::Tensor>& inputs,
                                                    const std::optional<at::Tensor>& positions) {
  TORCH_CHECK_VALUE(inputs.size() == contract_->rotate_inputs.size(), "[", name(), "] takes ",
                    contract_->rotate_inputs.size(), " inputs, got ", inputs.size());
  return contract_->rotate(settings_, state_, RotateCall{inputs, positions});
}

// ---------------------------------------------------------------------------
// FamilyInput

FamilyInputImpl::FamilyInputImpl(std::string_view module, const FamilySettings& settings, InputMode mode,
                                 std::vector<int64_t> grid)
    : FamilyInputImpl(contract_at(module, "input", "input"), contract_at(module, "input", "input").complete(settings),
                      mode, std::move(grid)) {}

FamilyInputImpl::FamilyInputImpl(const FamilyContract& contract, FamilySettings settings, InputMode mode,
                                 std::vector<int64_t> grid)
    : InputEncodingImpl(contract.module, settings.integer("dim"), mode),
      FamilyHeld(contract, std::move(settings)),
      grid_(std::move(grid)) {
  TORCH_CHECK_VALUE(grid_.size() == contract.embed_sizes.size(), "[", contract.module, "] takes ",
                    contract.embed_sizes.size(), " grid sizes, got ", grid_.size());
  register_state(*this);
}

at::Tensor FamilyInputImpl::embed(const EmbedCall& call) const {
  EmbedCall with_grid = call;
  if (!grid_.empty()) with_grid.sizes = grid_;
  return contract_->embed(settings_, state_, with_grid);
}

at::Tensor FamilyInputImpl::encode_range(int64_t start, int64_t count, at::ScalarType compute) {
  EmbedCall call;
  call.start = start, call.count = count, call.dtype = compute;
  return embed(call);
}

at::Tensor FamilyInputImpl::encode(const at::Tensor& positions, at::ScalarType compute) {
  EmbedCall call;
  call.positions = positions, call.dtype = compute;
  return embed(call);
}

// ---------------------------------------------------------------------------
// FamilyRelative

namespace {

int64_t relative_heads(const FamilySettings& settings) {
  return settings.has("num_heads") ? settings.integer("num_heads") : 0;  // no setting: one shared table
}

}  // namespace

FamilyRelativeImpl::FamilyRelativeImpl(std::string_view module, const FamilySettings& settings)
    : FamilyRelativeImpl(contract_at(module, "relative vectors", "relative-vectors point"),
                         contract_at(module, "relative vectors", "relative-vectors point").complete(settings)) {}

FamilyRelativeImpl::FamilyRelativeImpl(const FamilyContract& contract, FamilySettings settings)
    : RelativeEncodingImpl(contract.module, relative_heads(settings), settings.integer("head_dim")),
      FamilyHeld(contract, std::move(settings)) {
  register_state(*this);
}

at::Tensor FamilyRelativeImpl::logits(const at::Tensor& q, const at::Tensor& k) {
  return contract_->relative_logits(settings_, state_, q, k);
}

bool FamilyRelativeImpl::has_values() const {
  return contract_->relative_values && contract_->has_values && contract_->has_values(settings_);
}

at::Tensor FamilyRelativeImpl::values(const at::Tensor& probs) {
  if (!has_values()) return RelativeEncodingImpl::values(probs);
  return contract_->relative_values(settings_, state_, probs);
}

void FamilyRelativeImpl::add_terms(AttentionTerms& terms, int64_t q_len, int64_t k_len, at::ScalarType compute) {
  contract_->terms(settings_, state_, terms, q_len, k_len, compute);
}

void FamilyRelativeImpl::share_projections(const torch::nn::Linear& query, const torch::nn::Linear& key) {
  borrow("q_proj", *query);
  borrow("k_proj", *key);
}

}  // namespace posenc::nn
