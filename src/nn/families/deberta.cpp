// DeBERTa's torch layer, all of it in one file (docs/families.md): its op, its
// contract (relative-vectors point), the typed C++ front end and the descriptor.
//
// Its op: torch.ops.posenc.deberta_row_index: DeBERTa's bucket rows (kernels/deberta.h) for
// the attention's rel_index.
//
// Its contract: the projected tables once per call, then either the fused attention's rel_k /
// rel_q terms through a bucket index (terms) or HF's gathers (relative_logits). The LayerNorm
// and the projections are torch's own submodules (callers use pos_key_proj as a Linear); with
// share_att_key the layer's q_proj / k_proj are borrowed instead.
#include "posenc/nn/deberta_relative.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <sstream>
#include <torch/library.h>
#include <string>
#include <torch/nn/init.h>
#include <vector>

#include "families/families.h"
#include "families/relative_support.h"
#include "op_support.h"
#include "posenc/kernels/deberta.h"

namespace posenc::nn {
namespace {

// [2K+1] int64: element c is the row of offset d = j - i' = c - K (delta = i' - j = K - c).
at::Tensor deberta_row_index(int64_t max_distance, int64_t position_buckets, int64_t max_relative_positions) {
  const kernels::DebertaParams params{position_buckets, max_relative_positions};
  detail::translate_errors([&] { kernels::validate_deberta(params, "deberta_row_index"); });
  TORCH_CHECK_VALUE(max_distance >= 0 && max_distance <= (int64_t{1} << 40), "[deberta_row_index] max_distance "
                    "must be in [0, 2^40], got ", max_distance);
  at::Tensor index = at::empty({2 * max_distance + 1}, at::kLong);
  kernels::deberta_row_index(params, max_distance, index.data_ptr<int64_t>());
  return index;
}

}  // namespace

// A table of sizes alone: CompositeExplicitAutograd (the tracers of torch 2 record the op, its fake kernel in
// posenc/_fake.py runs it for its shape).
TORCH_LIBRARY_FRAGMENT(posenc, m) {
  m.def("deberta_row_index(int max_distance, int position_buckets=256, int max_relative_positions=512) -> Tensor");
}
TORCH_LIBRARY_IMPL(posenc, CompositeExplicitAutograd, m) { m.impl("deberta_row_index", &deberta_row_index); }

}  // namespace posenc::nn

