// x-transformers' dynamic position bias as a logit-bias family.
#include <algorithm>
#include <vector>

#include "families.h"
#include "posenc/nn/dpb_bias.h"

namespace posenc::nn::families {

void add_dpb(std::vector<EncodingFamily>& out) {
  EncodingFamily dpb;
  dpb.name = "dpb";
  dpb.point = EncodingPoint::kLogitBias;
  dpb.description =
      "learned MLP (1 -> dim/4 SiLU -> dim/4 SiLU -> heads) of the offset i - j, one bias per offset and head, "
      "causal in the decoder (x-transformers' DynamicPositionBias; Swin V2's continuous bias in 1D)";
  dpb.make_attention = [](const EncodingConfig& c, AttentionEncodings& slots) {
    // x-transformers sizes the MLP at the model dim // 4.
    slots.bias = DynamicPositionBias(
        DynamicPositionBiasOptions(c.num_heads, std::max<int64_t>(c.dim / 4, 1)).causal(c.causal));
  };
  out.push_back(std::move(dpb));
}

}  // namespace posenc::nn::families
