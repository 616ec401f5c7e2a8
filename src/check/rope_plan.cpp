// RoPE: the cos/sin cache [N, R] and q / k after rotation (..., T, D), each
// against the kernels' float64 values (rope_cos_sin, rope_apply) and under
// the usual porting mistakes.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "plan.h"
#include "posenc/error.h"
#include "posenc/kernels/rope.h"
#include "posenc/kernels/rope_seq_len.h"

namespace posenc::check::detail {
namespace {

using kernels::Precision;
using kernels::RopeLayout;

// What the angles and factors are under one hypothesis.
struct RopeSetup {
  kernels::RopeScaling scaling;
  Precision precision = Precision::kExact;
  int64_t shift = 0;          // added to every position
  bool drop_factor = false;   // attention factor forced to 1
};

// cos and sin [rows, R/2] for positions + shift, float64.
void cos_sin(const RopeReference& ref, const RopeSetup& setup, int64_t rotary_dim, std::optional<int64_t> seq_len,
             const std::vector<int64_t>& positions, std::vector<double>& cos, std::vector<double>& sin) {
  const kernels::RopeFrequencies f =
      kernels::rope_frequencies(rotary_dim, ref.base, setup.scaling, seq_len, "check");
  kernels::RopeTableSpec spec;
  spec.omega = f.inv_freq;
  spec.attention_factor = setup.drop_factor ? 1.0 : f.attention_factor;
  spec.precision = setup.precision;
  std::vector<int64_t> pos(positions);
  for (int64_t& p : pos) p += setup.shift;
  const size_t n = pos.size() * static_cast<size_t>(rotary_dim / 2);
  cos.assign(n, 0.0);
  sin.assign(n, 0.0);
  if (!pos.empty()) kernels::rope_cos_sin<double>(spec, pos.data(), nullptr, static_cast<int64_t>(pos.size()),
                                                  cos.data(), sin.data());
}

// As Hugging Face: max position + 1 unless given (kernels/rope_seq_len.h).
std::optional<int64_t> seq_len_of(const RopeReference& ref, const std::vector<int64_t>& positions) {
  if (ref.seq_len || positions.empty()) return ref.seq_len;
  const int64_t last = *std::max_element(positions.begin(), positions.end());
  return kernels::range_seq_len(std::nullopt, last, 1);
}

std::string describe(const RopeReference& ref, int64_t rotary_dim, const kernels::RopeFrequencies& f) {
  std::ostringstream s;
  s.precision(6);
  s << "rope rotary_dim " << rotary_dim << ", base " << ref.base << ", scaling "
    << kernels::rope_type_name(ref.scaling.type) << ", attention factor " << f.attention_factor << ", precision "
    << kernels::precision_name(ref.precision);
  return s.str();
}

// The hypotheses shared by both forms, as setups.
struct NamedSetup {
  std::string name, description;
  RopeSetup setup;
};

std::vector<NamedSetup> setups(const RopeReference& ref, double attention_factor) {
  RopeSetup base{ref.scaling, ref.precision, 0, false};
  std::vector<NamedSetup> out;
  RopeSetup other = base;
  if (ref.precision == Precision::kExact) {
    other.precision = Precision::kFp32;
    out.push_back({"fp32-angles", "float32 angles: omega and p rounded to float32, p*omega in float32 (precision=fp32)",
                   other});
  } else {
    other.precision = Precision::kExact;
    out.push_back({"exact-angles", "exact angles (precision=exact) instead of the float32 formula", other});
  }
  if (attention_factor != 1.0) {
    other = base;
    other.drop_factor = true;
    out.push_back({"no-attention-factor", "the scaling's attention factor left out (cos, sin not multiplied)", other});
  }
  if (ref.scaling.type != kernels::RopeType::kDefault) {
    other = base;
    other.scaling = kernels::RopeScaling{};
    out.push_back({"no-scaling", "no scaling at all: default frequencies base^(-2j/R), attention factor 1", other});
  }
  for (int64_t shift : {1, -1}) {
    other = base;
    other.shift = shift;
    out.push_back({shift > 0 ? "positions+1" : "positions-1",
                   shift > 0 ? "positions off by one: p+1 used for row p" : "positions off by one: p-1 used for row p",
                   other});
  }
  return out;
}

Plan cos_sin_plan(const CheckRequest& request) {
  const std::vector<int64_t> shape = squeezed(request.tensor.shape);
  if (shape.size() != 2) {
    fail_argument("check", "--what cos-sin needs a 2-D tensor [positions, rotary_dim] (leading 1s are squeezed), got ",
                  shape_text(request.tensor.shape));
  }
  const int64_t rows = shape[0], dim = shape[1];
  const RopeReference& ref = request.rope;
  if (ref.rotary_dim != 0 && ref.rotary_dim != dim) {
    fail_argument("check", "--rotary-dim must be the cos-sin tensor's last dimension ", dim, ", got ", ref.rotary_dim);
  }
  require(dim % 2 == 0 && dim > 0, "check", "a cos-sin tensor needs an even last dimension (cos then sin), got ", dim);
  Plan plan;
  plan.what = What::kCosSin;
  plan.key = row_positions(request, rows, "rows");
  plan.inner = dim;
  // Fixed for every hypothesis, so a shifted position never changes the regime.
  const std::optional<int64_t> seq_len = seq_len_of(ref, plan.key);
  const kernels::RopeFrequencies f = kernels::rope_frequencies(dim, ref.base, ref.scaling, seq_len, "check");
  plan.reference = describe(ref, dim, f) + "; cos in columns [0, R/2), sin in [R/2, R)";
  const std::vector<int64_t> positions = plan.key;
  const int64_t half = dim / 2;
  auto table = [=](RopeSetup setup, bool interleaved) {
    return [=]() {
      std::vector<double> c, s;
      cos_sin(ref, setup, dim, seq_len, positions, c, s);
      std::vector<double> out(static_cast<size_t>(rows * dim));
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t j = 0; j < half; ++j) {
          const double cv = c[r * half + j], sv = s[r * half + j];
          out[r * dim + (interleaved ? 2 * j : j)] = cv;
          out[r * dim + (interleaved ? 2 * j + 1 : j + half)] = sv;
        }
      }
      return out;
    };
  };
  const RopeSetup base{ref.scaling, ref.precision, 0, false};
  plan.baseline = {"baseline", plan.reference, table(base, false)};
  for (const NamedSetup& h : setups(ref, f.attention_factor)) {
    plan.hypotheses.push_back({h.name, h.description, table(h.setup, false)});
  }
  plan.hypotheses.push_back({"other-layout", "interleaved cache: cos_j in column 2j, sin_j in column 2j+1",
                             table(base, true)});
  return plan;
}

