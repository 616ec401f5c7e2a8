// DeBERTa's disentangled attention (He et al. 2021; HF's DebertaV2): relative vectors
// with HF's defaults (256 log buckets over 512 positions, c2p and p2c).
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
      "embeddings projected per head, 256 log buckets over 512 positions, logits / sqrt(3 Dh) (He et al. 2021, "
      "DeBERTa v2/v3)";
  deberta.parameters = {init_std_parameter()};
  deberta.make_attention = [](const EncodingConfig& c, AttentionEncodings& slots) {
    slots.relative = DebertaRelative(DebertaRelativeOptions(c.num_heads, c.dim / c.num_heads).init_std(c.init_std));
  };
  out.push_back(std::move(deberta));
}

}  // namespace posenc::nn::families
