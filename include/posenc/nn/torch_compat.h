// What differs between the torch versions posenc builds against (Debian 12's
// 1.13, Debian 13's 2.6), in one place, so the rest of the code reads the same
// on both.
#pragma once

#include <ATen/ATen.h>

#include <sstream>
#include <string>
#include <type_traits>

namespace posenc::nn::torch_compat {

// The key of a parameter's entry in torch::optim::Optimizer::state(): torch 1.x keys it by the
// TensorImpl's address printed as a string, torch 2 by the address itself.
template <class OptimizerState>
typename OptimizerState::key_type optimizer_state_key(const OptimizerState&, const at::Tensor& parameter) {
  using Key = typename OptimizerState::key_type;
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream address;  // what torch 1.x's c10::guts::to_string wrote
    address << parameter.unsafeGetTensorImpl();
    return address.str();
  } else {
    return static_cast<Key>(parameter.unsafeGetTensorImpl());
  }
}

}  // namespace posenc::nn::torch_compat