// y = rope(x) over channels [first, first + rotary) of each row of D; others copied.
std::vector<double> rotate(const std::vector<double>& x, int64_t heads, int64_t seq, int64_t dim, int64_t first,
                           int64_t rotary, RopeLayout layout, const std::vector<double>& cos,
                           const std::vector<double>& sin) {
  std::vector<double> y(x);
  kernels::RopeApplyParams params;
  params.head_dim = rotary;
  params.rotary_dim = rotary;
  params.layout = layout;
  const kernels::RopeView<const double> in{x.data() + first, 1, heads, seq, 0, seq * dim, dim};
  const kernels::RopeView<double> out{y.data() + first, 1, heads, seq, 0, seq * dim, dim};
  kernels::rope_apply<double, double>(params, in, out, cos.data(), sin.data(), 1);
  return y;
}

Plan rotated_plan(const CheckRequest& request) {
  const std::vector<int64_t>& shape = request.tensor.shape;
  if (shape.size() < 2) {
    fail_argument("check", "--what rotated needs a tensor (..., positions, head_dim), got ", shape_text(shape));
  }
  require(request.input.has_value(), "check",
          "--what rotated needs the unrotated input: --input NAME (a tensor of the same file) or --input-file FILE");
  const DumpedTensor& x = *request.input;
  if (x.shape != shape) {
    fail_argument("check", "the input ", x.label, " must have the tensor's shape ", shape_text(shape), ", got ",
                  shape_text(x.shape));
  }
  const int64_t dim = shape.back(), seq = shape[shape.size() - 2];
  const RopeReference& ref = request.rope;
  if (ref.head_dim != 0 && dim != ref.head_dim) {
    fail_argument("check", "the tensor's last dimension must be head_dim ", ref.head_dim, ", got ", dim);
  }
  int64_t heads = 1;
  for (size_t i = 0; i + 2 < shape.size(); ++i) heads *= shape[i];
  const int64_t rotary = ref.rotary_dim == 0 ? dim : ref.rotary_dim;
  kernels::RopeApplyParams params{dim, rotary, ref.layout, false};
  kernels::validate(params, "check");
  Plan plan;
  plan.what = What::kRotated;
  plan.key = row_positions(request, seq, "positions (the second-to-last axis)");
  plan.inner = dim;
  plan.channels = dim;
  plan.rotary_dim = rotary;
  // Fixed for every hypothesis, so a shifted position never changes the regime.
  const std::optional<int64_t> seq_len = seq_len_of(ref, plan.key);
  const kernels::RopeFrequencies f = kernels::rope_frequencies(rotary, ref.base, ref.scaling, seq_len, "check");
  plan.reference = describe(ref, rotary, f) + ", layout " + std::string(kernels::rope_layout_name(ref.layout)) +
                   ", head_dim " + std::to_string(dim) + ", applied to the input " + x.label;
  const std::vector<int64_t> positions = plan.key;
  const std::vector<double>* input = &x.values;
  auto rotated = [=](RopeSetup setup, RopeLayout layout, int64_t first, int64_t r) {
    return [=]() {
      std::vector<double> c, s;
      cos_sin(ref, setup, r, seq_len, positions, c, s);
      return rotate(*input, heads, seq, dim, first, r, layout, c, s);
    };
  };
  const RopeSetup base{ref.scaling, ref.precision, 0, false};
  plan.baseline = {"baseline", plan.reference, rotated(base, ref.layout, 0, rotary)};
  for (const NamedSetup& h : setups(ref, f.attention_factor)) {
    plan.hypotheses.push_back({h.name, h.description, rotated(h.setup, ref.layout, 0, rotary)});
  }
  const RopeLayout other = ref.layout == RopeLayout::kHalf ? RopeLayout::kInterleaved : RopeLayout::kHalf;
  plan.hypotheses.push_back({"other-layout",
                             "the other layout: " + std::string(kernels::rope_layout_name(other)) +
                                 (other == RopeLayout::kHalf ? " (pairs j, j+R/2)" : " (pairs 2j, 2j+1)"),
                             rotated(base, other, 0, rotary)});
  if (rotary < dim) {
    plan.hypotheses.push_back({"rotary-last-channels",
                               "partial rotary on the last " + std::to_string(rotary) + " channels [" +
                                   std::to_string(dim - rotary) + ", " + std::to_string(dim) +
                                   ") instead of the first",
                               rotated(base, ref.layout, dim - rotary, rotary)});
    plan.hypotheses.push_back({"rotary-all-channels",
                               "every channel rotated (rotary_dim " + std::to_string(dim) + " instead of " +
                                   std::to_string(rotary) + ")",
                               rotated(base, ref.layout, 0, dim)});
  }
  return plan;
}

}  // namespace

Plan rope_plan(const CheckRequest& request, What what) {
  if (what == What::kCosSin) return cos_sin_plan(request);
  return rotated_plan(request);
}

}  // namespace posenc::check::detail
