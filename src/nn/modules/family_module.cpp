// The holders of the contracts (posenc/nn/family_module.h): every call goes
// through the family's contract, so no family writes a module body of its own.
#include "posenc/nn/family_module.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <ostream>
#include <string>
#include <utility>

namespace posenc::nn {
namespace {

// The contract's fresh state, its present tensors registered on `owner` under their names.
FamilyState registered_state(torch::nn::Module& owner, const FamilyContract& contract, const FamilySettings& settings) {
  FamilyState state = contract.init(settings);
  for (size_t i = 0; i < state.size(); ++i) {
    const StateSpec& spec = contract.state[i];
    if (!state[i].defined()) continue;  // absent for these settings
    state[i] = spec.parameter ? owner.register_parameter(spec.name, state[i]) : owner.register_buffer(spec.name, state[i]);
  }
  return state;
}

}  // namespace

FamilyBiasImpl::FamilyBiasImpl(std::string_view module, const FamilySettings& settings)
    : FamilyBiasImpl(family_contract(module), family_contract(module).complete(settings)) {}

FamilyBiasImpl::FamilyBiasImpl(const FamilyContract& contract, FamilySettings settings)
    : AttentionBiasImpl(contract.module, settings.integer("num_heads")),
      contract_(&contract),
      settings_(std::move(settings)) {
  state_ = registered_state(*this, contract, settings_);
}

void FamilyBiasImpl::reset_parameters() {
  at::NoGradGuard no_grad;
  if (contract_->reset) contract_->reset(settings_, state_);
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

void FamilyBiasImpl::pretty_print(std::ostream& stream) const {
  stream << "posenc::nn::" << contract_->module << "(" << contract_->describe(settings_) << ")";
}

at::Tensor FamilyBiasImpl::call(std::string_view method, const MethodCall& arguments) const {
  return contract_->call(method, settings_, state_, arguments);
}

// ---------------------------------------------------------------------------
// FamilyTransform

FamilyTransformImpl::FamilyTransformImpl(std::string_view module, const FamilySettings& settings)
    : FamilyTransformImpl(family_contract(module), family_contract(module).complete(settings)) {}

FamilyTransformImpl::FamilyTransformImpl(const FamilyContract& contract, FamilySettings settings)
    : torch::nn::Module(contract.module), contract_(&contract), settings_(std::move(settings)) {
  TORCH_CHECK_VALUE(contract.rotate, "[", contract.module, "] acts at the ", contract.point(),
                    " point: hold it in a FamilyBias");
  state_ = registered_state(*this, contract, settings_);
}

void FamilyTransformImpl::reset_parameters() {
  at::NoGradGuard no_grad;
  if (contract_->reset) contract_->reset(settings_, state_);
}

std::vector<at::Tensor> FamilyTransformImpl::rotate(const std::vector<at::Tensor>& inputs,
                                                    const std::optional<at::Tensor>& positions) {
  TORCH_CHECK_VALUE(inputs.size() == contract_->rotate_inputs.size(), "[", name(), "] takes ",
                    contract_->rotate_inputs.size(), " inputs, got ", inputs.size());
  return contract_->rotate(settings_, state_, RotateCall{inputs, positions});
}

void FamilyTransformImpl::pretty_print(std::ostream& stream) const {
  stream << "posenc::nn::" << contract_->module << "(" << contract_->describe(settings_) << ")";
}

at::Tensor FamilyTransformImpl::call(std::string_view method, const MethodCall& arguments) const {
  return contract_->call(method, settings_, state_, arguments);
}

// ---------------------------------------------------------------------------
// FamilyInput

namespace {

const FamilyContract& input_contract(std::string_view module) {
  const FamilyContract& contract = family_contract(module);
  TORCH_CHECK_VALUE(contract.embed, "[", contract.module, "] acts at the ", contract.point(),
                    " point, not at the input");
  return contract;
}

}  // namespace

FamilyInputImpl::FamilyInputImpl(std::string_view module, const FamilySettings& settings, InputMode mode,
                                 std::vector<int64_t> grid)
    : FamilyInputImpl(input_contract(module), input_contract(module).complete(settings), mode, std::move(grid)) {}

FamilyInputImpl::FamilyInputImpl(const FamilyContract& contract, FamilySettings settings, InputMode mode,
                                 std::vector<int64_t> grid)
    : InputEncodingImpl(contract.module, settings.integer("dim"), mode),
      contract_(&contract),
      settings_(std::move(settings)),
      grid_(std::move(grid)) {
  TORCH_CHECK_VALUE(grid_.size() == contract.embed_sizes.size(), "[", contract.module, "] takes ",
                    contract.embed_sizes.size(), " grid sizes, got ", grid_.size());
  state_ = registered_state(*this, contract, settings_);
}

void FamilyInputImpl::reset_parameters() {
  at::NoGradGuard no_grad;
  if (contract_->reset) contract_->reset(settings_, state_);
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

void FamilyInputImpl::pretty_print(std::ostream& stream) const {
  stream << "posenc::nn::" << contract_->module << "(" << contract_->describe(settings_) << ")";
}

}  // namespace posenc::nn
