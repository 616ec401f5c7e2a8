// CoPE (Golovneva et al. 2024) as a logit-bias family: decoders only.
#include <vector>

#include "families.h"
#include "posenc/nn/cope_bias.h"

namespace posenc::nn::families {

void add_cope(std::vector<EncodingFamily>& out) {
  EncodingFamily cope;
  cope.name = "cope";
  cope.point = EncodingPoint::kLogitBias;
  cope.description =
      "contextual positions p_ij = sum_{t=j..i} sigmoid(q_i.k_t / sqrt(Dh)), clamped at cope_npos - 1, and a "
      "learned table e [cope_npos, head_dim] shared by the heads, q_i.e interpolated at p_ij added to the logits; computed "
      "per query row in the fused attention (Golovneva et al. 2024, CoPE); decoders only";
  cope.parameters = {integer("cope_npos", &EncodingConfig::cope_npos,
                             "table rows; contextual positions clamp at cope_npos - 1", 1)};
  cope.needs.causal = true;
  cope.needs.causal_hint = "CoPE is defined for causal attention (gates over the keys up to the query); use "
                           "kerple, t5 or dpb in an encoder";
  cope.make_attention = [](const EncodingConfig& c, AttentionEncodings& slots) {
    slots.bias = CopeBias(CopeBiasOptions(c.num_heads, c.dim / c.num_heads).npos_max(c.cope_npos).causal(true));
  };
  out.push_back(std::move(cope));
}

}  // namespace posenc::nn::families