namespace posenc::nn {
namespace {

constexpr const char* kDeberta = "DebertaRelative";

kernels::DebertaParams params_of(const FamilySettings& s) {
  return {s.integer("position_buckets"), s.integer("max_relative_positions")};
}

int64_t inner_of(const FamilySettings& s) { return s.integer("num_heads") * s.integer("head_dim"); }
bool c2p(const FamilySettings& s) { return s.holds_word("pos_att_type", "c2p"); }
bool p2c(const FamilySettings& s) { return s.holds_word("pos_att_type", "p2c"); }
bool shared(const FamilySettings& s) { return s.flag("share_att_key"); }

// The state's order: the module's own tensors, then the layer's it borrows.
enum Entry : size_t { kRel, kNormWeight, kNormBias, kKeyWeight, kKeyBias, kQueryWeight, kQueryBias,
                      kLayerQueryWeight, kLayerQueryBias, kLayerKeyWeight, kLayerKeyBias };

void deberta_check(const FamilySettings& s) {
  detail::translate_errors([&] { kernels::validate_deberta(params_of(s), kDeberta); });
  TORCH_CHECK_VALUE(c2p(s) || p2c(s), "[", kDeberta, "] pos_att_type must hold c2p or p2c, got neither");
  families::check_init_std(kDeberta, s.real("init_std"));
  const int64_t inner = inner_of(s);
  TORCH_CHECK_VALUE(!shared(s) || s.integer("model_dim") == inner, "[", kDeberta,
                    "] share_att_key needs model_dim = num_heads * head_dim = ", inner, ", got ", s.integer("model_dim"));
}

std::vector<std::vector<int64_t>> deberta_shapes(const FamilySettings& s) {
  const int64_t rows = 2 * kernels::deberta_span(params_of(s)), width = s.integer("model_dim"), inner = inner_of(s);
  const std::vector<int64_t> projection{inner, width}, bias{inner}, norm{width};
  return {{rows, width}, norm, norm, projection, bias, projection, bias, {inner, inner}, bias, {inner, inner}, bias};
}

// torch's Linear initialisation (kaiming_uniform_ with a = sqrt(5), the bias U(-1/sqrt(fan_in), 1/sqrt(fan_in))).
void reset_linear(at::Tensor& weight, at::Tensor& bias) {
  if (!weight.defined()) return;
  torch::nn::init::kaiming_uniform_(weight, std::sqrt(5.0));
  const double bound = 1.0 / std::sqrt(static_cast<double>(weight.size(1)));
  torch::nn::init::uniform_(bias, -bound, bound);
}

void deberta_reset(const FamilySettings& s, FamilyState& t) {
  t[kRel].normal_(0.0, s.real("init_std"));
  if (t[kNormWeight].defined()) t[kNormWeight].fill_(1.0), t[kNormBias].zero_();
  reset_linear(t[kKeyWeight], t[kKeyBias]);
  reset_linear(t[kQueryWeight], t[kQueryBias]);
}

// (pos_key, pos_query) [H, rows, Dh]: LayerNorm(rel_embeddings) through the projections, split per head as
// HF's transpose_for_scores of the projected embeddings.
std::pair<at::Tensor, at::Tensor> deberta_tables(const FamilySettings& s, const FamilyState& t,
                                                 at::ScalarType compute) {
  const int64_t width = s.integer("model_dim"), heads = s.integer("num_heads"), dh = s.integer("head_dim");
  at::Tensor rel = t[kRel].to(compute);
  if (s.flag("norm_rel_ebd")) {
    rel = at::layer_norm(rel, {width}, t[kNormWeight].to(compute), t[kNormBias].to(compute), s.real("layer_norm_eps"));
  }
  const bool handed = (!c2p(s) || t[kLayerKeyWeight].defined()) && (!p2c(s) || t[kLayerQueryWeight].defined());
  TORCH_CHECK_VALUE(!shared(s) || handed, "[", kDeberta,
                    "] share_att_key needs the attention layer's q/k projections (MultiheadAttention hands them "
                    "over), got none");
  const int64_t rows = rel.size(0);
  const auto project = [&](Entry weight) {
    const at::Tensor& b = t[weight + 1];
    return at::linear(rel, t[weight].to(compute), b.defined() ? b.to(compute) : at::Tensor())
        .view({rows, heads, dh})
        .permute({1, 0, 2});
  };
  at::Tensor pos_key, pos_query;
  if (c2p(s)) pos_key = project(shared(s) ? kLayerKeyWeight : kKeyWeight);
  if (p2c(s)) pos_query = project(shared(s) ? kLayerQueryWeight : kQueryWeight);
  return {pos_key, pos_query};
}

// q (B, H, Tq, Dh), k (B, H, Tk, Dh) -> (B, H, Tq, Tk): HF's gathers of the (B, H, T, 2 span) products.
at::Tensor deberta_logits(const FamilySettings& s, const FamilyState& t, const at::Tensor& q, const at::Tensor& k) {
  check_relative_qk(kDeberta, s.integer("num_heads"), s.integer("head_dim"), q, k);
  const at::ScalarType compute = relative_compute_dtype(q, t[kRel]);
  const int64_t batch = q.size(0), heads = q.size(1), q_len = q.size(2), k_len = k.size(2);
  const auto [pos_key, pos_query] = deberta_tables(s, t, compute);
  const kernels::DebertaParams params = params_of(s);
  // rows[i, j] = row(i' - j), i' = i + Tk - Tq.
  at::Tensor rows = at::empty({q_len, k_len}, at::kLong);
  int64_t* r = rows.data_ptr<int64_t>();
  for (int64_t i = 0; i < q_len; ++i)
    for (int64_t j = 0; j < k_len; ++j) r[i * k_len + j] = kernels::deberta_row(params, i + k_len - q_len - j);
  at::Tensor out = at::zeros({batch, heads, q_len, k_len}, q.options().dtype(compute));
  if (q_len == 0 || k_len == 0) return out.to(q.scalar_type());
  if (pos_key.defined()) {
    out = out + at::matmul(q.to(compute), pos_key.transpose(-1, -2)).gather(-1, rows.expand({batch, heads, q_len, k_len}));
  }
  if (pos_query.defined()) {
    const at::Tensor p2c_products = at::matmul(k.to(compute), pos_query.transpose(-1, -2));  // (B, H, Tk, 2 span)
    out = out + p2c_products.gather(-1, rows.t().expand({batch, heads, k_len, q_len})).transpose(-1, -2);
  }
  return out.to(q.scalar_type());
}

double scale_factor_of(const FamilySettings& s) { return 1.0 + (c2p(s) ? 1 : 0) + (p2c(s) ? 1 : 0); }

void deberta_terms(const FamilySettings& s, const FamilyState& t, AttentionTerms& terms, int64_t q_len, int64_t k_len,
                   at::ScalarType compute) {
  const auto [pos_key, pos_query] = deberta_tables(s, t, compute);
  if (pos_key.defined()) terms.rel_k = pos_key;
  if (pos_query.defined()) terms.rel_q = pos_query;
  // Every offset the call reaches gets its bucket row: O(Tq + Tk) entries.
  terms.max_distance = std::max<int64_t>({q_len - 1, k_len - 1, 0});
  static const auto row_index = c10::Dispatcher::singleton()
                                     .findSchemaOrThrow("posenc::deberta_row_index", "")
                                     .typed<decltype(deberta_row_index)>();
  terms.rel_index = row_index.call(terms.max_distance, s.integer("position_buckets"),
                                   s.integer("max_relative_positions"));
  terms.scale_factor = scale_factor_of(s);
}

StateSpec entry(std::string name, std::function<bool(const FamilySettings&)> present_if, bool borrowed = false) {
  StateSpec e;
  e.name = std::move(name), e.present_if = std::move(present_if), e.borrowed = borrowed;
  return e;
}

FamilyContract deberta_contract() {
  FamilyContract c;
  c.module = kDeberta;
  c.summary =
      "DeBERTa's disentangled attention (He et al., ICLR 2021; Hugging Face's modeling_deberta_v2): rel = "
      "LayerNorm(rel_embeddings) [2 span, model_dim]; pos_key = pos_key_proj(rel), pos_query = pos_query_proj(rel) "
      "per head [H, 2 span, Dh]; c2p[i,j] = q_i . pos_key[row(i' - j)], p2c[i,j] = k_j . pos_query[row(i' - j)]; "
      "logits = (q . k + c2p + p2c) / sqrt(Dh * scale_factor), scale_factor = 1 + #terms. row() is HF's "
      "make_log_bucket_position (position_buckets log buckets over max_relative_positions). forward(q, k) = "
      "logits(q, k): c2p + p2c (B, H, Tq, Tk), unscaled; attention_kwargs gives the fused attention's rel_k, rel_q "
      "and rel_index (O(T), no (Tq, Tk) tensor). share_att_key=True projects rel with the layer's q_proj / k_proj "
      "(MultiheadAttention hands them over, share_projections; DeBERTa v3's setting).";
  SettingSpec model_dim = integer_setting("model_dim", 0, "width of rel_embeddings; 0: num_heads * head_dim", 0);
  SettingSpec norm = flag_setting("norm_rel_ebd", true, "LayerNorm on rel_embeddings (HF's norm_rel_ebd \"layer_norm\")");
  norm.python_name = "norm_rel_ebd_enabled";  // norm_rel_ebd is the LayerNorm there
  c.settings = {size_setting("num_heads", "query heads"), size_setting("head_dim", "features of a query head"),
                model_dim,
                integer_setting("position_buckets", 256, "log buckets of the offsets; 0: none (HF's -1)", kAnyInteger),
                integer_setting("max_relative_positions", 512, "offsets beyond it share the last bucket", kAnyInteger),
                words_setting("pos_att_type", {"c2p", "p2c"}, {"p2c", "c2p"}, "the position terms: c2p, p2c or both"),
                flag_setting("share_att_key", false, "project rel with the layer's q_proj / k_proj (DeBERTa v3)"),
                norm, real_setting("layer_norm_eps", 1e-7, "the LayerNorm's eps (HF DebertaV2's layer_norm_eps)"),
                real_setting("init_std", 0.02, "rel_embeddings ~ N(0, init_std^2) (HF's initializer_range)")};
  const auto normed = [](const FamilySettings& s) { return s.flag("norm_rel_ebd"); };
  const auto own_key = [](const FamilySettings& s) { return !shared(s) && c2p(s); };
  const auto own_query = [](const FamilySettings& s) { return !shared(s) && p2c(s); };
  const auto layer_query = [](const FamilySettings& s) { return shared(s) && p2c(s); };
  const auto layer_key = [](const FamilySettings& s) { return shared(s) && c2p(s); };
  c.state = {{"rel_embeddings"},
             entry("norm_rel_ebd.weight", normed), entry("norm_rel_ebd.bias", normed),
             entry("pos_key_proj.weight", own_key), entry("pos_key_proj.bias", own_key),
             entry("pos_query_proj.weight", own_query), entry("pos_query_proj.bias", own_query),
             entry("q_proj.weight", layer_query, true), entry("q_proj.bias", layer_query, true),
             entry("k_proj.weight", layer_key, true), entry("k_proj.bias", layer_key, true)};
  c.submodules = {{"norm_rel_ebd", "LayerNorm", "layer_norm_eps"}, {"pos_key_proj", "Linear"},
                  {"pos_query_proj", "Linear"}};
  c.derive = [](FamilySettings& s) {
    if (s.integer("model_dim") == 0) s.set("model_dim", inner_of(s));
  };
  c.check = deberta_check;
  c.shapes = deberta_shapes;
  c.reset = deberta_reset;
  c.relative_logits = deberta_logits;
  c.terms = deberta_terms;
  FamilyContract::Method scale;
  scale.name = "scale_factor", scale.property = true, scale.constant = true;
  scale.call = [](const FamilySettings& s, const FamilyState&, const MethodCall&) {
    return at::scalar_tensor(scale_factor_of(s), at::kDouble);
  };
  FamilyContract::Method tables;
  tables.name = "tables", tables.arguments = {"dtype"}, tables.term_entries = {"relative_keys", "relative_queries"};
  c.methods = {scale, tables};
  c.shown_with = [](const FamilySettings& s, const char* true_word, const char* false_word) {
    std::ostringstream out;
    out << "num_heads=" << s.integer("num_heads") << ", head_dim=" << s.integer("head_dim")
        << ", model_dim=" << s.integer("model_dim") << ", position_buckets=" << s.integer("position_buckets")
        << ", max_relative_positions=" << s.integer("max_relative_positions") << ", pos_att_type="
        << (p2c(s) && c2p(s) ? "p2c|c2p" : c2p(s) ? "c2p" : "p2c")
        << ", share_att_key=" << (shared(s) ? true_word : false_word);
    return out.str();
  };
  return c;
}

const FamilyContractRegistration registered_contract(deberta_contract());

std::vector<std::string> att_types(const DebertaRelativeOptions& o) {
  std::vector<std::string> out;
  if (o.p2c()) out.emplace_back("p2c");
  if (o.c2p()) out.emplace_back("c2p");
  return out;
}

}  // namespace

DebertaRelativeImpl::DebertaRelativeImpl(const DebertaRelativeOptions& options)
    : FamilyRelativeImpl(kDeberta, FamilySettings()
                                       .set("num_heads", options.num_heads())
                                       .set("head_dim", options.head_dim())
                                       .set("model_dim", options.model_dim())
                                       .set("position_buckets", options.position_buckets())
                                       .set("max_relative_positions", options.max_relative_positions())
                                       .set("pos_att_type", att_types(options))
                                       .set("share_att_key", options.share_att_key())
                                       .set("norm_rel_ebd", options.norm_rel_ebd())
                                       .set("layer_norm_eps", options.layer_norm_eps())
                                       .set("init_std", options.init_std())),
      options_(options) {
  if (auto m = submodule("norm_rel_ebd")) norm = torch::nn::LayerNorm(std::dynamic_pointer_cast<torch::nn::LayerNormImpl>(m));
  if (auto m = submodule("pos_key_proj")) pos_key_proj = torch::nn::Linear(std::dynamic_pointer_cast<torch::nn::LinearImpl>(m));
  if (auto m = submodule("pos_query_proj")) {
    pos_query_proj = torch::nn::Linear(std::dynamic_pointer_cast<torch::nn::LinearImpl>(m));
  }
}

std::pair<at::Tensor, at::Tensor> DebertaRelativeImpl::tables(at::ScalarType compute) const {
  return deberta_tables(settings_, state_, compute);
}

}  // namespace posenc::nn

