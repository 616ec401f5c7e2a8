// run_check: the comparison, its bands and tolerance, and the diagnosis (the
// hypotheses that bring the error to rounding level, with their numbers).
#include "posenc/check/check.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <filesystem>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "plan.h"
#include "posenc/error.h"
#include "posenc/io/tensor_file.h"

namespace posenc::check {
namespace detail {

std::vector<int64_t> squeezed(const std::vector<int64_t>& shape) {
  size_t first = 0;
  while (first + 1 < shape.size() && shape[first] == 1) ++first;
  return {shape.begin() + static_cast<std::ptrdiff_t>(first), shape.end()};
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::vector<int64_t> row_positions(const CheckRequest& request, int64_t rows, const char* axis) {
  if (request.positions) {
    if (static_cast<int64_t>(request.positions->size()) != rows) {
      fail_argument("check", "--positions must list ", rows, " positions (the tensor's ", axis, "), got ",
                    request.positions->size());
    }
    return *request.positions;
  }
  std::vector<int64_t> out(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) out[r] = request.start + r;
  return out;
}

}  // namespace detail

namespace {

using detail::Plan;

constexpr std::string_view kWhatNames[] = {"cos-sin", "rotated", "bias", "table"};

struct Tolerance {
  double unit;
  const char* rule;
};

// Times the value range. Each allows a few roundings of the port's own
// arithmetic (sin/cos, the multiply-adds of the rotation) on top of the final
// rounding to the dtype; bfloat16 keeps 8 significant bits.
Tolerance tolerance_of(const std::string& dtype) {
  if (dtype == "float64") return {0x1p-40, "float64: 2^-40 of the value range (room for a different sin/cos)"};
  if (dtype == "float32") return {0x1p-21, "float32: 2^-21 (8 ulp of 2^-24) of the value range"};
  if (dtype == "float16") return {0x1p-9, "float16: 2^-9 (2 ulp of 2^-10) of the value range"};
  return {0x1p-6, "bfloat16: 2^-6 (2 ulp of 2^-7) of the value range"};
}

int64_t band_of(int64_t key) {
  const uint64_t a = key < 0 ? uint64_t(0) - static_cast<uint64_t>(key) : static_cast<uint64_t>(key);
  return static_cast<int64_t>(std::bit_width(a));  // 0 -> [0,1), 1 -> [1,2), 2..3 -> [2,4), ...
}

double element_error(double t, double r) {
  if (t == r) return 0.0;  // also both -inf (a masked entry)
  if (!std::isfinite(t) || !std::isfinite(r)) return std::numeric_limits<double>::infinity();
  return std::abs(t - r);
}

struct Measure {
  double max_abs = 0.0, max_rel = 0.0;
  std::vector<Band> bands;
};

Measure measure(const std::vector<double>& t, const std::vector<double>& r, const Plan& plan, double range) {
  std::vector<Band> bands(65);
  for (size_t b = 0; b < bands.size(); ++b) {
    bands[b].lo = b == 0 ? 0 : int64_t{1} << (b - 1);
    bands[b].hi = b == 0 ? 1 : (b == 64 ? std::numeric_limits<int64_t>::max() : int64_t{1} << b);
  }
  const size_t period = plan.key.size();
  Measure m;
  for (size_t e = 0; e < t.size(); ++e) {
    const double err = element_error(t[e], r[e]);
    Band& band = bands[band_of(plan.key[(e / plan.inner) % period])];
    band.count += 1;
    band.max_abs = std::max(band.max_abs, err);
    m.max_abs = std::max(m.max_abs, err);
  }
  for (Band& b : bands) {
    if (b.count == 0) continue;
    b.max_rel = b.max_abs / range;
    m.bands.push_back(b);
  }
  m.max_rel = m.max_abs / range;
  return m;
}

std::string number(double v) {
  std::ostringstream s;
  s.precision(3);
  s << v;
  return s.str();
}

std::string band_text(const Band& b) {
  std::ostringstream s;
  s << '[' << b.lo << ", " << b.hi << ')';
  return s.str();
}

// Least-squares c in t ~ c * r over the finite elements (rotated: the rotary channels).
std::optional<double> constant_ratio(const std::vector<double>& t, const std::vector<double>& r, const Plan& plan) {
  double tr = 0.0, rr = 0.0;
  for (size_t e = 0; e < t.size(); ++e) {
    if (plan.channels > 0 && static_cast<int64_t>(e % plan.channels) >= plan.rotary_dim) continue;
    if (!std::isfinite(t[e]) || !std::isfinite(r[e])) continue;
    tr += t[e] * r[e];
    rr += r[e] * r[e];
  }
  if (!(rr > 0.0) || !std::isfinite(tr / rr)) return std::nullopt;
  return tr / rr;
}

What resolve_what(const CheckRequest& request) {
  const std::string& kind = request.kind;
  std::string_view allowed;
  What what;
  if (kind == "rope") {
    what = request.what.value_or(request.input ? What::kRotated : What::kCosSin);
    allowed = "cos-sin or rotated";
    if (what == What::kCosSin || what == What::kRotated) return what;
  } else if (kind == "alibi" || kind == "t5") {
    what = request.what.value_or(What::kBias);
    allowed = "bias";
    if (what == What::kBias) return what;
  } else {
    if (kind != "sinusoidal-2d" && kind != "sinusoidal-3d") {
      bool known = false;
      std::string names = "rope, alibi, t5";
      for (const kernels::AbsoluteKindInfo& info : kernels::absolute_kinds()) {
        known = known || info.name == kind;
        names += ", " + std::string(info.name);
      }
      if (!known) {
        fail_argument("check", "KIND must be one of ", names, ", sinusoidal-2d, sinusoidal-3d, got '", kind, "'");
      }
    }
    what = request.what.value_or(What::kTable);
    allowed = "table";
    if (what == What::kTable) return what;
  }
  fail_argument("check", "--what ", what_name(what), " does not apply to kind '", kind, "' (it takes ", allowed, ")");
}

void check_tensor(const CheckRequest& request, What what) {
  const DumpedTensor& t = request.tensor;
  if (static_cast<int64_t>(t.values.size()) == 0) fail_argument("check", "the tensor ", t.label, " is empty");
  if (detail::squeezed(t.shape).size() < 2) {
    fail_argument("check", "the tensor ", t.label, " has shape ", detail::shape_text(t.shape),
                  ", which fits no --what (cos-sin, table: [positions, dim]; rotated: (..., positions, head_dim); "
                  "bias: (heads, q_len, k_len))");
  }
  if (request.input && what != What::kRotated && request.kind != "t5") {
    fail_argument("check", "--input does not apply to --what ", what_name(what));
  }
  for (const DumpedTensor* d : {&t, request.input ? &*request.input : nullptr}) {
    if (d == nullptr) continue;
    for (double v : d->values) {
      if (std::isnan(v)) fail_argument("check", "the tensor ", d->label, " holds NaN");
    }
  }
}

Plan make_plan(const CheckRequest& request, What what) {
  switch (what) {
    case What::kCosSin:
    case What::kRotated: return detail::rope_plan(request, what);
    case What::kBias: return detail::bias_plan(request);
    case What::kTable: return detail::table_plan(request);
  }
  fail_argument("check", "unknown --what");
}

// The sentence naming one hypothesis that explains the tensor.
std::string explanation(const Hypothesis& h, const CheckReport& r) {
  const std::string drop = "the max abs error drops from " + number(r.max_abs) + " to " + number(h.max_abs) +
                           " (tolerance " + number(r.tolerance) + ")";
  if (h.name == "fp32-angles" && r.bands.size() >= 2) {
    // The first band past position 0, whose error is 0 under any precision.
    const Band& first = r.bands.front().lo == 0 ? r.bands[1] : r.bands.front();
    const Band& last = r.bands.back();
    return "float32 angles: the error grows with the position (max abs " + number(first.max_abs) + " in " +
           band_text(first) + ", " + number(last.max_abs) + " in " + band_text(last) +
           "), and the tensor matches posenc's precision=fp32 mode (p*omega rounded in float32) within float32 "
           "rounding: " + drop;
  }
  return h.name + ": " + h.description + "; " + drop;
}

void diagnose(CheckReport& r) {
  if (r.matches) {
    r.diagnosis.push_back("matches: max abs error " + number(r.max_abs) + " <= tolerance " + number(r.tolerance) +
                          " (" + r.tolerance_rule + ")");
    return;
  }
  const Hypothesis* best = nullptr;
  for (const Hypothesis& h : r.hypotheses) {
    if (h.explains) r.diagnosis.push_back(explanation(h, r));
    if (best == nullptr || h.max_abs < best->max_abs) best = &h;
  }
  if (r.channels.size() == 2) {
    const ChannelGroup& a = r.channels[0];
    const ChannelGroup& b = r.channels[1];
    r.diagnosis.push_back("channels compared separately: " + a.name + " [" + std::to_string(a.first) + ", " +
                          std::to_string(a.first + a.count) + ") max abs " + number(a.max_abs) + ", " + b.name + " [" +
                          std::to_string(b.first) + ", " + std::to_string(b.first + b.count) + ") max abs " +
                          number(b.max_abs));
  }
  const bool explained = std::any_of(r.hypotheses.begin(), r.hypotheses.end(), [](const Hypothesis& h) {
    return h.explains;
  });
  if (explained) return;
  std::string line = "no single hypothesis brings the error to rounding level (tolerance " + number(r.tolerance) + ")";
  if (best != nullptr) {
    line += "; closest: " + best->name + " (" + best->description + "), max abs " + number(best->max_abs) +
            " against " + number(r.max_abs);
  }
  r.diagnosis.push_back(line);
  for (const Hypothesis& h : r.hypotheses) {
    if (h.name == "fp32-angles" && h.max_abs < r.max_abs / 10 && r.bands.size() >= 2 &&
        r.bands.back().max_abs > 10 * r.bands.front().max_abs) {
      r.diagnosis.push_back("the error grows with the position (max abs " + number(r.bands.front().max_abs) + " in " +
                            band_text(r.bands.front()) + ", " + number(r.bands.back().max_abs) + " in " +
                            band_text(r.bands.back()) + ") and precision=fp32 reduces it to " + number(h.max_abs) +
                            ": consistent with float32 angles formed another way (e.g. omega computed in float32)");
    }
  }
}

}  // namespace

What parse_what(std::string_view name) {
  for (size_t i = 0; i < std::size(kWhatNames); ++i) {
    if (kWhatNames[i] == name) return static_cast<What>(i);
  }
  fail_argument("check", "--what must be one of cos-sin, rotated, bias, table, got '", name, "'");
}

std::string_view what_name(What what) noexcept { return kWhatNames[static_cast<int>(what)]; }

DumpedTensor load_dumped(const std::string& path, const std::optional<std::string>& name) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) fail_argument("check", "no such file: ", path);
  const io::NamedTensor t = io::load_tensor(path, name);
  DumpedTensor d;
  d.label = t.name.empty() ? path : path + ":" + t.name;
  const io::ElementType type = t.tensor.type;
  using io::ElementType;
  if (type != ElementType::kFloat16 && type != ElementType::kBFloat16 && type != ElementType::kFloat32 &&
      type != ElementType::kFloat64) {
    fail_argument("check", "the tensor ", d.label, " must be floating point (float16, bfloat16, float32, float64), got ",
                  io::element_type_name(type));
  }
  d.dtype = std::string(io::element_type_name(type));
  d.shape = t.tensor.shape;
  d.values = t.tensor.to_double();
  return d;
}

