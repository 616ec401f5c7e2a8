// DeBERTa's disentangled attention (He et al. 2021; HF's DebertaV2): relative vectors,
// c2p and p2c, with HF's defaults (256 log buckets over 512 positions) as settings.
#include <vector>

#include "families.h"
#include "posenc/nn/deberta_relative.h"

namespace posenc::nn::families {

void add_deberta(std::vector<EncodingFamily>& out) {
  EncodingFamily deberta;
  deberta.name = "deberta";
  deberta.point = EncodingPoint::kRelativeVectors;
  deberta.description =
      "disentangled attention: content-to-position and position-to-content terms from LayerNorm-ed relative "
      "embeddings projected per head, deberta_position_buckets log buckets over deberta_max_relative_positions, "
      "logits / sqrt(3 Dh) (He et al. 2021, DeBERTa v2/v3)";
  deberta.parameters = {
      init_std_parameter(),
      integer("deberta_position_buckets", &EncodingConfig::deberta_position_buckets,
              "log buckets of the relative offsets; 0: none", 0),
      integer("deberta_max_relative_positions", &EncodingConfig::deberta_max_relative_positions,
              "offsets beyond it share the last bucket", 1)};
  deberta.make_attention = [](const EncodingConfig& c, AttentionEncodings& slots) {
    slots.relative = DebertaRelative(DebertaRelativeOptions(c.num_heads, c.dim / c.num_heads)
                                       .position_buckets(c.deberta_position_buckets)
                                       .max_relative_positions(c.deberta_max_relative_positions)
                                       .init_std(c.init_std));
  };
  out.push_back(std::move(deberta));
}

}  // namespace posenc::nn::families
