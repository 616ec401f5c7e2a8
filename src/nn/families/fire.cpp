// FIRE (Li et al. 2023) as a logit-bias family: decoders only.
#include <vector>

#include "families.h"
#include "posenc/nn/fire_bias.h"

namespace posenc::nn::families {

void add_fire(std::vector<EncodingFamily>& out) {
  EncodingFamily fire;
  fire.name = "fire";
  fire.point = EncodingPoint::kLogitBias;
  fire.description =
      "learned MLP (1 -> 32 ReLU -> heads) of the progressively interpolated offset psi(i - j) / psi(max(L, i)), "
      "psi(x) = log(c x + 1), c = 0.1 and L = 512 learned, computed per tile in the fused attention (Li et al. "
      "2023, FIRE); decoders only";
  fire.needs.causal = true;
  fire.needs.causal_hint = "FIRE is defined for causal attention; use kerple, t5 or dpb in an encoder";
  fire.make_attention = [](const EncodingConfig& c, AttentionEncodings& slots) {
    slots.bias = FireBias(FireBiasOptions(c.num_heads).causal(true));
  };
  out.push_back(std::move(fire));
}

}  // namespace posenc::nn::families
