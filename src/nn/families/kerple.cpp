// KERPLE's two kernels (Chi et al. 2022) as logit-bias families.
#include <vector>

#include "families.h"
#include "posenc/nn/kerple_bias.h"

namespace posenc::nn::families {

void add_kerple(std::vector<EncodingFamily>& out) {
  for (const auto kind : {kernels::KerpleKind::kLog, kernels::KerpleKind::kPower}) {
    const bool log = kind == kernels::KerpleKind::kLog;
    EncodingFamily f;
    f.name = log ? "kerple" : "kerple-power";
    f.point = EncodingPoint::kLogitBias;
    f.description = log ? "learned logarithmic kernel -r1_h log(1 + r2_h |i - j|), r1, r2 > 0 per head from U(0, 2), "
                          "U(0, 1) and kept >= 0.01 (the authors' code), causal in the decoder (Chi et al. 2022, "
                          "KERPLE)"
                        : "learned power kernel -r1_h |i - j|^r2_h per head, r1 from U(0, 2) kept >= 0.01, r2 from "
                          "U(0, 1) kept in [0.01, 2], causal in the decoder (Chi et al. 2022, KERPLE)";
    f.make_attention = [kind](const EncodingConfig& c, AttentionEncodings& slots) {
      slots.bias = KerpleBias(KerpleBiasOptions(c.num_heads).kind(kind).causal(c.causal));
    };
    out.push_back(std::move(f));
  }
}

}  // namespace posenc::nn::families
