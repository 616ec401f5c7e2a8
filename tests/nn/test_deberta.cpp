// DebertaRelative (posenc/nn/deberta_relative.h): logits() against a float64
// transcription of Hugging Face's DisentangledSelfAttention.disentangled_attention_bias
// (its bucket function, gathers and transposition written here line by line);
// attention with the module's terms on both paths (fused: rel_k / rel_q through
// rel_index) against softmax of the transcription, outputs and the gradients of
// q, k, v and every parameter, causal, Tq != Tk, key padding; share_att_key
// through MultiheadAttention's projections; the refusals word for word.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>
#include <torch/autograd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "posenc/nn/attention_ops.h"
#include "posenc/nn/deberta_relative.h"
#include "posenc/nn/multihead_attention.h"

namespace posenc::nn::test {
namespace {

const auto kF64 = at::TensorOptions().dtype(at::kDouble);
constexpr double kInf = std::numeric_limits<double>::infinity();

// HF's make_log_bucket_position under torch's float32 default dtype.
int64_t hf_bucket(int64_t rel, int64_t bucket_size, int64_t max_position) {
  if (bucket_size <= 0) return rel;
  const int64_t sign = rel > 0 ? 1 : rel < 0 ? -1 : 0, mid = bucket_size / 2;
  const int64_t abs_pos = rel < mid && rel > -mid ? mid - 1 : std::llabs(rel);
  const float log_pos =
      std::ceil(std::log(static_cast<float>(abs_pos) / static_cast<float>(mid)) /
                std::log(static_cast<float>(static_cast<double>(max_position - 1) / static_cast<double>(mid))) *
                static_cast<float>(mid - 1)) +
      static_cast<float>(mid);
  return abs_pos <= mid ? rel : static_cast<int64_t>(log_pos) * sign;
}

// HF's disentangled_attention_bias (float64, its scale included: / sqrt(Dh * scale_factor)) from the
// module's parameters; queries at key positions i' = i + Tk - Tq (HF: Tq = Tk).
at::Tensor hf_rel_att(DebertaRelativeImpl& m, const at::Tensor& query_layer, const at::Tensor& key_layer,
                      const torch::nn::Linear& shared_q = nullptr, const torch::nn::Linear& shared_k = nullptr) {
  const auto& o = m.options();
  const int64_t heads = o.num_heads(), dh = o.head_dim(), q_len = query_layer.size(2), k_len = key_layer.size(2);
  const int64_t att_span = o.position_buckets() > 0 ? o.position_buckets() : o.max_relative_positions();
  // relative_pos = build_relative_position(query, key): bucket(q_ids[:, None] - k_ids[None, :]).
  at::Tensor relative_pos = at::empty({q_len, k_len}, at::kLong), r_pos_kq = at::empty({k_len, q_len}, at::kLong);
  for (int64_t i = 0; i < q_len; ++i)
    for (int64_t j = 0; j < k_len; ++j) {
      relative_pos[i][j] = hf_bucket(i + k_len - q_len - j, o.position_buckets(), o.max_relative_positions());
      r_pos_kq[j][i] = hf_bucket(j - (i + k_len - q_len), o.position_buckets(), o.max_relative_positions());
    }
  auto params = m.named_parameters();
  at::Tensor rel = params["rel_embeddings"];  // rel_embeddings[0 : att_span * 2]
  if (o.norm_rel_ebd()) {
    const at::Tensor mean = rel.mean(-1, true), var = (rel - mean).pow(2).mean(-1, true);
    rel = (rel - mean) / at::sqrt(var + o.layer_norm_eps()) * params["norm_rel_ebd.weight"] +
          params["norm_rel_ebd.bias"];
  }
  const auto transpose_for_scores = [&](const at::Tensor& x) {  // [2 span, H * Dh] -> [H, 2 span, Dh]
    return x.view({2 * att_span, heads, dh}).permute({1, 0, 2});
  };
  const auto linear = [](const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
    return at::matmul(x, w.t()) + b;
  };
  const double scale = std::sqrt(static_cast<double>(dh) * m.scale_factor());
  const int64_t batch = query_layer.size(0);
  at::Tensor score = at::zeros({batch, heads, q_len, k_len}, kF64);
  if (o.c2p()) {
    const at::Tensor pos_key_layer =
        o.share_att_key() ? transpose_for_scores(linear(rel, shared_k->weight, shared_k->bias))
                          : transpose_for_scores(linear(rel, params["pos_key_proj.weight"], params["pos_key_proj.bias"]));
    at::Tensor c2p_att = at::matmul(query_layer, pos_key_layer.transpose(-1, -2));
    const at::Tensor c2p_pos = at::clamp(relative_pos + att_span, 0, att_span * 2 - 1);
    c2p_att = at::gather(c2p_att, -1, c2p_pos.expand({batch, heads, q_len, k_len}));
    score = score + c2p_att / scale;
  }
  if (o.p2c()) {
    const at::Tensor pos_query_layer =
        o.share_att_key()
            ? transpose_for_scores(linear(rel, shared_q->weight, shared_q->bias))
            : transpose_for_scores(linear(rel, params["pos_query_proj.weight"], params["pos_query_proj.bias"]));
    const at::Tensor p2c_pos = at::clamp(-r_pos_kq + att_span, 0, att_span * 2 - 1);
    at::Tensor p2c_att = at::matmul(key_layer, pos_query_layer.transpose(-1, -2));
    p2c_att = at::gather(p2c_att, -1, p2c_pos.expand({batch, heads, k_len, q_len})).transpose(-1, -2);
    score = score + p2c_att / scale;
  }
  return score;
}

DebertaRelative make(int64_t heads, int64_t dh, int64_t buckets, int64_t max_rel, bool c2p = true, bool p2c = true) {
  DebertaRelative m(DebertaRelativeOptions(heads, dh).position_buckets(buckets).max_relative_positions(max_rel)
                        .c2p(c2p).p2c(p2c).init_std(0.5));
  m->to(at::kDouble);
  // Non-trivial LayerNorm parameters, so their gradients are exercised.
  at::NoGradGuard no_grad;
  m->norm->weight.uniform_(0.5, 1.5);
  m->norm->bias.uniform_(-0.2, 0.2);
  return m;
}

TEST(DebertaRelative, LogitsEqualHuggingFacesDisentangledBias) {
  at::manual_seed(1);
  struct Case {
    int64_t buckets, max_rel, q_len, k_len;
  };
  // Defaults with offsets past the 128 identity buckets; buckets that clamp inside the sequence; none.
  for (const Case c : {Case{256, 512, 300, 300}, Case{8, 16, 40, 40}, Case{0, 6, 17, 17}, Case{8, 16, 9, 30}}) {
    DebertaRelative m = make(2, 8, c.buckets, c.max_rel);
    const at::Tensor q = at::randn({2, 2, c.q_len, 8}, kF64), k = at::randn({2, 2, c.k_len, 8}, kF64);
    const at::Tensor want = hf_rel_att(*m, q, k) * std::sqrt(8.0 * 3.0);
    EXPECT_LT((m->logits(q, k) - want).abs().max().item<double>(), 1e-11) << c.buckets << " " << c.q_len;
  }
}

struct AttentionCase {
  int64_t buckets, max_rel, q_len, k_len;
  bool causal, padding, c2p, p2c;
};

// Attention with the module's terms against softmax(q.k / sqrt(3 Dh) + HF's rel_att) v, on both
// paths; the gradients of q, k, v and every parameter against the plain formula's (torch autograd).
TEST(DebertaRelative, AttentionBothPathsEqualPlainFormulaWithGradients) {
  at::manual_seed(2);
  const int64_t batch = 2, heads = 2, dh = 8;
  for (const AttentionCase c : {AttentionCase{8, 16, 40, 40, false, true, true, true},
                                AttentionCase{8, 16, 30, 70, true, true, true, true},
                                AttentionCase{16, 64, 50, 20, false, false, true, true},
                                AttentionCase{8, 16, 35, 35, true, false, false, true},
                                AttentionCase{256, 512, 140, 140, false, true, true, false}}) {
    SCOPED_TRACE(std::to_string(c.buckets) + " " + std::to_string(c.q_len) + "x" + std::to_string(c.k_len));
    DebertaRelative m = make(heads, dh, c.buckets, c.max_rel, c.c2p, c.p2c);
    const at::Tensor q = at::randn({batch, heads, c.q_len, dh}, kF64).requires_grad_();
    const at::Tensor k = at::randn({batch, heads, c.k_len, dh}, kF64).requires_grad_();
    const at::Tensor v = at::randn({batch, heads, c.k_len, dh}, kF64).requires_grad_();
    at::Tensor padding = at::zeros({batch, c.k_len}, at::kBool);
    if (c.padding) padding[1].narrow(0, 0, 3).fill_(true);
    const at::Tensor g = at::randn({batch, heads, c.q_len, dh}, kF64);
    std::vector<at::Tensor> wrt{q, k, v};
    for (const auto& p : m->parameters()) wrt.push_back(p);

    // The plain formula.
    at::Tensor logits = at::matmul(q, k.transpose(-1, -2)) / std::sqrt(dh * m->scale_factor()) + hf_rel_att(*m, q, k);
    at::Tensor masked = padding.view({batch, 1, 1, c.k_len}).expand({batch, 1, c.q_len, c.k_len});
    if (c.causal) masked = masked | at::ones({c.q_len, c.k_len}, at::kBool).triu(c.k_len - c.q_len + 1);
    const at::Tensor want = at::matmul(logits.masked_fill(masked, -kInf).softmax(-1), v);
    const auto want_grads = torch::autograd::grad({(want * g).sum()}, wrt);

    for (const AttentionPath path : {AttentionPath::kFused, AttentionPath::kComposed}) {
      AttentionTerms terms;
      m->add_terms(terms, c.q_len, c.k_len, at::kDouble);
      EXPECT_EQ(terms.scale_factor, m->scale_factor());
      AttentionCall call;
      call.causal = c.causal, call.key_padding_mask = padding, call.path = path;
      call.scale = 1.0 / std::sqrt(dh * terms.scale_factor);
      const at::Tensor out = std::get<0>(ops::attention(q, k, v, terms, call));
      EXPECT_LT((out - want).abs().max().item<double>(), 1e-11) << attention_path_name(path);
      const auto grads = torch::autograd::grad({(out * g).sum()}, wrt);
      for (size_t e = 0; e < wrt.size(); ++e) {
        EXPECT_LT((grads[e] - want_grads[e]).abs().max().item<double>(), 1e-10)
            << attention_path_name(path) << " gradient " << e;
      }
    }
  }
}

// share_att_key: the layer's q/k projections project the relative embeddings (DeBERTa v3).
TEST(DebertaRelative, SharedKeysUseTheLayersProjections) {
  at::manual_seed(3);
  const int64_t dim = 16, heads = 2, t = 25;
  DebertaRelative rel(DebertaRelativeOptions(heads, dim / heads).position_buckets(8).max_relative_positions(16)
                          .share_att_key(true).init_std(0.5));
  AttentionEncodings enc;
  enc.relative = rel;
  MultiheadAttention layer(MultiheadAttentionOptions(dim, heads), enc);
  layer->to(at::kDouble);
  EXPECT_FALSE(rel->pos_key_proj);
  EXPECT_FALSE(rel->pos_query_proj);
  const at::Tensor x = at::randn({2, t, dim}, kF64);
  const auto project = [&](const torch::nn::Linear& p) {
    return (at::matmul(x, p->weight.t()) + p->bias).view({2, t, heads, dim / heads}).permute({0, 2, 1, 3});
  };
  const at::Tensor q = project(layer->q_proj), k = project(layer->k_proj), v = project(layer->v_proj);
  const at::Tensor logits =
      at::matmul(q, k.transpose(-1, -2)) / std::sqrt(3.0 * dim / heads) + hf_rel_att(*rel, q, k, layer->q_proj, layer->k_proj);
  const at::Tensor o = at::matmul(logits.softmax(-1), v).permute({0, 2, 1, 3}).reshape({2, t, dim});
  const at::Tensor want = at::matmul(o, layer->out_proj->weight.t()) + layer->out_proj->bias;
  EXPECT_LT((layer->forward(x) - want).abs().max().item<double>(), 1e-11);
  // On its own the module has no projections to share.
  DebertaRelative alone(DebertaRelativeOptions(heads, 8).share_att_key(true));
  AttentionTerms terms;
  try {
    alone->add_terms(terms, 4, 4, at::kFloat);
    ADD_FAILURE() << "expected an error";
  } catch (const c10::Error& e) {
    EXPECT_EQ(e.what_without_backtrace(),
              std::string("[DebertaRelative] share_att_key needs the attention layer's q/k projections "
                          "(MultiheadAttention hands them over), got none"));
  }
}

TEST(DebertaRelative, Errors) {
  const auto expect = [](const DebertaRelativeOptions& o, const std::string& message) {
    try {
      DebertaRelative m(o);
      ADD_FAILURE() << "expected: " << message;
    } catch (const c10::Error& e) {
      EXPECT_EQ(e.what_without_backtrace(), message);
    }
  };
  expect(DebertaRelativeOptions(4, 8).position_buckets(300).max_relative_positions(256),
         "[DebertaRelative] position_buckets must be <= max_relative_positions, got 300 > 256");
  expect(DebertaRelativeOptions(4, 8).position_buckets(1),
         "[DebertaRelative] position_buckets must be 0 (no buckets) or >= 2, got 1");
  expect(DebertaRelativeOptions(4, 8).max_relative_positions(0),
         "[DebertaRelative] max_relative_positions must be >= 1, got 0");
  expect(DebertaRelativeOptions(4, 8).c2p(false).p2c(false),
         "[DebertaRelative] pos_att_type must hold c2p or p2c, got neither");
  expect(DebertaRelativeOptions(4, 8).share_att_key(true).model_dim(16),
         "[DebertaRelative] share_att_key needs model_dim = num_heads * head_dim = 32, got 16");
  expect(DebertaRelativeOptions(0, 8), "[DebertaRelative] num_heads must be >= 1, got 0");
  // The attention op refuses an index outside the tables.
  const at::Tensor q = at::randn({1, 1, 3, 4});
  AttentionTerms terms;
  terms.rel_k = at::randn({5, 4}), terms.max_distance = 2, terms.rel_index = at::tensor({0, 1, 2, 3, 5}, at::kLong);
  try {
    ops::attention(q, q, q, terms);
    ADD_FAILURE() << "expected an error";
  } catch (const c10::Error& e) {
    EXPECT_EQ(e.what_without_backtrace(), std::string("[attention] rel_index must hold rows in [0, 5), got 5"));
  }
}

}  // namespace
}  // namespace posenc::nn::test
