// Logit-bias families with fixed or tabulated offsets: ALiBi and T5.
#include <vector>

#include "families.h"
#include "posenc/nn/attention_biases.h"

namespace posenc::nn::families {

namespace {

void add_bias(std::vector<EncodingFamily>& out) {
  EncodingFamily alibi;
  alibi.name = "alibi";
  alibi.point = EncodingPoint::kLogitBias;
  alibi.description =
      "fixed linear penalty -m_h |i - j| with the paper's geometric slopes, causal in the decoder (Press et al., "
      "ICLR 2022)";
  alibi.make_attention = [](const EncodingConfig& c, AttentionEncodings& slots) {
    slots.bias = AlibiBias(AlibiBiasOptions(c.num_heads).causal(c.causal));
  };
  out.push_back(std::move(alibi));

  EncodingFamily t5;
  t5.name = "t5";
  t5.point = EncodingPoint::kLogitBias;
  t5.description =
      "a learned scalar per (log-bucketed offset, head) (Raffel et al. 2020); T5 shares one table across layers, "
      "here each layer owns one (a shared submodule would be listed and stepped twice)";
  t5.parameters = {integer("t5_num_buckets", &EncodingConfig::t5_num_buckets,
                           "buckets; bidirectional in the encoder, causal in the decoder", 2),
                   integer("t5_max_distance", &EncodingConfig::t5_max_distance,
                           "offsets beyond share the last bucket", 1),
                   init_std_parameter()};
  t5.make_attention = [](const EncodingConfig& c, AttentionEncodings& slots) {
    slots.bias = T5Bias(T5BiasOptions(c.num_heads)
                            .num_buckets(c.t5_num_buckets)
                            .max_distance(c.t5_max_distance)
                            .bidirectional(!c.causal)
                            .init_std(c.init_std));
  };
  out.push_back(std::move(t5));
}

const Registration registered(40, add_bias);

}  // namespace

}  // namespace posenc::nn::families
