// The report as JSON, and named options (Python's **options) read into a request.
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "posenc/check/check.h"
#include "posenc/error.h"

namespace posenc::check {
namespace {

using nlohmann::json;

// JSON has no infinity: a non-finite error (a -inf entry where posenc has a
// number) is written as null.
json num(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

json bands_json(const std::vector<Band>& bands) {
  json out = json::array();
  for (const Band& b : bands) {
    out.push_back({{"lo", b.lo}, {"hi", b.hi}, {"count", b.count}, {"max_abs", num(b.max_abs)},
                   {"max_rel", num(b.max_rel)}});
  }
  return out;
}

double number_of(const json& v, const std::string& key) {
  if (!v.is_number()) fail_argument("check", "option '", key, "' must be a number, got ", v.dump());
  return v.get<double>();
}

int64_t integer_of(const json& v, const std::string& key) {
  if (!v.is_number_integer()) fail_argument("check", "option '", key, "' must be an integer, got ", v.dump());
  return v.get<int64_t>();
}

bool bool_of(const json& v, const std::string& key) {
  if (!v.is_boolean()) fail_argument("check", "option '", key, "' must be true or false, got ", v.dump());
  return v.get<bool>();
}

std::string string_of(const json& v, const std::string& key) {
  if (!v.is_string()) fail_argument("check", "option '", key, "' must be a string, got ", v.dump());
  return v.get<std::string>();
}

std::vector<double> list_of(const json& v, const std::string& key) {
  if (!v.is_array()) fail_argument("check", "option '", key, "' must be a list of numbers, got ", v.dump());
  std::vector<double> out;
  for (const json& x : v) out.push_back(number_of(x, key));
  return out;
}

constexpr const char* kKnown =
    "hf_config, layer, start, base, rotary_dim, layout, precision, scale, length, height, width, frames, normalize, normalize_scale, "
    "query_offset, causal, num_buckets, max_distance, bidirectional, seq_len, rope_type (or scaling), factor, "
    "original_max_position_embeddings, max_position_embeddings, beta_fast, beta_slow, mscale, mscale_all_dim, "
    "truncate, attention_factor, short_factor, long_factor, low_freq_factor, high_freq_factor, partial_rotary_factor";

}  // namespace

std::string report_json(const CheckReport& r) {
  json out;
  out["what"] = r.what;
  out["kind"] = r.kind;
  out["reference"] = r.reference;
  out["tensor"] = r.tensor;
  out["dtype"] = r.dtype;
  out["shape"] = r.shape;
  out["positions"] = {{"first", r.first_position}, {"last", r.last_position}};
  out["value_range"] = r.value_range;
  out["tolerance"] = r.tolerance;
  out["tolerance_rule"] = r.tolerance_rule;
  out["max_abs_error"] = num(r.max_abs);
  out["max_rel_error"] = num(r.max_rel);
  out["matches"] = r.matches;
  out["bands"] = bands_json(r.bands);
  out["ratio"] = r.ratio ? num(*r.ratio) : json(nullptr);
  json channels = json::array();
  for (const ChannelGroup& g : r.channels) {
    channels.push_back({{"name", g.name}, {"first", g.first}, {"count", g.count}, {"max_abs", num(g.max_abs)}});
  }
  out["channels"] = channels;
  json hypotheses = json::array();
  for (const Hypothesis& h : r.hypotheses) {
    hypotheses.push_back({{"name", h.name},
                          {"description", h.description},
                          {"max_abs_error", num(h.max_abs)},
                          {"max_rel_error", num(h.max_rel)},
                          {"explains", h.explains},
                          {"bands", bands_json(h.bands)}});
  }
  out["hypotheses"] = hypotheses;
  out["diagnosis"] = r.diagnosis;
  return out.dump();
}

void apply_options_json(const std::string& text, CheckRequest& request) {
  const json options = json::parse(text, nullptr, false);
  if (options.is_discarded() || !options.is_object()) fail_argument("check", "options must be a JSON object");
  if (options.contains("hf_config") && !options["hf_config"].is_null()) {
    const int64_t layer = options.contains("layer") && !options["layer"].is_null()
                              ? integer_of(options["layer"], "layer") : 0;
    apply_hf_config(string_of(options["hf_config"], "hf_config"), layer, request);
  }
  const bool rope = request.kind == "rope";
  kernels::RopeScaling& s = request.rope.scaling;
  for (const auto& [key, v] : options.items()) {
    if (v.is_null() || key == "hf_config") continue;  // None: the default; hf_config: applied above
    if (key == "layer") {
      require(options.contains("hf_config"), "check", "option 'layer' needs hf_config");
      continue;
    }
    if (key == "start") request.start = integer_of(v, key);
    else if (key == "base") request.rope.base = request.absolute.base = request.grid.base = number_of(v, key);
    else if (key == "rotary_dim") request.rope.rotary_dim = integer_of(v, key);
    else if (key == "layout" && rope) request.rope.layout = kernels::parse_rope_layout(string_of(v, key), "check");
    else if (key == "layout") {
      request.absolute.layout = request.grid.layout = kernels::parse_layout(string_of(v, key), "check");
    } else if (key == "precision") {
      request.rope.precision = request.absolute.precision = request.grid.precision =
          kernels::parse_precision(string_of(v, key), "check");
    } else if (key == "scale") request.absolute.scale = request.grid.scale = number_of(v, key);
    else if (key == "length") request.absolute.length = integer_of(v, key);
    else if (key == "height") request.grid.height = integer_of(v, key);
    else if (key == "width") request.grid.width = integer_of(v, key);
    else if (key == "frames") request.grid.frames = integer_of(v, key);
    else if (key == "normalize") request.grid.normalize = bool_of(v, key);
    else if (key == "normalize_scale") request.grid.normalize_scale = number_of(v, key);
    else if (key == "query_offset") request.bias.query_offset = integer_of(v, key);
    else if (key == "causal") request.bias.causal = bool_of(v, key);
    else if (key == "num_buckets") request.bias.t5.num_buckets = integer_of(v, key);
    else if (key == "max_distance") request.bias.t5.max_distance = integer_of(v, key);
    else if (key == "bidirectional") request.bias.t5.bidirectional = bool_of(v, key);
    else if (key == "seq_len") request.rope.seq_len = integer_of(v, key);
    else if (key == "rope_type" || key == "scaling" || key == "type") {
      s.type = kernels::parse_rope_type(string_of(v, key), "check");
    } else if (key == "factor") s.factor = number_of(v, key);
    else if (key == "original_max_position_embeddings") s.original_max_position_embeddings = integer_of(v, key);
    else if (key == "max_position_embeddings") s.max_position_embeddings = integer_of(v, key);
    else if (key == "beta_fast") s.beta_fast = number_of(v, key);
    else if (key == "beta_slow") s.beta_slow = number_of(v, key);
    else if (key == "mscale") s.mscale = number_of(v, key);
    else if (key == "mscale_all_dim") s.mscale_all_dim = number_of(v, key);
    else if (key == "truncate") s.truncate = bool_of(v, key);
    else if (key == "attention_factor") s.attention_factor = number_of(v, key);
    else if (key == "short_factor") s.short_factor = list_of(v, key);
    else if (key == "long_factor") s.long_factor = list_of(v, key);
    else if (key == "low_freq_factor") s.low_freq_factor = number_of(v, key);
    else if (key == "high_freq_factor") s.high_freq_factor = number_of(v, key);
    else if (key == "partial_rotary_factor") s.partial_rotary_factor = number_of(v, key);
    else fail_argument("check", "unknown option '", key, "'; known: ", kKnown);
  }
}

}  // namespace posenc::check
