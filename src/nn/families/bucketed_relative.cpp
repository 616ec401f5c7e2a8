// Shaw's key vectors on T5's log buckets (a scratch relative-vectors family): q_i . key_table[bucket(j - i')],
// bucket as T5's (bidirectional, num_buckets, max_distance), one table [num_buckets, Dh] shared by the heads.
// On the family contract alone: no typed C++ front end (FamilyRelative by name), Python's class generated.
#include <ATen/ATen.h>

#include <algorithm>
#include <vector>

#include "families/families.h"
#include "posenc/nn/bias_ops.h"
#include "posenc/nn/family_module.h"

namespace posenc::nn {
namespace {

constexpr const char* kBucketed = "BucketedRelative";

kernels::T5BucketParams buckets(const FamilySettings& s) { return {true, s.integer("num_buckets"), s.integer("max_distance")}; }

// int64 [2K+1]: the bucket of offset c - K.
at::Tensor rows(const FamilySettings& s, int64_t reach) {
  return ops::t5_bucket(at::arange(-reach, reach + 1, at::kLong), buckets(s));
}

FamilyContract bucketed_contract() {
  FamilyContract c;
  c.module = kBucketed;
  c.summary = "Shaw's key vectors on T5's log buckets: logits q_i . key_table[bucket(j - i')], parameter key_table "
              "[num_buckets, Dh] ~ N(0, init_std^2). forward(q, k) = logits(q, k), unscaled.";
  c.settings = {size_setting("head_dim", "features of a query head"), integer_setting("num_buckets", 32, "T5's buckets (even)", 2),
                integer_setting("max_distance", 128, "T5's max_distance", 1), real_setting("init_std", 0.02, "N(0, init_std^2)")};
  c.state = {{"key_table"}};
  c.shapes = [](const FamilySettings& s) { return std::vector<std::vector<int64_t>>{{s.integer("num_buckets"), s.integer("head_dim")}}; };
  c.reset = [](const FamilySettings& s, FamilyState& t) { t[0].normal_(0.0, s.real("init_std")); };
  c.relative_logits = [](const FamilySettings& s, const FamilyState& t, const at::Tensor& q, const at::Tensor& k) {
    check_relative_qk(kBucketed, 0, s.integer("head_dim"), q, k);
    const int64_t q_len = q.size(2), k_len = k.size(2);
    const at::Tensor i = at::arange(q_len, at::kLong).unsqueeze(1) + (k_len - q_len), j = at::arange(k_len, at::kLong);
    const at::Tensor bucket = ops::t5_bucket(j.unsqueeze(0) - i, buckets(s));  // (Tq, Tk)
    const at::Tensor products = at::matmul(q, t[0].to(q.scalar_type()).t());   // (B, H, Tq, buckets)
    return products.gather(-1, bucket.expand({q.size(0), q.size(1), q_len, k_len}));
  };
  c.terms = [](const FamilySettings& s, const FamilyState& t, AttentionTerms& terms, int64_t q_len, int64_t k_len,
               at::ScalarType compute) {
    terms.max_distance = std::max<int64_t>({q_len - 1, k_len - 1, 0});
    terms.rel_k = t[0].to(compute);
    terms.rel_index = rows(s, terms.max_distance);
  };
  c.shown = {"head_dim", "num_buckets", "max_distance", "init_std"};
  return c;
}

const FamilyContractRegistration registered_contract(bucketed_contract());

void add_bucketed(std::vector<EncodingFamily>& out) {
  EncodingFamily f;
  f.name = "shaw-bucketed";
  f.point = EncodingPoint::kRelativeVectors;
  f.description = "Shaw's key vectors on T5's log buckets of the offset, one table shared by the heads";
  f.module = kBucketed;
  f.preset = [](const EncodingConfig& c) { return FamilySettings().set("head_dim", c.dim / c.num_heads); };
  f.make_attention = [](const EncodingConfig& c, AttentionEncodings& slots) {
    slots.relative = FamilyRelative(kBucketed, FamilySettings().set("head_dim", c.dim / c.num_heads));
  };
  out.push_back(std::move(f));
}

const families::Registration registered(93, add_bucketed);

}  // namespace
}  // namespace posenc::nn