CheckReport run_check(const CheckRequest& request) {
  const What what = resolve_what(request);
  check_tensor(request, what);
  const Plan plan = make_plan(request, what);

  CheckReport r;
  r.what = std::string(what_name(what));
  r.kind = request.kind;
  r.reference = request.reference_label.empty() ? plan.reference : request.reference_label + ": " + plan.reference;
  r.tensor = request.tensor.label;
  r.dtype = request.tensor.dtype;
  r.shape = request.tensor.shape;
  if (what == What::kBias) {
    r.first_position = plan.first_position;
    r.last_position = plan.last_position;
  } else {
    r.first_position = *std::min_element(plan.key.begin(), plan.key.end());
    r.last_position = *std::max_element(plan.key.begin(), plan.key.end());
  }
  const std::vector<double>& t = request.tensor.values;
  std::vector<double> ref = plan.baseline.build();
  for (double v : ref) {
    if (std::isfinite(v)) r.value_range = std::max(r.value_range, std::abs(v));
  }
  const double range = r.value_range > 0.0 ? r.value_range : 1.0;
  const Tolerance tol = tolerance_of(r.dtype);
  r.tolerance = tol.unit * range;
  r.tolerance_rule = tol.rule;
  const Measure m = measure(t, ref, plan, range);
  r.max_abs = m.max_abs;
  r.max_rel = m.max_rel;
  r.bands = m.bands;
  r.matches = r.max_abs <= r.tolerance;
  r.ratio = constant_ratio(t, ref, plan);
  if (plan.channels > 0 && plan.rotary_dim < plan.channels) {
    ChannelGroup rot{"rotated", 0, plan.rotary_dim, 0.0};
    ChannelGroup pass{"pass-through", plan.rotary_dim, plan.channels - plan.rotary_dim, 0.0};
    for (size_t e = 0; e < t.size(); ++e) {
      ChannelGroup& g = static_cast<int64_t>(e % plan.channels) < plan.rotary_dim ? rot : pass;
      g.max_abs = std::max(g.max_abs, element_error(t[e], ref[e]));
    }
    r.channels = {rot, pass};
  }
  if (!r.matches) {
    auto add = [&](const std::string& name, const std::string& description, const std::vector<double>& values) {
      const Measure h = measure(t, values, plan, range);
      r.hypotheses.push_back({name, description, h.max_abs, h.max_rel, h.max_abs <= r.tolerance, h.bands});
    };
    for (const detail::Variant& v : plan.hypotheses) {
      try {
        add(v.name, v.description, v.build());
      } catch (const std::invalid_argument&) {
        // Not a possible configuration here (e.g. a position shifted below 0 for a kind that refuses it).
      }
    }
    if (r.ratio && std::abs(*r.ratio - 1.0) > 1e-9) {
      std::vector<double> scaled = ref;
      for (size_t e = 0; e < scaled.size(); ++e) {
        if (plan.channels == 0 || static_cast<int64_t>(e % plan.channels) < plan.rotary_dim) scaled[e] *= *r.ratio;
      }
      add("constant-factor",
          "posenc's values times the least-squares constant " + number(*r.ratio) +
              " (a missing or extra scale / attention factor; 1/c = " + number(1.0 / *r.ratio) + ")",
          scaled);
    }
  }
  diagnose(r);
  return r;
}

}  // namespace posenc::check
