// The FIRE module (posenc/nn/fire_bias.h): the authors' parameters (an MLP,
// c, and L as |L_multiplier * init_L|), handed to the attention as the
// per-tile term, or made dense through the fire_bias op.
// Ends with the family's descriptor, which registers itself (families/families.h).
#include "posenc/nn/fire_bias.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <ostream>
#include <vector>

#include "families/families.h"

namespace posenc::nn {

FireBiasImpl::FireBiasImpl(const FireBiasOptions& options)
    : AttentionBiasImpl("FireBias", options.num_heads()), options_(options) {
  TORCH_CHECK_VALUE(options.causal(), "[", name(),
                    "] causal must be true: FIRE is defined for decoders (causal attention), got false");
  TORCH_CHECK_VALUE(options.hidden() >= 1, "[", name(), "] hidden must be >= 1, got ", options.hidden());
  TORCH_CHECK_VALUE(options.init_c() > 0 && std::isfinite(options.init_c()), "[", name(), "] init_c must be > 0, got ",
                    options.init_c());
  TORCH_CHECK_VALUE(options.init_L() > 0 && std::isfinite(options.init_L()), "[", name(), "] init_L must be > 0, got ",
                    options.init_L());
  const int64_t heads = options.num_heads(), hidden = options.hidden();
  w1_ = register_parameter("w1", at::empty({hidden}));
  b1_ = register_parameter("b1", at::empty({hidden}));
  w2_ = register_parameter("w2", at::empty({heads, hidden}));
  b2_ = register_parameter("b2", at::empty({heads}));
  c_ = register_parameter("c", at::empty({}));
  l_multiplier_ = register_parameter("L_multiplier", at::empty({}));
  reset_parameters();
}

void FireBiasImpl::reset_parameters() {
  at::NoGradGuard no_grad;
  // torch.nn.Linear's defaults: weight and bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)); fan_in 1, then hidden.
  w1_.uniform_(-1.0, 1.0);
  b1_.uniform_(-1.0, 1.0);
  const double bound = 1.0 / std::sqrt(static_cast<double>(options_.hidden()));
  w2_.uniform_(-bound, bound);
  b2_.uniform_(-bound, bound);
  c_.fill_(options_.init_c());
  l_multiplier_.fill_(1.0);
}

at::Tensor FireBiasImpl::effective_c() const { return c_.abs(); }

at::Tensor FireBiasImpl::threshold() const { return (l_multiplier_ * options_.init_L()).abs(); }

FireTerm FireBiasImpl::term(at::ScalarType compute) const {
  return {w1_.to(compute), b1_.to(compute), w2_.to(compute), b2_.to(compute), effective_c().to(compute),
          threshold().to(compute)};
}

// [H, q_len, k_len]: the op's bias (0 after the query), -inf after the query.
at::Tensor FireBiasImpl::bias(int64_t q_len, int64_t k_len) {
  TORCH_CHECK_VALUE(q_len >= 0 && k_len >= 0, "[", name(), "] q_len and k_len must be >= 0, got ", q_len, " and ",
                    k_len);
  TORCH_CHECK_VALUE(q_len <= k_len, "[", name(),
                    "] causal attention needs every query to see a key: q_len must be <= k_len, got ", q_len, " and ",
                    k_len);
  if (q_len == 0 || k_len == 0) return at::zeros({num_heads(), q_len, k_len}, w1_.options());
  const at::Tensor out = ops::fire_bias(term(w1_.scalar_type()), q_len, k_len);
  const at::Tensor i = at::arange(q_len, at::kLong).unsqueeze(1), j = at::arange(k_len, at::kLong).unsqueeze(0);
  return out.masked_fill(j - i > k_len - q_len, -std::numeric_limits<double>::infinity());
}

void FireBiasImpl::add_terms(AttentionTerms& terms, int64_t q_len, int64_t k_len, at::ScalarType compute) {
  terms.causal = true;
  if (q_len == 0 || k_len == 0) return;  // no pair
  for (const TileTerm& tile : terms.tiles) {
    TORCH_CHECK_VALUE(tile.kind != "fire", "[", name(), "] the attention terms already hold a FIRE term");
  }
  terms.tiles.push_back(fire_tile(term(compute)));
}

void FireBiasImpl::pretty_print(std::ostream& stream) const {
  stream << "posenc::nn::FireBias(num_heads=" << num_heads() << ", hidden=" << options_.hidden()
         << ", init_c=" << options_.init_c() << ", init_L=" << options_.init_L() << ")";
}

}  // namespace posenc::nn

// The family's descriptor: what `posenc encodings`, the registry and the report read.
namespace posenc::nn::families {
namespace {

void add_fire(std::vector<EncodingFamily>& out) {
  EncodingFamily fire;
  fire.name = "fire";
  fire.point = EncodingPoint::kLogitBias;
  fire.description =
      "learned MLP (1 -> 32 ReLU -> heads) of the progressively interpolated offset psi(i - j) / psi(max(L, i)), "
      "psi(x) = log(c x + 1), c = 0.1 and L = 512 learned, computed per tile in the fused attention (Li et al. "
      "2023, FIRE); decoders only";
  fire.needs.causal = true;
  fire.needs.causal_hint = "FIRE is defined for causal attention; use kerple, t5 or dpb in an encoder";
  fire.make_attention = [](const EncodingConfig& c, AttentionEncodings& slots) {
    slots.bias = FireBias(FireBiasOptions(c.num_heads).causal(true));
  };
  out.push_back(std::move(fire));
}

const Registration registered(60, add_fire);

}  // namespace
}  // namespace posenc::nn::families
