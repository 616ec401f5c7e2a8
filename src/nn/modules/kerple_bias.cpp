// The KERPLE module (posenc/nn/kerple_bias.h): two parameters per head, kept in
// range by the authors' projection, and per call the offset rows of the
// kerple_offset_bias op, whose autograd carries their gradients.
// Ends with the family's descriptor, which registers itself (families/families.h).
#include "posenc/nn/kerple_bias.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <ostream>
#include <vector>

#include "families/families.h"
#include "op_support.h"

namespace posenc::nn {
namespace {

const char* bool_name(bool value) noexcept { return value ? "true" : "false"; }

bool is_power(const KerpleBiasOptions& o) noexcept { return o.kind() == kernels::KerpleKind::kPower; }

}  // namespace

KerpleBiasImpl::KerpleBiasImpl(const KerpleBiasOptions& options)
    : AttentionBiasImpl("KerpleBias", options.num_heads()), options_(options) {
  const double eps = options.eps();
  TORCH_CHECK_VALUE(eps > 0 && eps <= 1, "[", name(), "] eps must be in (0, 1], got ", eps);
  if (options.r1()) {
    const double r1 = *options.r1();
    TORCH_CHECK_VALUE(r1 > 0 && std::isfinite(r1), "[", name(), "] r1 must be > 0, got ", r1);
  }
  if (options.r2()) {
    const double r2 = *options.r2();
    if (is_power(options)) {
      TORCH_CHECK_VALUE(r2 > 0 && r2 <= 2, "[", name(), "] r2 must be in (0, 2], got ", r2);
    } else {
      TORCH_CHECK_VALUE(r2 > 0 && std::isfinite(r2), "[", name(), "] r2 must be > 0, got ", r2);
    }
  }
  r1_ = register_parameter("r1", at::empty({options.num_heads()}));
  r2_ = register_parameter("r2", at::empty({options.num_heads()}));
  reset_parameters();
}

void KerpleBiasImpl::reset_parameters() {
  at::NoGradGuard no_grad;
  // The authors' draws: r1 = 2 U(0, 1), r2 = U(0, 1).
  if (options_.r1()) r1_.fill_(*options_.r1()); else r1_.uniform_(0.0, 2.0);
  if (options_.r2()) r2_.fill_(*options_.r2()); else r2_.uniform_(0.0, 1.0);
  project();
}

void KerpleBiasImpl::project() {
  at::NoGradGuard no_grad;
  const double eps = options_.eps();
  const double r2_max = is_power(options_) ? 2.0 : std::numeric_limits<double>::infinity();
  // NaN compares false everywhere, so a NaN parameter is left for the op to refuse by name.
  if ((r1_ < eps).any().item<bool>()) r1_.clamp_min_(eps);
  if ((r2_ < eps).any().item<bool>() || (r2_ > r2_max).any().item<bool>()) r2_.clamp_(eps, r2_max);
}

// [H, q_len, k_len]: the offset rows read at j - i' + k_len - 1 = j - i + q_len - 1.
at::Tensor KerpleBiasImpl::bias(int64_t q_len, int64_t k_len) {
  TORCH_CHECK_VALUE(q_len >= 0 && k_len >= 0, "[", name(), "] q_len and k_len must be >= 0, got ", q_len, " and ",
                    k_len);
  TORCH_CHECK_VALUE(!options_.causal() || q_len <= k_len, "[", name(),
                    "] causal attention needs every query to see a key: q_len must be <= k_len, got ", q_len, " and ",
                    k_len);
  if (q_len == 0 || k_len == 0) return at::zeros({num_heads(), q_len, k_len}, r1_.options());
  project();
  const at::Tensor rows = ops::kerple_offset_bias(r1_, r2_, q_len, k_len, options_.kind());
  const at::Tensor i = at::arange(q_len, at::kLong).unsqueeze(1), j = at::arange(k_len, at::kLong).unsqueeze(0);
  const at::Tensor column = j - i + (q_len - 1);
  at::Tensor out = rows.index_select(1, column.flatten()).view({num_heads(), q_len, k_len});
  // Keys after the query: d = column - (k_len - 1) > 0.
  if (options_.causal()) out = out.masked_fill(column > k_len - 1, -std::numeric_limits<double>::infinity());
  return out;
}

void KerpleBiasImpl::add_terms(AttentionTerms& terms, int64_t q_len, int64_t k_len, at::ScalarType compute) {
  if (options_.causal()) terms.causal = true;
  if (q_len == 0 || k_len == 0) return;  // no pair, no row
  project();
  const at::Tensor rows = ops::kerple_offset_bias(r1_.to(compute), r2_.to(compute), q_len, k_len, options_.kind());
  terms.offset_bias = terms.offset_bias.defined() ? terms.offset_bias + rows : rows;
}

void KerpleBiasImpl::pretty_print(std::ostream& stream) const {
  stream << "posenc::nn::KerpleBias(num_heads=" << num_heads() << ", kind=" << kernels::kerple_kind_name(options_.kind())
         << ", causal=" << bool_name(options_.causal()) << ")";
}

}  // namespace posenc::nn

// The family's descriptor: what `posenc encodings`, the registry and the report read.
namespace posenc::nn::families {
namespace {

void add_kerple(std::vector<EncodingFamily>& out) {
  for (const auto kind : {kernels::KerpleKind::kLog, kernels::KerpleKind::kPower}) {
    const bool log = kind == kernels::KerpleKind::kLog;
    EncodingFamily f;
    f.name = log ? "kerple" : "kerple-power";
    f.point = EncodingPoint::kLogitBias;
    f.description = log ? "learned logarithmic kernel -r1_h log(1 + r2_h |i - j|), r1, r2 > 0 per head from U(0, 2), "
                          "U(0, 1) and kept >= 0.01 (the authors' code), causal in the decoder (Chi et al. 2022, "
                          "KERPLE)"
                        : "learned power kernel -r1_h |i - j|^r2_h per head, r1 from U(0, 2) kept >= 0.01, r2 from "
                          "U(0, 1) kept in [0.01, 2], causal in the decoder (Chi et al. 2022, KERPLE)";
    f.make_attention = [kind](const EncodingConfig& c, AttentionEncodings& slots) {
      slots.bias = KerpleBias(KerpleBiasOptions(c.num_heads).kind(kind).causal(c.causal));
    };
    out.push_back(std::move(f));
  }
}

const Registration registered(50, add_kerple);

}  // namespace
}  // namespace posenc::nn::families
