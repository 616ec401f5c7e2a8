// none and nope: no positional signal (the baselines).
#include <vector>

#include "families.h"

namespace posenc::nn::families {

namespace {

void add_no_encoding(std::vector<EncodingFamily>& out) {
  EncodingFamily none;
  none.name = "none";
  none.point = EncodingPoint::kNone;
  none.in_report = false;
  none.description = "no position information: attention sees a bag of tokens";
  out.push_back(std::move(none));

  EncodingFamily nope;
  nope.name = "nope";
  nope.point = EncodingPoint::kNone;
  nope.in_report = false;
  nope.description =
      "no positional encoding in a causal decoder, where the mask alone carries position (Kazemnejad et al. 2023); "
      "decoders only";
  // Without a causal mask nothing tells positions apart: that baseline is 'none'.
  nope.needs.causal = true;
  nope.needs.causal_hint = "an encoder sees a bag of tokens; use 'none' for that baseline";
  out.push_back(std::move(nope));
}

const Registration registered(10, add_no_encoding);

}  // namespace

}  // namespace posenc::nn::families
