// The dynamic position bias modules (posenc/nn/dpb_bias.h): the MLPs'
// parameters, and per call the offset rows (1D) or the grid (2D) from the
// dpb ops, whose autograd carries every parameter's gradient. The fused
// attention gets the rows / grid; bias() spreads them to [H, Tq, Tk] for the
// dense path only.
// Ends with the family's descriptor, which registers itself (families/families.h).
#include "posenc/nn/dpb_bias.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <ostream>
#include <vector>

#include "families/families.h"
#include "op_support.h"
#include "posenc/kernels/dpb.h"

namespace posenc::nn {
namespace {

const char* bool_name(bool value) noexcept { return value ? "true" : "false"; }

// torch.nn.Linear.reset_parameters: kaiming_uniform(a = sqrt(5)) is U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
// and the bias the same bound.
void linear_init(at::Tensor& t, int64_t fan_in) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  t.uniform_(-bound, bound);
}

}  // namespace

// ---------------------------------------------------------------------------
// DynamicPositionBias

DynamicPositionBiasImpl::DynamicPositionBiasImpl(const DynamicPositionBiasOptions& options)
    : AttentionBiasImpl("DynamicPositionBias", options.num_heads()), options_(options) {
  detail::translate_errors([&] {
    kernels::validate(kernels::DpbParams{options.num_heads(), options.hidden(), options.depth(), options.log_distance(),
                                         options.norm(), 0, 0},
                      "DynamicPositionBias");
  });
  const int64_t hd = options.hidden(), L = options.depth(), heads = options.num_heads();
  in_weight_ = register_parameter("in_weight", at::empty({hd, 1}));
  in_bias_ = register_parameter("in_bias", at::empty({hd}));
  hidden_weight_ = register_parameter("hidden_weight", at::empty({L - 1, hd, hd}));
  hidden_bias_ = register_parameter("hidden_bias", at::empty({L - 1, hd}));
  if (options.norm()) {
    norm_weight_ = register_parameter("norm_weight", at::empty({L, hd}));
    norm_bias_ = register_parameter("norm_bias", at::empty({L, hd}));
  }
  out_weight_ = register_parameter("out_weight", at::empty({heads, hd}));
  out_bias_ = register_parameter("out_bias", at::empty({heads}));
  reset_parameters();
}

void DynamicPositionBiasImpl::reset_parameters() {
  at::NoGradGuard no_grad;
  const int64_t hd = options_.hidden();
  linear_init(in_weight_, 1);
  linear_init(in_bias_, 1);
  linear_init(hidden_weight_, hd);
  linear_init(hidden_bias_, hd);
  if (options_.norm()) {
    norm_weight_.fill_(1.0);
    norm_bias_.zero_();
  }
  linear_init(out_weight_, hd);
  linear_init(out_bias_, hd);
}

at::Tensor DynamicPositionBiasImpl::offset_rows(int64_t q_len, int64_t k_len, c10::optional<at::ScalarType> dtype) {
  const at::ScalarType t = dtype.value_or(in_weight_.scalar_type());
  auto as = [t](const at::Tensor& x) { return x.defined() ? x.to(t) : x; };
  return ops::dpb_offset_bias({as(in_weight_), as(in_bias_), as(hidden_weight_), as(hidden_bias_), as(norm_weight_),
                               as(norm_bias_), as(out_weight_), as(out_bias_)},
                              q_len, k_len, options_.log_distance());
}

// [H, q_len, k_len]: the rows read at j - i' + k_len - 1 = j - i + q_len - 1.
at::Tensor DynamicPositionBiasImpl::bias(int64_t q_len, int64_t k_len) {
  TORCH_CHECK_VALUE(q_len >= 0 && k_len >= 0, "[", name(), "] q_len and k_len must be >= 0, got ", q_len, " and ",
                    k_len);
  TORCH_CHECK_VALUE(!options_.causal() || q_len <= k_len, "[", name(),
                    "] causal attention needs every query to see a key: q_len must be <= k_len, got ", q_len, " and ",
                    k_len);
  if (q_len == 0 || k_len == 0) return at::zeros({num_heads(), q_len, k_len}, in_weight_.options());
  const at::Tensor rows = offset_rows(q_len, k_len);
  const at::Tensor i = at::arange(q_len, at::kLong).unsqueeze(1), j = at::arange(k_len, at::kLong).unsqueeze(0);
  const at::Tensor column = j - i + (q_len - 1);
  at::Tensor out = rows.index_select(1, column.flatten()).view({num_heads(), q_len, k_len});
  // Keys after the query: d = column - (k_len - 1) > 0.
  if (options_.causal()) out = out.masked_fill(column > k_len - 1, -std::numeric_limits<double>::infinity());
  return out;
}

void DynamicPositionBiasImpl::add_terms(AttentionTerms& terms, int64_t q_len, int64_t k_len, at::ScalarType compute) {
  if (options_.causal()) terms.causal = true;
  if (q_len == 0 || k_len == 0) return;  // no pair, no row
  const at::Tensor rows = offset_rows(q_len, k_len, compute);
  terms.offset_bias = terms.offset_bias.defined() ? terms.offset_bias + rows : rows;
}

void DynamicPositionBiasImpl::pretty_print(std::ostream& stream) const {
  stream << "posenc::nn::DynamicPositionBias(num_heads=" << num_heads() << ", hidden=" << options_.hidden()
         << ", depth=" << options_.depth() << ", log_distance=" << bool_name(options_.log_distance())
         << ", norm=" << bool_name(options_.norm()) << ", causal=" << bool_name(options_.causal()) << ")";
}

