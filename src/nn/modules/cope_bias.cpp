// The CoPE module (posenc/nn/cope_bias.h): the authors' table e, handed to
// the attention as a term it evaluates from q and k, or made dense through
// the cope_bias op.
// Ends with the family's descriptor, which registers itself (families/families.h).
#include "posenc/nn/cope_bias.h"

#include <ATen/ATen.h>

#include <limits>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <vector>

#include "families/families.h"

namespace posenc::nn {

CopeBiasImpl::CopeBiasImpl(const CopeBiasOptions& options)
    : AttentionBiasImpl("CopeBias", options.num_heads()), options_(options) {
  TORCH_CHECK_VALUE(options.causal(), "[", name(),
                    "] causal must be true: CoPE is defined for decoders (causal attention), got false");
  TORCH_CHECK_VALUE(options.npos_max() >= 1, "[", name(), "] npos_max must be >= 1, got ", options.npos_max());
  TORCH_CHECK_VALUE(options.head_dim() >= 1, "[", name(), "] head_dim must be >= 1, got ", options.head_dim());
  e_ = register_parameter("e", at::empty({options.npos_max(), options.head_dim()}));
  reset_parameters();
}

void CopeBiasImpl::reset_parameters() {
  at::NoGradGuard no_grad;
  e_.zero_();  // the authors' torch.zeros(1, head_dim, npos_max)
}

at::Tensor CopeBiasImpl::bias(int64_t, int64_t) {
  throw std::runtime_error("[CopeBias] the CoPE term depends on q and k, not on the lengths alone: use bias(q, k, "
                           "scale) or let the attention compute it (add_terms)");
}

at::Tensor CopeBiasImpl::bias(const at::Tensor& q, const at::Tensor& k, double scale,
                              const std::optional<at::Tensor>& key_padding_mask) {
  const at::Tensor out = ops::cope_bias(q, k, e_.to(q.scalar_type()), scale, key_padding_mask);
  const int64_t q_len = q.size(2), k_len = k.size(2);
  const at::Tensor i = at::arange(q_len, at::kLong).unsqueeze(1), j = at::arange(k_len, at::kLong).unsqueeze(0);
  return out.masked_fill(j - i > k_len - q_len, -std::numeric_limits<double>::infinity());
}

void CopeBiasImpl::add_terms(AttentionTerms& terms, int64_t q_len, int64_t k_len, at::ScalarType compute) {
  terms.causal = true;
  if (q_len == 0 || k_len == 0) return;  // no pair
  for (const TileTerm& tile : terms.tiles) {
    TORCH_CHECK_VALUE(tile.kind != "cope", "[", name(), "] the attention terms already hold a CoPE term");
  }
  terms.tiles.push_back(cope_tile(e_.to(compute)));
}

void CopeBiasImpl::pretty_print(std::ostream& stream) const {
  stream << "posenc::nn::CopeBias(num_heads=" << num_heads() << ", head_dim=" << options_.head_dim()
         << ", npos_max=" << options_.npos_max() << ")";
}

}  // namespace posenc::nn

// The family's descriptor: what `posenc encodings`, the registry and the report read.
namespace posenc::nn::families {
namespace {

void add_cope(std::vector<EncodingFamily>& out) {
  EncodingFamily cope;
  cope.name = "cope";
  cope.point = EncodingPoint::kLogitBias;
  cope.description =
      "contextual positions p_ij = sum_{t=j..i} sigmoid(q_i.k_t / sqrt(Dh)), clamped at cope_npos - 1, and a "
      "learned table e [cope_npos, head_dim] shared by the heads, q_i.e interpolated at p_ij added to the logits; computed "
      "per query row in the fused attention (Golovneva et al. 2024, CoPE); decoders only";
  cope.parameters = {integer("cope_npos", &EncodingConfig::cope_npos,
                             "table rows; contextual positions clamp at cope_npos - 1", 1)};
  cope.needs.causal = true;
  cope.needs.causal_hint = "CoPE is defined for causal attention (gates over the keys up to the query); use "
                           "kerple, t5 or dpb in an encoder";
  cope.make_attention = [](const EncodingConfig& c, AttentionEncodings& slots) {
    slots.bias = CopeBias(CopeBiasOptions(c.num_heads, c.dim / c.num_heads).npos_max(c.cope_npos).causal(true));
  };
  out.push_back(std::move(cope));
}

const Registration registered(70, add_cope);

}  // namespace
}  // namespace posenc::nn::families
