// Query/key-point families: q and k rotated by position.
#include <vector>

#include "families.h"
#include "posenc/nn/rotary_embedding.h"

namespace posenc::nn::families {

namespace {

void add_rotary(std::vector<EncodingFamily>& out) {
  EncodingFamily rope;
  rope.name = "rope";
  rope.point = EncodingPoint::kQueryKey;
  rope.description = "rotary embedding of q and k, half (GPT-NeoX) layout, full head_dim (Su et al. 2021, RoFormer)";
  rope.parameters = {base_parameter("frequencies base^(-2i/head_dim)")};
  rope.needs.even_head_dim = true;
  rope.make_attention = [](const EncodingConfig& c, AttentionEncodings& slots) {
    slots.rotary =
        RotaryEmbedding(RotaryEmbeddingOptions(c.dim / c.num_heads).base(c.base).scaling(c.rope_scaling));
  };
  out.push_back(std::move(rope));

  EncodingFamily p_rope;
  p_rope.name = "p-rope";
  p_rope.point = EncodingPoint::kQueryKey;
  p_rope.description =
      "RoPE on the fastest share p of its frequency pairs only; the slowest pairs do not turn and carry content "
      "(Barbero et al. 2024, p-RoPE; Gemma's proportional RoPE)";
  p_rope.parameters = {base_parameter("frequencies base^(-2i/head_dim)"),
                       real("rope_fraction", &EncodingConfig::rope_fraction,
                            "p: pairs i < floor(p head_dim / 2) turn, the rest stay", 0.0, true, 1.0, false)};
  p_rope.needs.even_head_dim = true;
  p_rope.make_attention = [](const EncodingConfig& c, AttentionEncodings& slots) {
    // Hugging Face's "proportional" type at factor 1 is exactly p-RoPE: the first floor(p d/2) pairs keep
    // base^(-2i/d), the others get frequency 0.
    kernels::RopeScaling s;
    s.type = kernels::RopeType::kProportional;
    s.partial_rotary_factor = c.rope_fraction;
    slots.rotary = RotaryEmbedding(RotaryEmbeddingOptions(c.dim / c.num_heads).base(c.base).scaling(s));
  };
  out.push_back(std::move(p_rope));

  EncodingFamily xpos;
  xpos.name = "rope-xpos";
  xpos.point = EncodingPoint::kQueryKey;
  xpos.description = "RoPE with the xPos exponential decay of q.k with distance (Sun et al. 2022)";
  xpos.parameters = {base_parameter("frequencies base^(-2i/head_dim)"),
                     real("xpos_scale_base", &EncodingConfig::xpos_scale_base,
                          "decay zeta^((i-j)/scale_base), gamma 0.4", 0.0, true)};
  xpos.needs.even_head_dim = true;
  xpos.make_attention = [](const EncodingConfig& c, AttentionEncodings& slots) {
    slots.rotary = RotaryEmbedding(
        RotaryEmbeddingOptions(c.dim / c.num_heads).base(c.base).xpos_scale_base(c.xpos_scale_base));
  };
  out.push_back(std::move(xpos));
}

const Registration registered(30, add_rotary);

}  // namespace

}  // namespace posenc::nn::families
