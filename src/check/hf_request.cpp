// A Hugging Face config.json as the reference of a check (posenc::hf reads
// and validates it; here only the mapping onto the request).
#include "posenc/check/check.h"
#include "posenc/error.h"
#include "posenc/hf/hf_config.h"

namespace posenc::check {

void apply_hf_config(const std::string& path, int64_t layer, CheckRequest& request) {
  const hf::HfScheme config = hf::read_hf_config_file(path);
  const hf::HfLayerScheme& s = config.for_layer(layer);
  request.reference_label = path;
  if (s.rotary) {
    const hf::HfRotary& r = *s.rotary;
    if (!r.mrope_section.empty()) {
      fail_runtime("check", path, ": M-RoPE (mrope_section) is not supported by check");
    }
    request.kind = "rope";
    request.rope.head_dim = r.head_dim;
    request.rope.rotary_dim = r.rotary_dim;
    request.rope.base = r.base;
    request.rope.layout = r.layout;
    request.rope.scaling = r.scaling;
    return;
  }
  if (s.bias) {
    const hf::HfBias& b = *s.bias;
    request.bias.heads = b.num_heads;
    if (b.kind == hf::HfBias::Kind::kAlibi) {
      request.kind = "alibi";
      request.bias.alibi_slopes = b.alibi_slopes;
    } else {
      request.kind = "t5";
      request.bias.t5 = {b.bidirectional, b.num_buckets, b.max_distance};
    }
    return;
  }
  if (s.absolute) {
    if (s.absolute->kind == hf::HfAbsolute::Kind::kLearned) {
      fail_argument("check", path, ": the position table is learned: no formula to compare with");
    }
    request.kind = "sinusoidal";
    return;
  }
  if (!s.relative && !config.layer_types.empty()) {
    fail_argument("check", path, ": layer ", layer, " (", config.layer_types[static_cast<size_t>(layer)], ") has ",
                  s.query_temperature ? "no rotary, only a query temperature by position" : "no positional encoding",
                  " (NoPE): nothing to check; choose a layer with one");
  }
  fail_argument("check", path, ": no positional scheme posenc can check");
}

}  // namespace posenc::check
