// Random Fourier features (Tancik et al. 2020) as an input encoding, on the
// family contract alone: x_p + [sin(2 pi b p), cos(2 pi b p)], b ~ N(0, sigma^2)
// a fixed buffer of dim/2 frequencies. No typed C++ front end: the registry
// holds it in FamilyInput by name; Python's class is generated.
#include <ATen/ATen.h>

#include <cmath>
#include <vector>

#include "families/families.h"
#include "op_support.h"
#include "posenc/nn/family_module.h"

namespace posenc::nn {
namespace {

constexpr const char* kFourier = "FourierFeatureEncoding";

FamilyContract fourier_contract() {
  FamilyContract c;
  c.module = kFourier;
  c.summary = "Random Fourier features (Tancik et al. 2020): row p = [sin(2 pi b p), cos(2 pi b p)], buffer b "
              "[dim/2] ~ N(0, sigma^2). forward(positions) -> positions.shape + [dim] (an int N: 0 .. N-1).";
  c.settings = {size_setting("dim", "features of a row (even)"), real_setting("sigma", 0.01, "spread of b")};
  c.state = {{"b", false}};
  c.check = [](const FamilySettings& s) {
    TORCH_CHECK_VALUE(s.integer("dim") % 2 == 0, "[", kFourier, "] dim must be even, got ", s.integer("dim"));
    TORCH_CHECK_VALUE(std::isfinite(s.real("sigma")) && s.real("sigma") > 0, "[", kFourier,
                      "] sigma must be finite and > 0, got ", s.real("sigma"));
  };
  c.shapes = [](const FamilySettings& s) { return std::vector<std::vector<int64_t>>{{s.integer("dim") / 2}}; };
  c.reset = [](const FamilySettings& s, FamilyState& t) { t[0].normal_(0.0, s.real("sigma")); };
  c.positions_count = true;
  c.embed = [](const FamilySettings&, const FamilyState& t, const EmbedCall& call) {
    const at::Tensor p = call.positions ? *call.positions
                                        : detail::range_positions("fourier", call.start, call.count.value_or(0));
    const at::Tensor angle = p.to(call.dtype).unsqueeze(-1) * (2 * M_PI) * t[0].to(call.dtype);
    return at::cat({angle.sin(), angle.cos()}, -1);
  };
  c.shown = {"dim", "sigma"};
  return c;
}

const FamilyContractRegistration registered_contract(fourier_contract());

void add_fourier(std::vector<EncodingFamily>& out) {
  EncodingFamily f;
  f.name = "fourier-features";
  f.point = EncodingPoint::kInput;
  f.description = "random Fourier features of the position, a fixed Gaussian frequency draw (Tancik et al. 2020)";
  f.needs.even_dim = true;
  f.module = kFourier;
  f.preset = [](const EncodingConfig& c) { return FamilySettings().set("dim", c.dim); };
  f.make_input = [](const EncodingConfig& c) -> InputEncoding {
    return FamilyInput(kFourier, FamilySettings().set("dim", c.dim));
  };
  out.push_back(std::move(f));
}

const families::Registration registered(22, add_fourier);

}  // namespace
}  // namespace posenc::nn
