// The logit-bias holder (posenc/nn/family_module.h): every call goes through
// the family's contract, so no family writes a module body of its own.
#include "posenc/nn/family_module.h"

#include <ATen/ATen.h>

#include <ostream>
#include <string>
#include <utility>

namespace posenc::nn {
FamilyBiasImpl::FamilyBiasImpl(std::string_view module, const FamilySettings& settings)
    : FamilyBiasImpl(family_contract(module), family_contract(module).complete(settings)) {}

FamilyBiasImpl::FamilyBiasImpl(const FamilyContract& contract, FamilySettings settings)
    : AttentionBiasImpl(contract.module, settings.integer("num_heads")),
      contract_(&contract),
      settings_(std::move(settings)) {
  state_ = contract.init(settings_);
  for (size_t i = 0; i < state_.size(); ++i) {
    const StateSpec& spec = contract.state[i];
    if (!state_[i].defined()) continue;  // absent for these settings
    state_[i] = spec.parameter ? register_parameter(spec.name, state_[i]) : register_buffer(spec.name, state_[i]);
  }
}

void FamilyBiasImpl::reset_parameters() {
  at::NoGradGuard no_grad;
  contract_->reset(settings_, state_);
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

}  // namespace posenc::nn
