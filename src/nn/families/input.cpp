// Input-point families: a vector per position added to the token embeddings.
#include <vector>

#include "families.h"
#include "posenc/nn/learnable_sinusoidal_encoding.h"
#include "posenc/nn/learned_encoding.h"
#include "posenc/nn/sinusoidal_encoding.h"

namespace posenc::nn::families {

namespace {

void add_input(std::vector<EncodingFamily>& out) {
  EncodingFamily sinusoidal;
  sinusoidal.name = "sinusoidal";
  sinusoidal.point = EncodingPoint::kInput;
  sinusoidal.description =
      "fixed sinusoids added to the token embeddings, interleaved (sin, cos) (Vaswani et al. 2017)";
  const EncodingParameter amplitude = real("input_scale", &EncodingConfig::input_scale,
                                          "amplitude of the sinusoids added to the embeddings", 0.0, true);
  sinusoidal.parameters = {base_parameter("frequencies base^(-2i/dim)"), amplitude};
  sinusoidal.needs.even_dim = true;
  sinusoidal.make_input = [](const EncodingConfig& c) -> InputEncoding {
    return SinusoidalEncoding(SinusoidalEncodingOptions(c.dim).base(c.base).scale(c.input_scale));
  };
  out.push_back(std::move(sinusoidal));

  EncodingFamily learned;
  learned.name = "learned";
  learned.point = EncodingPoint::kInput;
  learned.description = "a trainable table of one vector per position, added to the embeddings (BERT, GPT-2)";
  EncodingParameter rows = integer("max_positions", &EncodingConfig::max_positions,
                                   "rows; the model's max_positions, positions beyond it are an error", 1);
  rows.training_option = false;
  learned.parameters = {rows, init_std_parameter()};
  learned.make_input = [](const EncodingConfig& c) -> InputEncoding {
    return LearnedEncoding(LearnedEncodingOptions(c.max_positions, c.dim).init_std(c.init_std));
  };
  out.push_back(std::move(learned));

  EncodingFamily learnable;
  learnable.name = "learnable-sinusoidal";
  learnable.point = EncodingPoint::kInput;
  learnable.description =
      "sinusoids with trainable frequencies, initialised to the fixed ones (Wang et al., ICLR 2021)";
  learnable.parameters = {base_parameter("initial frequencies base^(-2i/dim)"), amplitude};
  learnable.needs.even_dim = true;
  learnable.report_section = "sinusoidal";  // equal to the fixed table until trained
  learnable.make_input = [](const EncodingConfig& c) -> InputEncoding {
    return LearnableSinusoidalEncoding(LearnableSinusoidalEncodingOptions(c.dim).base(c.base).scale(c.input_scale));
  };
  out.push_back(std::move(learnable));
}

const Registration registered(20, add_input);

}  // namespace

}  // namespace posenc::nn::families
