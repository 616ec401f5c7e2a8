// ALiBi's torch layer (posenc/nn/attention_biases.h), in 1D and on image
// grids: the two contracts (posenc/nn/family_contract.h; the slopes a buffer,
// the bias formed in double from the exact slopes and rounded once), the typed
// C++ front ends and the registry's descriptor. The kernels are the shared
// src/kernels/alibi.cpp.
#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "families/families.h"
#include "op_support.h"
#include "posenc/nn/attention_biases.h"
#include "posenc/nn/bias_ops.h"

namespace posenc::nn {
namespace {

using families::accumulate;
using families::axis_offsets;
using families::check_grid_lengths;

constexpr double kInf = std::numeric_limits<double>::infinity();

// "(3,)", "(2, 3)": a shape as Python prints it.
std::string python_tuple(at::IntArrayRef sizes) {
  std::string s = detail::tuple_of(sizes);
  return sizes.size() == 1 ? s.insert(s.size() - 1, ",") : s;
}

// ---------------------------------------------------------------------------
// AlibiBias: buffer "slopes" [H], the paper's unless given (slopes=, MPT's alibi_bias_max variant).

constexpr const char* kAlibi = "AlibiBias";

at::Tensor alibi_dense(const FamilySettings& s, const FamilyState& t, int64_t q_len, int64_t k_len) {
  const at::Tensor& slopes = t[0];
  // The op forms -m_h |i' - j| in double from the exact slopes and rounds once, which a product with
  // the rounded buffer would not; given slopes are exact as they are, so the same in double.
  if (!s.flag("slopes")) return ops::alibi_bias(s.integer("num_heads"), q_len, k_len, s.flag("causal"),
                                                slopes.scalar_type());
  const at::Tensor i = at::arange(q_len, at::kDouble).unsqueeze(1) + static_cast<double>(k_len - q_len);
  const at::Tensor j = at::arange(k_len, at::kDouble).unsqueeze(0);
  at::Tensor bias = -slopes.to(at::kDouble).view({-1, 1, 1}) * (i - j).abs();
  if (s.flag("causal")) bias = bias.masked_fill(j > i, -kInf);
  return bias.to(slopes.scalar_type());
}

at::Tensor exact_slopes(const FamilySettings& s, const FamilyState& t, at::ScalarType dtype) {
  return s.flag("slopes") ? t[0].to(dtype) : ops::alibi_slopes(s.integer("num_heads"), dtype);
}

FamilyContract alibi_contract() {
  FamilyContract c;
  c.module = kAlibi;
  c.summary =
      "ALiBi (Press et al., ICLR 2022): bias[h, i, j] = -m_h |i' - j|, -inf where j > i' when causal. slopes None: "
      "the paper's geometric slopes (posenc.alibi_slopes), and the bias is formed from the exact slopes in float64 "
      "and rounded once; slopes, a tensor [num_heads], replaces them (e.g. MPT's alibi_bias_max variant). Buffer "
      "\"slopes\" (persistent: it is the module's state).";
  SettingSpec slopes;
  slopes.name = "slopes", slopes.type = SettingType::kTensor, slopes.default_value = false;
  slopes.meaning = "the slopes [num_heads] (None: the paper's)";
  c.settings = {size_setting("num_heads", "H"), flag_setting("causal", false, "-inf on keys after the query"),
                std::move(slopes)};
  c.state = {{"slopes", false}};
  c.shapes = [](const FamilySettings& s) { return std::vector<std::vector<int64_t>>{{s.integer("num_heads")}}; };
  c.reset = [](const FamilySettings& s, FamilyState& t) {
    if (!s.flag("slopes")) t[0].copy_(ops::alibi_slopes(s.integer("num_heads")));  // given ones are kept
  };
  c.dense = alibi_dense;
  c.terms = [](const FamilySettings& s, const FamilyState& t, AttentionTerms& out, int64_t q_len, int64_t k_len,
               at::ScalarType compute) {
    // From the slopes in double, rounded once (as the dense form).
    accumulate(out.offset_bias, ops::alibi_offset_bias(exact_slopes(s, t, at::kDouble), q_len, k_len).to(compute));
    if (s.flag("causal")) out.causal = true;
  };
  c.keyword_names = [](const FamilySettings& s) {
    FamilyKeywords k;
    k.tensors = {"alibi_slopes"};
    if (s.flag("causal")) k.values.set("causal", true);
    return k;
  };
  c.keywords = [](const FamilySettings& s, const FamilyState& t, int64_t, int64_t, at::ScalarType dtype) {
    return std::vector<at::Tensor>{exact_slopes(s, t, dtype)};
  };
  c.adopted = {{"slopes", [](const FamilySettings& s, const at::Tensor& slopes) {
                  const int64_t heads = s.integer("num_heads");
                  TORCH_CHECK_VALUE(slopes.dim() == 1 && slopes.size(0) == heads && slopes.is_floating_point(), "[",
                                    kAlibi, "] slopes must be a 1-D floating tensor of num_heads = ", heads,
                                    " values, got ", python_tuple(slopes.sizes()), " torch.",
                                    detail::dtype_name(slopes.scalar_type()));
                  TORCH_CHECK_VALUE(at::isfinite(slopes).all().item<bool>(), "[", kAlibi, "] slopes must be finite");
                  return slopes.detach().to(slopes.scalar_type() == at::kDouble ? at::kDouble : at::kFloat, false,
                                            true);
                }}};
  c.shown = {"num_heads", "causal"};
  return c;
}

// ---------------------------------------------------------------------------
// AlibiBias2d: buffer "slopes" as AlibiBias, on a height x width grid flattened as y*width + x.

constexpr const char* kAlibi2d = "AlibiBias2d";

kernels::Alibi2dParams alibi_2d_of(const FamilySettings& s) {
  return {s.integer("num_heads"), s.integer("height"), s.integer("width"),
          kernels::parse_grid_distance(s.word("distance"), kAlibi2d)};
}

at::Tensor alibi_2d_dense(const FamilySettings& s, const FamilyState& t, int64_t q_len, int64_t k_len) {
  check_grid_lengths(kAlibi2d, s, q_len, k_len);
  return ops::alibi_bias_2d(alibi_2d_of(s), t[0].scalar_type());
}

FamilyContract alibi_2d_contract() {
  FamilyContract c;
  c.module = kAlibi2d;
  c.summary =
      "ALiBi on a height x width grid flattened as y*width + x: -m_h dist((y, x), (y', x')), distance \"euclidean\" "
      "or \"manhattan\"; q_len = k_len = height*width. Buffer \"slopes\" as AlibiBias.";
  c.settings = {size_setting("num_heads", "H"), size_setting("height", "the grid's rows"),
                size_setting("width", "the grid's columns"),
                word_setting("distance", {"euclidean", "manhattan"}, "the grid distance")};
  c.state = {{"slopes", false}};
  c.check = [](const FamilySettings& s) {
    detail::translate_errors([&] { kernels::validate(alibi_2d_of(s), kAlibi2d); });
  };
  c.shapes = [](const FamilySettings& s) { return std::vector<std::vector<int64_t>>{{s.integer("num_heads")}}; };
  c.reset = [](const FamilySettings& s, FamilyState& t) { t[0].copy_(ops::alibi_slopes(s.integer("num_heads"))); };
  c.dense = alibi_2d_dense;
  c.terms = [](const FamilySettings& s, const FamilyState&, AttentionTerms& out, int64_t q_len, int64_t k_len,
               at::ScalarType compute) {
    check_grid_lengths(kAlibi2d, s, q_len, k_len);
    const int64_t heads = s.integer("num_heads"), height = s.integer("height"), width = s.integer("width");
    const at::Tensor dy = axis_offsets(height).to(at::kDouble).unsqueeze(1);
    const at::Tensor dx = axis_offsets(width).to(at::kDouble).unsqueeze(0);
    const at::Tensor distance = alibi_2d_of(s).distance == kernels::GridDistance::kManhattan
                                    ? dy.abs() + dx.abs()
                                    : (dy * dy + dx * dx).sqrt();
    const at::Tensor slopes = ops::alibi_slopes(heads, at::kDouble).view({heads, 1, 1});
    accumulate(out.grid_bias, (-slopes * distance.unsqueeze(0)).to(compute));
    out.grid_height = height, out.grid_width = width;
  };
  // posenc.attention's keywords carry the grid as a dense bias.
  c.keyword_names = [](const FamilySettings&) { return FamilyKeywords{{"bias"}, {}}; };
  c.keywords = [](const FamilySettings& s, const FamilyState& t, int64_t q_len, int64_t k_len, at::ScalarType dtype) {
    return std::vector<at::Tensor>{alibi_2d_dense(s, t, q_len, k_len).to(dtype)};
  };
  c.shown = {"num_heads", "height", "width", "distance"};
  return c;
}

const FamilyContractRegistration registered_alibi(alibi_contract());
const FamilyContractRegistration registered_alibi_2d(alibi_2d_contract());

}  // namespace

AlibiBiasImpl::AlibiBiasImpl(const AlibiBiasOptions& o)
    : FamilyBiasImpl(kAlibi, FamilySettings().set("num_heads", o.num_heads()).set("causal", o.causal())),
      options_(o) {}

AlibiBias2dImpl::AlibiBias2dImpl(const AlibiBias2dOptions& o)
    : FamilyBiasImpl(kAlibi2d, FamilySettings()
                                   .set("num_heads", o.num_heads())
                                   .set("height", o.height())
                                   .set("width", o.width())
                                   .set("distance", std::string(kernels::grid_distance_name(o.distance())))),
      options_(o) {}

}  // namespace posenc::nn

// The family's descriptor: what `posenc encodings`, the registry and the report read. The C++
// registry builds the typed module (make_attention); the preset gives the Python class its settings.
namespace posenc::nn::families {
namespace {

void add_alibi(std::vector<EncodingFamily>& out) {
  EncodingFamily alibi;
  alibi.name = "alibi";
  alibi.point = EncodingPoint::kLogitBias;
  alibi.description =
      "fixed linear penalty -m_h |i - j| with the paper's geometric slopes, causal in the decoder (Press et al., "
      "ICLR 2022)";
  alibi.make_attention = [](const EncodingConfig& c, AttentionEncodings& slots) {
    slots.bias = AlibiBias(AlibiBiasOptions(c.num_heads).causal(c.causal));
  };
  alibi.module = "AlibiBias";  // the same settings, for the Python class
  alibi.preset = [](const EncodingConfig& c) {
    FamilySettings s;
    return s.set("num_heads", c.num_heads).set("causal", c.causal);
  };
  out.push_back(std::move(alibi));
}

const Registration registered(40, add_alibi);

}  // namespace
}  // namespace posenc::nn::families