// The family's descriptor: what `posenc encodings`, the registry and the report read.
namespace posenc::nn::families {
namespace {

void add_deberta(std::vector<EncodingFamily>& out) {
  EncodingFamily deberta;
  deberta.name = "deberta";
  deberta.point = EncodingPoint::kRelativeVectors;
  deberta.description =
      "disentangled attention: content-to-position and position-to-content terms from LayerNorm-ed relative "
      "embeddings projected per head, deberta_position_buckets log buckets over deberta_max_relative_positions, "
      "logits / sqrt(3 Dh) (He et al. 2021, DeBERTa v2/v3)";
  deberta.parameters = {
      init_std_parameter(),
      integer("deberta_position_buckets", 256,
              "log buckets of the relative offsets; 0: none", 0),
      integer("deberta_max_relative_positions", 512,
              "offsets beyond it share the last bucket", 1)};
  deberta.module = kDeberta;
  deberta.preset = [](const EncodingConfig& c) {
    return FamilySettings()
        .set("num_heads", c.num_heads)
        .set("head_dim", c.dim / c.num_heads)
        .set("position_buckets", c.integer("deberta_position_buckets"))
        .set("max_relative_positions", c.integer("deberta_max_relative_positions"))
        .set("init_std", c.real("init_std"));
  };
  deberta.make_attention = [](const EncodingConfig& c, AttentionEncodings& slots) {
    slots.relative = DebertaRelative(DebertaRelativeOptions(c.num_heads, c.dim / c.num_heads)
                                       .position_buckets(c.integer("deberta_position_buckets"))
                                       .max_relative_positions(c.integer("deberta_max_relative_positions"))
                                       .init_std(c.real("init_std")));
  };
  out.push_back(std::move(deberta));
}

const Registration registered(100, add_deberta);

}  // namespace
}  // namespace posenc::nn::families
