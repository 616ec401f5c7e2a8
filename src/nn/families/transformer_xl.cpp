// Transformer-XL's relative encoding (Dai et al. 2019) on the family contract
// (relative-vectors point): content and position shifts u, v and projected
// sinusoids W_R R over every offset, the typed C++ front end
// TransformerXLRelative and the registry's descriptor "xl".
#include <ATen/ATen.h>

#include <algorithm>
#include <ostream>
#include <string>
#include <vector>

#include "families/families.h"
#include "families/relative_support.h"
#include "op_support.h"
#include "posenc/kernels/sinusoidal.h"
#include "posenc/nn/ops.h"
#include "posenc/nn/relative_encodings.h"
#include "posenc/nn/relative_ops.h"

namespace posenc::nn {
namespace {

constexpr const char* kXl = "TransformerXLRelative";

// [H, 2K+1, Dh] in `compute`: row r is W_R R_{K-r} split per head (offset j - i' = r - K); differentiable wrt w_r.
at::Tensor xl_table(const FamilySettings& s, const at::Tensor& w_r, int64_t max_distance, at::ScalarType compute) {
  const int64_t heads = s.integer("num_heads"), head_dim = s.integer("head_dim");
  // R over positions -K..K (row m: position m - K), then flipped: row r holds R_{K-r}.
  const kernels::SinusoidalParams params{s.integer("model_dim"), s.real("base"), 1.0, kernels::SinusoidalLayout::kHalf};
  const at::Tensor r = ops::sinusoidal_range(-max_distance, 2 * max_distance + 1, params, compute).flip({0});
  // (2K+1, model_dim) x (model_dim, H*Dh) -> [2K+1, H, Dh] -> [H, 2K+1, Dh]
  return at::matmul(r, w_r.to(compute).t()).view({2 * max_distance + 1, heads, head_dim}).permute({1, 0, 2}).contiguous();
}

// Every offset has its own vector: K reaches -(Tk-1) .. Tq-1, so nothing is clipped.
int64_t reach(int64_t q_len, int64_t k_len) { return std::max<int64_t>(std::max(q_len, k_len) - 1, 0); }

void xl_derive(FamilySettings& s) {
  if (!s.has("model_dim") || s.integer("model_dim") == 0) {
    s.set("model_dim", s.integer("num_heads") * s.integer("head_dim"));
  }
}

void xl_check(const FamilySettings& s) {
  const int64_t heads = s.integer("num_heads"), head_dim = s.integer("head_dim"), model_dim = s.integer("model_dim");
  TORCH_CHECK_VALUE(model_dim >= 0, "[", kXl, "] model_dim must be >= 0 (0: num_heads*head_dim), got ", model_dim);
  families::check_table_size(kXl, "u and v (num_heads x head_dim)", 1, heads, head_dim);
  TORCH_CHECK_VALUE(model_dim % 2 == 0, "[", kXl, "] model_dim must be even (sines then cosines), got ", model_dim);
  detail::translate_errors([&] { kernels::validate(kernels::SinusoidalParams{model_dim, s.real("base")}, kXl); });
  families::check_init_std(kXl, s.real("init_std"));
  families::check_table_size(kXl, "w_r (num_heads*head_dim x model_dim)", 1, heads * head_dim, model_dim);
}

// q (B, H, Tq, Dh), k (B, H, Tk, Dh) -> (B, H, Tq, Tk): u . k_j + (q_i + v) . (W_R R_{i'-j})_h
at::Tensor xl_logits(const FamilySettings& s, const FamilyState& t, const at::Tensor& q, const at::Tensor& k) {
  const int64_t heads = s.integer("num_heads"), head_dim = s.integer("head_dim");
  check_relative_qk(kXl, heads, head_dim, q, k);
  const at::ScalarType compute = relative_compute_dtype(q, t[2]);
  const int64_t q_len = q.size(2), k_len = k.size(2), max_distance = reach(q_len, k_len);
  const at::Tensor u = t[0].to(compute), v = t[1].to(compute);
  // u . k_j, the same for every query: (B, H, 1, Tk)
  const at::Tensor content = at::matmul(k.to(compute), u.unsqueeze(-1)).transpose(2, 3);
  const at::Tensor position = ops::relative_logits(q.to(compute) + v.view({1, heads, 1, head_dim}),
                                                   xl_table(s, t[2], max_distance, compute),
                                                   {max_distance, k_len - q_len}, k_len);
  return (position + content).to(q.scalar_type());
}

void xl_terms(const FamilySettings& s, const FamilyState& t, AttentionTerms& terms, int64_t q_len, int64_t k_len,
              at::ScalarType compute) {
  const int64_t max_distance = reach(q_len, k_len);
  terms.rel_k = xl_table(s, t[2], max_distance, compute);
  terms.max_distance = max_distance;
  terms.content_shift = t[0].to(compute);
  terms.relative_shift = t[1].to(compute);
}

FamilyContract xl_contract() {
  FamilyContract c;
  c.module = kXl;
  c.summary =
      "Transformer-XL: logit terms u . k_j + (q_i + v) . (W_R R_{i'-j})_h besides q_i . k_j, R_d the sinusoid of "
      "d with model_dim channels (sines then cosines, the XL code's pos_emb). Parameters u, v [H, Dh] and w_r "
      "[H*Dh, model_dim] ~ N(0, init_std^2). Every offset has its own vector (K = max(Tq, Tk) - 1, no clipping); "
      "the XL code's dropping of keys after the query is the caller's causal mask. forward(q, k) = logits(q, k).";
  c.settings = {size_setting("num_heads", "attention heads"), size_setting("head_dim", "features of a query head"),
                real_setting("base", 10000.0, "frequencies of R"),
                real_setting("init_std", 0.02, "u, v and W_R ~ N(0, init_std^2), as the XL code"),
                optional_integer_setting("model_dim", "channels of R, even (None or 0: num_heads * head_dim)",
                                         kAnyInteger)};
  c.state = {{"u"}, {"v"}, {"w_r"}};
  c.derive = xl_derive;
  c.check = xl_check;
  c.shapes = [](const FamilySettings& s) {
    const int64_t heads = s.integer("num_heads"), head_dim = s.integer("head_dim");
    return std::vector<std::vector<int64_t>>{{heads, head_dim}, {heads, head_dim}, {heads * head_dim, s.integer("model_dim")}};
  };
  c.reset = [](const FamilySettings& s, FamilyState& t) {
    for (at::Tensor& p : t) p.normal_(0.0, s.real("init_std"));
  };
  c.relative_logits = xl_logits;
  c.terms = xl_terms;
  c.methods = {{"table", {"max_distance", "dtype"},
                [](const FamilySettings& s, const FamilyState& t, const MethodCall& call) {
                  TORCH_CHECK_VALUE(call.max_distance >= 0, "[", kXl, "] max_distance must be >= 0, got ",
                                    call.max_distance);
                  return xl_table(s, t[2], call.max_distance, call.dtype.value_or(at::kFloat));
                }}};
  c.shown = {"num_heads", "head_dim", "model_dim", "base", "init_std"};
  return c;
}

const FamilyContractRegistration registered_contract(xl_contract());

void add_xl(std::vector<EncodingFamily>& out) {
  EncodingFamily xl;
  xl.name = "xl";
  xl.point = EncodingPoint::kRelativeVectors;
  xl.description =
      "content and position shifts u, v and projected sinusoids W_R R_(i-j) over every offset (Dai et al. 2019, "
      "Transformer-XL)";
  xl.parameters = {families::base_parameter("frequencies of R, model_dim = dim channels"),
                   families::init_std_parameter()};
  xl.needs.even_dim = true;
  xl.module = kXl;
  xl.preset = [](const EncodingConfig& c) {
    return FamilySettings()
        .set("num_heads", c.num_heads)
        .set("head_dim", c.dim / c.num_heads)
        .set("base", c.real("base"))
        .set("init_std", c.real("init_std"));
  };
  xl.make_attention = [](const EncodingConfig& c, AttentionEncodings& slots) {
    slots.relative =
        TransformerXLRelative(TransformerXLOptions(c.num_heads, c.dim / c.num_heads).base(c.real("base")).init_std(c.real("init_std")));
  };
  out.push_back(std::move(xl));
}

const families::Registration registered(92, add_xl);

}  // namespace

TransformerXLRelativeImpl::TransformerXLRelativeImpl(const TransformerXLOptions& options)
    : FamilyRelativeImpl(kXl, FamilySettings()
                                  .set("num_heads", options.num_heads())
                                  .set("head_dim", options.head_dim())
                                  .set("base", options.base())
                                  .set("init_std", options.init_std())
                                  .set("model_dim", options.model_dim())),
      options_(options) {}

at::Tensor TransformerXLRelativeImpl::table(int64_t max_distance, at::ScalarType compute) const {
  return xl_table(settings(), w_r(), max_distance, compute);
}

void TransformerXLRelativeImpl::pretty_print(std::ostream& stream) const {
  stream << "posenc::nn::TransformerXLRelative(num_heads=" << num_heads() << ", head_dim=" << head_dim()
         << ", model_dim=" << model_dim() << ", base=" << options_.base() << ", init_std=" << options_.init_std()
         << ")";
}

}  // namespace posenc::nn
