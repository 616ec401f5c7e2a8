// Multi-head attention with pluggable encodings (multihead_attention.h). The
// layer only projects, splits heads, asks each encoding for its terms and
// calls ops::attention, which takes the fused kernel (forward and backward)
// or the composed differentiable path (dropout; options.path). No family is named here.
#include "posenc/nn/multihead_attention.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/nn/init.h>

#include <cmath>
#include <ostream>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>

#include "op_support.h"

namespace posenc::nn {
namespace {

constexpr const char* kOp = "MultiheadAttention";

// (B, T, D) -> (B, H, T, Dh)
at::Tensor split_heads(const at::Tensor& x, int64_t num_heads) {
  return x.view({x.size(0), x.size(1), num_heads, x.size(2) / num_heads}).transpose(1, 2);
}

// (B, H, T, Dh) -> (B, T, H*Dh)
at::Tensor merge_heads(const at::Tensor& x) {
  return x.transpose(1, 2).reshape({x.size(0), x.size(2), x.size(1) * x.size(3)});
}

// A (B, T, D) input in the parameters' dtype.
void check_sequence(const char* name, const at::Tensor& t, int64_t dim, at::ScalarType param_dtype) {
  TORCH_CHECK_VALUE(t.defined(), "[", kOp, "] ", name, " must be a tensor, got None");
  TORCH_CHECK_VALUE(t.dim() == 3 && t.size(2) == dim, "[", kOp, "] ", name, " must be (B, T, D) with D = ", dim,
                    ", got ", detail::tuple_of(t.sizes()));
  TORCH_CHECK_TYPE(t.scalar_type() == param_dtype, "[", kOp, "] ", name, " must have the parameters' dtype (",
                   detail::dtype_name(param_dtype), "), got ", detail::dtype_name(t.scalar_type()));
}

at::Tensor position_range(int64_t start, int64_t count) { return at::arange(start, start + count, at::kLong); }

}  // namespace

MultiheadAttentionImpl::MultiheadAttentionImpl(const MultiheadAttentionOptions& options, AttentionEncodings encodings)
    : torch::nn::Module(kOp), options_(options), encodings_(std::move(encodings)) {
  const int64_t dim = options.dim(), heads = options.num_heads();
  TORCH_CHECK_VALUE(dim >= 1, "[", kOp, "] dim must be >= 1, got ", dim);
  TORCH_CHECK_VALUE(heads >= 1, "[", kOp, "] num_heads must be >= 1, got ", heads);
  TORCH_CHECK_VALUE(dim % heads == 0, "[", kOp, "] dim must be divisible by num_heads, got dim ", dim,
                    " and num_heads ", heads);
  TORCH_CHECK_VALUE(options.dropout() >= 0.0 && options.dropout() < 1.0, "[", kOp,
                    "] dropout must be in [0, 1), got ", options.dropout());
  const int64_t head_dim = dim / heads;
  if (encodings_.rotary) {
    const int64_t got = encodings_.rotary->options().head_dim();
    TORCH_CHECK_VALUE(got == head_dim, "[", kOp, "] rotary head_dim must be ", head_dim, " (dim / num_heads), got ",
                      got);
  }
  if (encodings_.bias) {
    const int64_t got = encodings_.bias->num_heads();
    TORCH_CHECK_VALUE(got == heads, "[", kOp, "] bias must have num_heads = ", heads, " heads, got ", got);
  }
  if (encodings_.relative) {
    const int64_t got_dim = encodings_.relative->head_dim();
    TORCH_CHECK_VALUE(got_dim == head_dim, "[", kOp, "] relative head_dim must be ", head_dim,
                      " (dim / num_heads), got ", got_dim);
    const int64_t got = encodings_.relative->num_heads();  // 0: one table shared by the heads
    TORCH_CHECK_VALUE(got == 0 || got == heads, "[", kOp, "] relative must have num_heads = ", heads,
                      " heads, got ", got);
  }

  const auto linear = torch::nn::LinearOptions(dim, dim).bias(options.bias());
  q_proj = register_module("q_proj", torch::nn::Linear(linear));
  k_proj = register_module("k_proj", torch::nn::Linear(linear));
  v_proj = register_module("v_proj", torch::nn::Linear(linear));
  out_proj = register_module("out_proj", torch::nn::Linear(linear));
  if (encodings_.rotary) register_module("rotary", encodings_.rotary);
  if (encodings_.bias) register_module("bias", encodings_.bias);
  if (encodings_.relative) {
    register_module("relative", encodings_.relative);
    encodings_.relative->share_projections(q_proj, k_proj);  // DeBERTa's share_att_key reads them
  }
  reset_parameters();
}

// As torch.nn.MultiheadAttention: Xavier-uniform projection weights, zero
// biases (the encodings keep their own initialisation).
void MultiheadAttentionImpl::reset_parameters() {
  at::NoGradGuard no_grad;
  for (torch::nn::Linear* proj : {&q_proj, &k_proj, &v_proj, &out_proj}) {
    torch::nn::init::xavier_uniform_((*proj)->weight);
    if (options_.bias()) (*proj)->bias.zero_();
  }
}

at::Tensor MultiheadAttentionImpl::forward(const at::Tensor& x, const at::Tensor& key_padding_mask,
                                           const at::Tensor& positions) {
  check_sequence("x", x, options_.dim(), q_proj->weight.scalar_type());
  return std::get<0>(attend(x, x, key_padding_mask, false, positions));
}

// query (B, Tq, D), memory (B, Tk, D), key_padding_mask (B, Tk) bool -> (B, Tq, D) [, (B, H, Tq, Tk)]
std::tuple<at::Tensor, at::Tensor> MultiheadAttentionImpl::attend(const at::Tensor& query, const at::Tensor& memory,
                                                                  const at::Tensor& key_padding_mask,
                                                                  bool return_weights, const at::Tensor& positions) {
  const int64_t dim = options_.dim(), heads = options_.num_heads();
  check_sequence("query", query, dim, q_proj->weight.scalar_type());
  check_sequence("memory", memory, dim, q_proj->weight.scalar_type());
  TORCH_CHECK_VALUE(memory.size(0) == query.size(0), "[", kOp, "] memory must have query's batch size ",
                    query.size(0), ", got ", memory.size(0));
  const int64_t batch = query.size(0), q_len = query.size(1), k_len = memory.size(1);
  if (key_padding_mask.defined()) {
    TORCH_CHECK_TYPE(key_padding_mask.scalar_type() == at::kBool, "[", kOp,
                     "] key_padding_mask must be bool (true = padding), got ",
                     detail::dtype_name(key_padding_mask.scalar_type()));
    TORCH_CHECK_VALUE(key_padding_mask.dim() == 2 && key_padding_mask.size(0) == batch &&
                          key_padding_mask.size(1) == k_len,
                      "[", kOp, "] key_padding_mask must be (B, Tk) = (", batch, ", ", k_len, "), got ",
                      detail::tuple_of(key_padding_mask.sizes()));
  }

  if (positions.defined()) {
    TORCH_CHECK_VALUE(positions.dim() == 1 && positions.size(0) == k_len && positions.scalar_type() == at::kLong,
                      "[", kOp, "] positions must be int64 (Tk) = (", k_len, "), got ",
                      detail::dtype_name(positions.scalar_type()), " ", detail::tuple_of(positions.sizes()));
  }
  // q, k, v: (B, H, T, Dh) in the input's dtype
  at::Tensor q = split_heads(q_proj->forward(query), heads);
  at::Tensor k = split_heads(k_proj->forward(memory), heads);
  const at::Tensor v = split_heads(v_proj->forward(memory), heads);
  if (encodings_.rotary) {
    // Queries are the last q_len of the k_len positions (decoding with a cache).
    const at::Tensor keys = positions.defined() ? positions : position_range(0, k_len);
    if (q_len == k_len) {
      std::tie(q, k) = encodings_.rotary->forward(q, k, keys);
    } else {
      q = std::get<0>(encodings_.rotary->forward(q, q, keys.slice(0, k_len - q_len)));
      k = std::get<1>(encodings_.rotary->forward(k, k, keys));
    }
  }

  const at::ScalarType compute = query.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  AttentionTerms terms;
  if (encodings_.bias) encodings_.bias->add_terms(terms, q_len, k_len, compute);
  if (encodings_.relative) encodings_.relative->add_terms(terms, q_len, k_len, compute);

  AttentionCall call;
  call.causal = options_.causal() || terms.causal;
  if (key_padding_mask.defined()) call.key_padding_mask = key_padding_mask;
  // A family may widen the scale (DeBERTa: 1/sqrt(Dh * (1 + its position terms))).
  call.scale = 1.0 / std::sqrt(static_cast<double>(head_dim()) * terms.scale_factor);
  call.return_weights = return_weights;
  call.dropout = is_training() ? options_.dropout() : 0.0;
  call.path = options_.path();
  auto [out, weights] = ops::attention(q, k, v, terms, call);
  return {out_proj->forward(merge_heads(out)), weights};
}

void MultiheadAttentionImpl::pretty_print(std::ostream& stream) const {
  stream << "posenc::nn::MultiheadAttention(dim=" << options_.dim() << ", num_heads=" << options_.num_heads()
         << ", dropout=" << options_.dropout() << ", bias=" << (options_.bias() ? "true" : "false")
         << ", causal=" << (options_.causal() ? "true" : "false");
  if (options_.path() != AttentionPath::kAuto) stream << ", path=" << attention_path_name(options_.path());
  stream << ")";
}

}  // namespace posenc::nn
