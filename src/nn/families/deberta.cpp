// DeBERTa's torch layer, all of it in one file (docs/families.md): its op, the
// contract its one holder works through, the typed C++ front end and the
// descriptor. Each part keeps its own notes below.
//
// Its op: torch.ops.posenc.deberta_row_index: DeBERTa's bucket rows (kernels/deberta.h) for
// the attention's rel_index, so Python builds the terms from the kernel's buckets.
//
// Its module. DeBERTa's disentangled attention as a relative encoding (deberta_relative.h):
// the projected tables once per call, then either the fused attention's rel_k /
// rel_q terms through a bucket index (add_terms) or HF's gathers (logits).
// Ends with the family's descriptor, which registers itself (families/families.h).
#include "posenc/nn/deberta_relative.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <torch/library.h>
#include <torch/nn/init.h>
#include <vector>

#include "families/families.h"
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

TORCH_LIBRARY_FRAGMENT(posenc, m) {
  m.def("deberta_row_index(int max_distance, int position_buckets=256, int max_relative_positions=512) -> Tensor",
        &deberta_row_index);
}

}  // namespace posenc::nn

namespace posenc::nn {
namespace {

// [rows] int64: kernels::deberta_row_index over max_distance K.
at::Tensor row_index(const kernels::DebertaParams& params, int64_t max_distance) {
  at::Tensor index = at::empty({2 * max_distance + 1}, at::kLong);
  kernels::deberta_row_index(params, max_distance, index.data_ptr<int64_t>());
  return index;
}

}  // namespace

DebertaRelativeImpl::DebertaRelativeImpl(const DebertaRelativeOptions& options)
    : RelativeEncodingImpl("DebertaRelative", options.num_heads(), options.head_dim(), /*shared_ok=*/false),
      options_(options) {
  detail::translate_errors([&] { kernels::validate_deberta(params(), "DebertaRelative"); });
  TORCH_CHECK_VALUE(options.c2p() || options.p2c(), "[", name(), "] pos_att_type must hold c2p or p2c, got neither");
  TORCH_CHECK_VALUE(options.model_dim() >= 0, "[", name(), "] model_dim must be >= 0 (0: num_heads * head_dim), got ",
                    options.model_dim());
  TORCH_CHECK_VALUE(std::isfinite(options.init_std()) && options.init_std() >= 0, "[", name(),
                    "] init_std must be finite and >= 0, got ", options.init_std());
  const int64_t inner = num_heads() * head_dim();
  model_dim_ = options.model_dim() > 0 ? options.model_dim() : inner;
  TORCH_CHECK_VALUE(!options.share_att_key() || model_dim_ == inner, "[", name(),
                    "] share_att_key needs model_dim = num_heads * head_dim = ", inner, ", got ", model_dim_);
  const int64_t rows = 2 * kernels::deberta_span(params());
  rel_embeddings_ = register_parameter("rel_embeddings", at::empty({rows, model_dim_}));
  if (options.norm_rel_ebd()) {
    norm = register_module("norm_rel_ebd", torch::nn::LayerNorm(torch::nn::LayerNormOptions({model_dim_})
                                                                    .eps(options.layer_norm_eps())));
  }
  if (!options.share_att_key()) {
    if (options.c2p()) pos_key_proj = register_module("pos_key_proj", torch::nn::Linear(model_dim_, inner));
    if (options.p2c()) pos_query_proj = register_module("pos_query_proj", torch::nn::Linear(model_dim_, inner));
  }
  reset_parameters();
}

void DebertaRelativeImpl::reset_parameters() {
  at::NoGradGuard no_grad;
  rel_embeddings_.normal_(0.0, options_.init_std());
  if (norm) norm->reset_parameters();
  if (pos_key_proj) pos_key_proj->reset_parameters();
  if (pos_query_proj) pos_query_proj->reset_parameters();
}

void DebertaRelativeImpl::share_projections(const torch::nn::Linear& query, const torch::nn::Linear& key) {
  if (!options_.share_att_key()) return;
  const int64_t inner = num_heads() * head_dim();
  for (const torch::nn::Linear* proj : {&query, &key}) {
    TORCH_CHECK_VALUE((*proj)->weight.dim() == 2 && (*proj)->weight.size(0) == inner &&
                          (*proj)->weight.size(1) == model_dim_,
                      "[", name(), "] share_att_key needs projections ", model_dim_, " -> ", inner, ", got ",
                      (*proj)->weight.size(1), " -> ", (*proj)->weight.size(0));
  }
  shared_query_ = query, shared_key_ = key;
}

std::pair<at::Tensor, at::Tensor> DebertaRelativeImpl::tables(at::ScalarType compute) const {
  at::Tensor rel = rel_embeddings_.to(compute);
  if (norm) {
    rel = at::layer_norm(rel, {model_dim_}, norm->weight.to(compute), norm->bias.to(compute),
                         options_.layer_norm_eps());
  }
  const int64_t rows = rel.size(0), heads = num_heads(), dh = head_dim();
  // [rows, H * Dh] -> [H, rows, Dh], as HF's transpose_for_scores of the projected embeddings.
  const auto project = [&](const torch::nn::Linear& proj) {
    const at::Tensor b = proj->bias.defined() ? proj->bias.to(compute) : at::Tensor();
    return at::linear(rel, proj->weight.to(compute), b).view({rows, heads, dh}).permute({1, 0, 2});
  };
  if (options_.share_att_key()) {
    TORCH_CHECK_VALUE(shared_query_ && shared_key_, "[", name(),
                      "] share_att_key needs the attention layer's q/k projections (MultiheadAttention hands them "
                      "over), got none");
  }
  at::Tensor pos_key, pos_query;
  if (options_.c2p()) pos_key = project(options_.share_att_key() ? shared_key_ : pos_key_proj);
  if (options_.p2c()) pos_query = project(options_.share_att_key() ? shared_query_ : pos_query_proj);
  return {pos_key, pos_query};
}

// q (B, H, Tq, Dh), k (B, H, Tk, Dh) -> (B, H, Tq, Tk): HF's gathers of the (B, H, T, 2 span) products.
at::Tensor DebertaRelativeImpl::logits(const at::Tensor& q, const at::Tensor& k) {
  check_qk(q, k);
  const at::ScalarType compute = compute_dtype(q, rel_embeddings_);
  const int64_t batch = q.size(0), heads = q.size(1), q_len = q.size(2), k_len = k.size(2);
  const auto [pos_key, pos_query] = tables(compute);
  // rows[i, j] = row(i' - j), i' = i + Tk - Tq.
  at::Tensor rows = at::empty({q_len, k_len}, at::kLong);
  int64_t* r = rows.data_ptr<int64_t>();
  for (int64_t i = 0; i < q_len; ++i)
    for (int64_t j = 0; j < k_len; ++j) r[i * k_len + j] = kernels::deberta_row(params(), i + k_len - q_len - j);
  at::Tensor out = at::zeros({batch, heads, q_len, k_len}, q.options().dtype(compute));
  if (q_len == 0 || k_len == 0) return out.to(q.scalar_type());
  if (pos_key.defined()) {
    out = out + at::matmul(q.to(compute), pos_key.transpose(-1, -2)).gather(-1, rows.expand({batch, heads, q_len, k_len}));
  }
  if (pos_query.defined()) {
    const at::Tensor p2c = at::matmul(k.to(compute), pos_query.transpose(-1, -2));  // (B, H, Tk, 2 span)
    out = out + p2c.gather(-1, rows.t().expand({batch, heads, k_len, q_len})).transpose(-1, -2);
  }
  return out.to(q.scalar_type());
}

void DebertaRelativeImpl::add_terms(AttentionTerms& terms, int64_t q_len, int64_t k_len, at::ScalarType compute) {
  const auto [pos_key, pos_query] = tables(compute);
  if (pos_key.defined()) terms.rel_k = pos_key;
  if (pos_query.defined()) terms.rel_q = pos_query;
  // Every offset the call reaches gets its bucket row: O(Tq + Tk) entries.
  terms.max_distance = std::max<int64_t>({q_len - 1, k_len - 1, 0});
  terms.rel_index = row_index(params(), terms.max_distance);
  terms.scale_factor = scale_factor();
}

void DebertaRelativeImpl::pretty_print(std::ostream& stream) const {
  stream << "posenc::nn::DebertaRelative(num_heads=" << num_heads() << ", head_dim=" << head_dim()
         << ", model_dim=" << model_dim_ << ", position_buckets=" << options_.position_buckets()
         << ", max_relative_positions=" << options_.max_relative_positions() << ", pos_att_type=";
  stream << (options_.p2c() && options_.c2p() ? "p2c|c2p" : options_.c2p() ? "c2p" : "p2c");
  stream << ", share_att_key=" << (options_.share_att_key() ? "true" : "false") << ")";
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
      integer("deberta_position_buckets", &EncodingConfig::deberta_position_buckets,
              "log buckets of the relative offsets; 0: none", 0),
      integer("deberta_max_relative_positions", &EncodingConfig::deberta_max_relative_positions,
              "offsets beyond it share the last bucket", 1)};
  deberta.make_attention = [](const EncodingConfig& c, AttentionEncodings& slots) {
    slots.relative = DebertaRelative(DebertaRelativeOptions(c.num_heads, c.dim / c.num_heads)
                                       .position_buckets(c.deberta_position_buckets)
                                       .max_relative_positions(c.deberta_max_relative_positions)
                                       .init_std(c.init_std));
  };
  out.push_back(std::move(deberta));
}

const Registration registered(100, add_deberta);

}  // namespace
}  // namespace posenc::nn::families
