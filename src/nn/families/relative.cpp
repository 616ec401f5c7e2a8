// Relative-vector families: Shaw's clipped tables, NEZHA's sinusoids, Transformer-XL.
#include <vector>

#include "families.h"
#include "posenc/nn/relative_encodings.h"

namespace posenc::nn::families {

namespace {

void add_relative(std::vector<EncodingFamily>& out) {
  EncodingFamily shaw;
  shaw.name = "shaw";
  shaw.point = EncodingPoint::kRelativeVectors;
  shaw.description = "learned key and value vectors per clipped offset, one table shared by the heads (Shaw et al. 2018)";
  shaw.parameters = {max_distance_parameter(), init_std_parameter()};
  shaw.make_attention = [](const EncodingConfig& c, AttentionEncodings& slots) {
    slots.relative = ShawRelative(ShawRelativeOptions(c.max_distance, c.dim / c.num_heads)
                                      .num_heads(0)
                                      .values(true)
                                      .init_std(c.init_std));
  };
  out.push_back(std::move(shaw));

  for (const bool learnable : {false, true}) {
    EncodingFamily f;
    f.name = learnable ? "shaw-learnable-sinusoidal" : "shaw-sinusoidal";
    f.point = EncodingPoint::kRelativeVectors;
    f.description = learnable ? "NEZHA's relative sinusoids with trainable frequencies (Wang et al., ICLR 2021)"
                              : "fixed sinusoids of the clipped offset as relative key and value vectors (NEZHA, Wei "
                                "et al. 2019)";
    f.parameters = {max_distance_parameter(),
                    base_parameter(learnable ? "initial frequencies base^(-2i/head_dim)"
                                             : "frequencies base^(-2i/head_dim)")};
    f.needs.even_head_dim = true;
    f.report_section = "sinusoidal-relative";  // the learnable one equals the fixed one until trained
    f.make_attention = [learnable](const EncodingConfig& c, AttentionEncodings& slots) {
      slots.relative = SinusoidalRelative(SinusoidalRelativeOptions(c.max_distance, c.dim / c.num_heads)
                                              .base(c.base)
                                              .values(true)
                                              .learnable(learnable));
    };
    out.push_back(std::move(f));
  }

  EncodingFamily xl;
  xl.name = "xl";
  xl.point = EncodingPoint::kRelativeVectors;
  xl.description =
      "content and position shifts u, v and projected sinusoids W_R R_(i-j) over every offset (Dai et al. 2019, "
      "Transformer-XL)";
  xl.parameters = {base_parameter("frequencies of R, model_dim = dim channels"), init_std_parameter()};
  xl.needs.even_dim = true;
  xl.make_attention = [](const EncodingConfig& c, AttentionEncodings& slots) {
    slots.relative =
        TransformerXLRelative(TransformerXLOptions(c.num_heads, c.dim / c.num_heads).base(c.base).init_std(c.init_std));
  };
  out.push_back(std::move(xl));
}

const Registration registered(90, add_relative);

}  // namespace

}  // namespace posenc::nn::families
