// Shaw et al. 2018 on the family contract (relative-vectors point): learned
// key and value vectors per clipped offset, the typed C++ front end
// ShawRelative and the registry's descriptor "shaw". The tables are read by
// index (relative_ops.h): no (Tq, Tk, Dh) tensor. Inputs are widened to the
// compute dtype (exact) and the result rounded once.
#include <ATen/ATen.h>

#include <algorithm>
#include <ostream>
#include <string>
#include <vector>

#include "families/families.h"
#include "families/relative_support.h"
#include "op_support.h"
#include "posenc/nn/relative_encodings.h"
#include "posenc/nn/relative_ops.h"

namespace posenc::nn {
namespace {

using families::rows_for;

constexpr const char* kShaw = "ShawRelative";

int64_t heads(const FamilySettings& s) { return s.integer("num_heads"); }

void shaw_check(const FamilySettings& s) {
  families::check_shared_heads(kShaw, heads(s));
  families::check_init_std(kShaw, s.real("init_std"));
  families::check_table_size(kShaw, "a table (tables x (2*max_distance+1) x head_dim)", std::max<int64_t>(heads(s), 1),
                             rows_for(s.integer("max_distance")), s.integer("head_dim"));
}

// k_j . key_table[clip(j - i', -K, K) + K] as (B, H, Tq, Tk): the keys as queries on the flipped table (row
// K - e holds offset -e), query_offset Tq - Tk. HF BERT's relative_key_query adds it.
at::Tensor key_term(const at::Tensor& key_table, const at::Tensor& k, int64_t max_distance, int64_t q_len) {
  const int64_t k_len = k.size(2);
  return ops::relative_logits(k, key_table.flip({-2}), {max_distance, q_len - k_len}, q_len).transpose(-1, -2);
}

// q (B, H, Tq, Dh), k (B, H, Tk, Dh) -> (B, H, Tq, Tk)
at::Tensor shaw_logits(const FamilySettings& s, const FamilyState& t, const at::Tensor& q, const at::Tensor& k) {
  check_relative_qk(kShaw, heads(s), s.integer("head_dim"), q, k);
  const at::ScalarType compute = relative_compute_dtype(q, t[0]);
  const int64_t q_len = q.size(2), k_len = k.size(2), max_distance = s.integer("max_distance");
  const at::Tensor table = t[0].to(compute);
  at::Tensor out = ops::relative_logits(q.to(compute), table, {max_distance, k_len - q_len}, k_len);
  if (s.flag("key_logits")) out = out + key_term(table, k.to(compute), max_distance, q_len);
  return out.to(q.scalar_type());
}

// probs (B, H, Tq, Tk) -> (B, H, Tq, Dh)
at::Tensor shaw_values(const FamilySettings& s, const FamilyState& t, const at::Tensor& probs) {
  check_relative_probs(kShaw, heads(s), probs);
  const at::ScalarType compute = relative_compute_dtype(probs, t[1]);
  const int64_t q_len = probs.size(2), k_len = probs.size(3);
  return ops::relative_values(probs.to(compute), t[1].to(compute), {s.integer("max_distance"), k_len - q_len})
      .to(probs.scalar_type());
}

// The tables, never a (Tq, Tk) tensor; the key term is the relative queries' k_j . rel_q[row(d)] on the key table.
void shaw_terms(const FamilySettings& s, const FamilyState& t, AttentionTerms& terms, int64_t, int64_t,
                at::ScalarType compute) {
  terms.rel_k = t[0].to(compute);
  if (s.flag("values")) terms.rel_v = t[1].to(compute);
  if (s.flag("key_logits")) terms.rel_q = terms.rel_k;
  terms.max_distance = s.integer("max_distance");
}

// HF BERT's attention.self.distance_embedding.weight (2M-1, Dh), M = max_position_embeddings. HF adds
// q_i . E[i - j + M - 1]: its rows index query - key, posenc's key - query (row r: offset r - K). With
// K = M - 1, HF row i - j + M - 1 = K - d is posenc row d + K of the flipped table.
FamilySettings bert_settings(const at::Tensor& weight, FamilySettings given) {
  TORCH_CHECK_VALUE(given.has("max_position_embeddings"), "[", kShaw, "] max_position_embeddings is required");
  const int64_t m = given.integer("max_position_embeddings");
  TORCH_CHECK_VALUE(weight.dim() == 2 && weight.is_floating_point(), "[", kShaw,
                    "] weight must be a 2-D floating tensor (2*max_position_embeddings-1, head_dim), got ",
                    weight.dim(), "-D torch.", detail::dtype_name(weight.scalar_type()));
  TORCH_CHECK_VALUE(weight.size(0) == 2 * m - 1, "[", kShaw, "] weight must have 2*max_position_embeddings-1 = ",
                    2 * m - 1, " rows, got ", weight.size(0));
  const bool key_query = given.word("position_embedding_type") == "relative_key_query";
  return given.set("max_distance", m - 1)
      .set("head_dim", weight.size(1))
      .set("values", false)
      .set("init_std", 0.0)
      .set("key_logits", key_query);
}

FamilyContract shaw_contract() {
  FamilyContract c;
  c.module = kShaw;
  c.summary =
      "Shaw et al. 2018: logits[b,h,i,j] = q_i . key_table[r], values[b,h,i] = sum_j p_ij value_table[r], "
      "r = clip(j - i', -K, K) + K, i' = i + Tk - Tq. Parameters key_table and value_table (values=True) "
      "[2K+1, Dh] shared by the heads (num_heads 0) or [num_heads, 2K+1, Dh], ~ N(0, init_std^2). "
      "key_logits=True also adds k_j . key_table[r] (Hugging Face BERT's relative_key_query), fused as the "
      "attention's relative queries. forward(q, k) = logits(q, k): the extra logit terms (B, H, Tq, Tk), unscaled.";
  c.settings = {families::max_distance_setting(), size_setting("head_dim", "features of a query head"),
                families::shared_heads_setting(), families::values_setting(true, "a value table too (a^V of the paper)"),
                real_setting("init_std", 0.02, "N(0, init_std^2) initialisation"),
                flag_setting("key_logits", false, "k_j . key_table[r] too (BERT's relative_key_query)")};
  c.state = {{"key_table"}, {"value_table", true, "values"}};
  c.check = shaw_check;
  c.shapes = [](const FamilySettings& s) {
    const std::vector<int64_t> shape =
        families::table_shape(heads(s), 2 * s.integer("max_distance") + 1, s.integer("head_dim"));
    return std::vector<std::vector<int64_t>>{shape, shape};
  };
  c.reset = [](const FamilySettings& s, FamilyState& t) {
    for (at::Tensor& table : t) {
      if (table.defined()) table.normal_(0.0, s.real("init_std"));
    }
  };
  c.relative_logits = shaw_logits;
  c.relative_values = shaw_values;
  c.has_values = [](const FamilySettings& s) { return s.flag("values"); };
  c.terms = shaw_terms;
  c.pretrained_tensor = "key_table";
  c.pretrained_loader = "from_bert_distance_embedding";
  SettingSpec m = optional_integer_setting("max_position_embeddings", "M of the checkpoint: 2M-1 rows", 1);
  c.pretrained_arguments = {m, word_setting("position_embedding_type", {"relative_key", "relative_key_query"},
                                            "the checkpoint's relative_key (queries) or relative_key_query (both)")};
  c.pretrained = bert_settings;
  c.pretrained_value = [](const at::Tensor& weight, const FamilySettings&) { return weight.flip({0}); };
  c.shown = {"max_distance", "head_dim", "num_heads", "values", "init_std", "key_logits"};
  return c;
}

const FamilyContractRegistration registered_contract(shaw_contract());

void add_shaw(std::vector<EncodingFamily>& out) {
  EncodingFamily shaw;
  shaw.name = "shaw";
  shaw.point = EncodingPoint::kRelativeVectors;
  shaw.description = "learned key and value vectors per clipped offset, one table shared by the heads (Shaw et al. 2018)";
  shaw.parameters = {families::max_distance_parameter(), families::init_std_parameter()};
  shaw.module = kShaw;
  shaw.preset = [](const EncodingConfig& c) {
    return FamilySettings()
        .set("max_distance", c.integer("max_distance"))
        .set("head_dim", c.dim / c.num_heads)
        .set("num_heads", int64_t{0})
        .set("values", true)
        .set("init_std", c.real("init_std"));
  };
  shaw.make_attention = [](const EncodingConfig& c, AttentionEncodings& slots) {
    slots.relative = ShawRelative(ShawRelativeOptions(c.integer("max_distance"), c.dim / c.num_heads)
                                      .num_heads(0)
                                      .values(true)
                                      .init_std(c.real("init_std")));
  };
  out.push_back(std::move(shaw));
}

const families::Registration registered(90, add_shaw);

}  // namespace

ShawRelativeImpl::ShawRelativeImpl(const ShawRelativeOptions& options)
    : FamilyRelativeImpl(kShaw, FamilySettings()
                                    .set("max_distance", options.max_distance())
                                    .set("head_dim", options.head_dim())
                                    .set("num_heads", options.num_heads())
                                    .set("values", options.values())
                                    .set("init_std", options.init_std())
                                    .set("key_logits", options.key_logits())),
      options_(options) {}

void ShawRelativeImpl::pretty_print(std::ostream& stream) const {
  stream << "posenc::nn::ShawRelative(max_distance=" << options_.max_distance() << ", head_dim=" << head_dim()
         << ", num_heads=" << num_heads() << ", values=" << (options_.values() ? "true" : "false")
         << ", init_std=" << options_.init_std() << ")";
}

}  // namespace posenc::nn
