// ALiBi with learned slopes (posenc/nn/learned_alibi_bias.h): its contract,
// its typed front end and its descriptor. No kernel: the rows are at:: ops,
// so autograd carries the slopes' gradient.
#include "posenc/nn/learned_alibi_bias.h"

#include <ATen/ATen.h>

#include <vector>

#include "families/families.h"
#include "posenc/nn/bias_ops.h"

namespace posenc::nn {
namespace {

constexpr const char* kModule = "LearnedAlibiBias";

// [H, q_len + k_len - 1]: -m_h |d| for d = j - i' = -(k_len - 1) .. q_len - 1.
at::Tensor rows(const at::Tensor& slopes, int64_t q_len, int64_t k_len) {
  const at::Tensor distance = at::arange(-(k_len - 1), q_len, at::kLong).abs().to(slopes.scalar_type());
  return -slopes.unsqueeze(1) * distance.unsqueeze(0);
}

FamilyContract contract() {
  FamilyContract c;
  c.module = kModule;
  c.summary = "ALiBi with learned slopes: bias[h, i, j] = -m_h |i' - j|, m started at the paper's slopes.";
  c.settings = {size_setting("num_heads", "H"), flag_setting("causal", false, "-inf on keys after the query")};
  c.state = {{"slopes"}};
  c.shapes = [](const FamilySettings& s) { return std::vector<std::vector<int64_t>>{{s.integer("num_heads")}}; };
  c.reset = [](const FamilySettings& s, FamilyState& t) { t[0].copy_(ops::alibi_slopes(s.integer("num_heads"))); };
  c.dense = [](const FamilySettings& s, const FamilyState& t, int64_t q_len, int64_t k_len) {
    if (s.flag("causal")) families::check_causal_lengths(kModule, q_len, k_len);
    return families::spread_offset_rows(rows(t[0], q_len, k_len), q_len, k_len, s.flag("causal"));
  };
  c.terms = [](const FamilySettings& s, const FamilyState& t, AttentionTerms& out, int64_t q_len, int64_t k_len,
               at::ScalarType compute) {
    if (s.flag("causal")) out.causal = true;
    const at::Tensor r = rows(t[0].to(compute), q_len, k_len);
    out.offset_bias = out.offset_bias.defined() ? out.offset_bias + r : r;
  };
  c.shown = {"num_heads", "causal"};
  return c;
}

const FamilyContractRegistration registered_contract(contract());

}  // namespace

LearnedAlibiBiasImpl::LearnedAlibiBiasImpl(const LearnedAlibiBiasOptions& o)
    : FamilyBiasImpl(kModule, FamilySettings().set("num_heads", o.num_heads()).set("causal", o.causal())) {}

}  // namespace posenc::nn

namespace posenc::nn::families {
namespace {

void add_learned_alibi(std::vector<EncodingFamily>& out) {
  EncodingFamily f;
  f.name = "learned-alibi";
  f.point = EncodingPoint::kLogitBias;
  f.description = "ALiBi's -m_h |i - j| with the slopes learned, started at the paper's (a scratch family)";
  f.make_attention = [](const EncodingConfig& c, AttentionEncodings& slots) {
    slots.bias = LearnedAlibiBias(LearnedAlibiBiasOptions(c.num_heads).causal(c.causal));
  };
  f.module = kModule;
  f.preset = [](const EncodingConfig& c) {
    FamilySettings s;
    return s.set("num_heads", c.num_heads).set("causal", c.causal);
  };
  out.push_back(std::move(f));
}

const Registration registered(45, add_learned_alibi);

}  // namespace
}  // namespace posenc::nn::families