// ---------------------------------------------------------------------------
// ContinuousPositionBias2d

ContinuousPositionBias2dImpl::ContinuousPositionBias2dImpl(const ContinuousPositionBias2dOptions& options)
    : AttentionBiasImpl("ContinuousPositionBias2d", options.num_heads()), options_(options) {
  detail::translate_errors([&] {
    kernels::validate(kernels::CpbParams{options.num_heads(), options.hidden(), options.height(), options.width(),
                                         options.pretrained_height(), options.pretrained_width()},
                      "ContinuousPositionBias2d");
  });
  const double init_std = options.init_std();
  TORCH_CHECK_VALUE(std::isfinite(init_std) && init_std >= 0, "[", name(), "] init_std must be finite and >= 0, got ",
                    init_std);
  fc1_weight_ = register_parameter("fc1_weight", at::empty({options.hidden(), 2}));
  fc1_bias_ = register_parameter("fc1_bias", at::empty({options.hidden()}));
  fc2_weight_ = register_parameter("fc2_weight", at::empty({options.num_heads(), options.hidden()}));
  reset_parameters();
}

void ContinuousPositionBias2dImpl::reset_parameters() {
  at::NoGradGuard no_grad;
  // Swin V2's _init_weights: trunc_normal_(std) (cut at +-2, i.e. +-100 std: never), zero bias.
  fc1_weight_.normal_(0.0, options_.init_std());
  fc1_bias_.zero_();
  fc2_weight_.normal_(0.0, options_.init_std());
}

at::Tensor ContinuousPositionBias2dImpl::grid(c10::optional<at::ScalarType> dtype) {
  const at::ScalarType t = dtype.value_or(fc1_weight_.scalar_type());
  return ops::cpb_grid_bias(fc1_weight_.to(t), fc1_bias_.to(t), fc2_weight_.to(t), options_.height(), options_.width(),
                            options_.pretrained_height(), options_.pretrained_width());
}

// [H, HW, HW]: bias[h, i, j] = grid[h, y_j - y_i + H - 1, x_j - x_i + W - 1].
at::Tensor ContinuousPositionBias2dImpl::bias(int64_t q_len, int64_t k_len) {
  const int64_t height = options_.height(), width = options_.width(), cells = height * width;
  TORCH_CHECK_VALUE(q_len == cells && k_len == cells, "[", name(),
                    "] q_len and k_len must both be height*width = ", cells, ", got ", q_len, " and ", k_len);
  const at::Tensor g = grid();
  const at::Tensor cell = at::arange(cells, at::kLong);
  const at::Tensor y = at::floor_divide(cell, width), x = at::remainder(cell, width);
  const at::Tensor row = y.unsqueeze(0) - y.unsqueeze(1) + (height - 1);
  const at::Tensor col = x.unsqueeze(0) - x.unsqueeze(1) + (width - 1);
  const at::Tensor flat = (row * (2 * width - 1) + col).flatten();
  return g.flatten(1).index_select(1, flat).view({num_heads(), cells, cells});
}

void ContinuousPositionBias2dImpl::add_terms(AttentionTerms& terms, int64_t q_len, int64_t k_len,
                                             at::ScalarType compute) {
  const int64_t cells = options_.height() * options_.width();
  TORCH_CHECK_VALUE(q_len == cells && k_len == cells, "[", name(),
                    "] q_len and k_len must both be height*width = ", cells, ", got ", q_len, " and ", k_len);
  const at::Tensor g = grid(compute);
  terms.grid_bias = terms.grid_bias.defined() ? terms.grid_bias + g : g;
  terms.grid_height = options_.height();
  terms.grid_width = options_.width();
}

void ContinuousPositionBias2dImpl::pretty_print(std::ostream& stream) const {
  stream << "posenc::nn::ContinuousPositionBias2d(num_heads=" << num_heads() << ", height=" << options_.height()
         << ", width=" << options_.width() << ", hidden=" << options_.hidden();
  if (options_.pretrained_height() > 0 || options_.pretrained_width() > 0) {
    stream << ", pretrained=" << options_.pretrained_height() << "x" << options_.pretrained_width();
  }
  stream << ")";
}

}  // namespace posenc::nn

// The family's descriptor: what `posenc encodings`, the registry and the report read.
namespace posenc::nn::families {
namespace {

void add_dpb(std::vector<EncodingFamily>& out) {
  EncodingFamily dpb;
  dpb.name = "dpb";
  dpb.point = EncodingPoint::kLogitBias;
  dpb.description =
      "learned MLP (1 -> dim/4 SiLU -> dim/4 SiLU -> heads) of the offset i - j, one bias per offset and head, "
      "causal in the decoder (x-transformers' DynamicPositionBias; Swin V2's continuous bias in 1D)";
  dpb.make_attention = [](const EncodingConfig& c, AttentionEncodings& slots) {
    // x-transformers sizes the MLP at the model dim // 4.
    slots.bias = DynamicPositionBias(
        DynamicPositionBiasOptions(c.num_heads, std::max<int64_t>(c.dim / 4, 1)).causal(c.causal));
  };
  out.push_back(std::move(dpb));
}

const Registration registered(80, add_dpb);

}  // namespace
}  // namespace posenc::nn::families
