// torch.ops.posenc.encoding_catalog(): the families' descriptors as JSON, so
// that the Python package reads names, points, defaults, ranges and needs
// from the one place that defines them instead of restating them.
#include <torch/library.h>

#include <nlohmann/json.hpp>
#include <string>

#include "posenc/nn/encoding_family.h"

namespace posenc::nn {
namespace {

// [{"name", "point", "description", "needs": {...}, "parameters": [{"name", "default", "integer",
//   "lower", "lower_open", "upper", "upper_open", "meaning", "training_option"}]}]
std::string encoding_catalog_json() {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const EncodingFamily& f : encoding_families()) {
    nlohmann::ordered_json parameters = nlohmann::ordered_json::array();
    for (const EncodingParameter& p : f.parameters) {
      const bool integer = p.integral;
      const double value = p.value(EncodingConfig{});
      nlohmann::ordered_json j{{"name", p.name},
                               {"default", integer ? nlohmann::ordered_json(static_cast<int64_t>(value))
                                                   : nlohmann::ordered_json(value)},
                               {"integer", integer},
                               {"lower", p.lower},
                               {"lower_open", p.lower_open},
                               {"upper", p.upper < 1e300 ? nlohmann::ordered_json(p.upper) : nlohmann::ordered_json()},
                               {"upper_open", p.upper_open},
                               {"meaning", p.meaning},
                               {"training_option", p.training_option}};
      parameters.push_back(std::move(j));
    }
    out.push_back({{"name", f.name},
                   {"point", encoding_point_name(f.point)},
                   {"description", f.description},
                   {"report_section", !f.in_report            ? ""
                                      : f.report_section.empty() ? f.name
                                                                 : f.report_section},
                   {"needs",
                    {{"even_head_dim", f.needs.even_head_dim},
                     {"even_dim", f.needs.even_dim},
                     {"causal", f.needs.causal},
                     {"causal_hint", f.needs.causal_hint}}},
                   {"parameters", std::move(parameters)}});
  }
  return out.dump();
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(posenc, m) { m.def("encoding_catalog() -> str", &encoding_catalog_json); }

}  // namespace posenc::nn
