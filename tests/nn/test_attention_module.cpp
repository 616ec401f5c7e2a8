// MultiheadAttention (multihead_attention.h) with every registry encoding
// against a float64 reference written here from the papers' formulas: the
// projections with the module's weights, then naive attention over dense
// (Tq, Tk) index tables built by plain loops (offsets, clipped rows, T5
// buckets, ALiBi distances) and gathered from the module's own parameters
// (ShawRelative's key_table, SinusoidalRelative's omega, XL's u, v, W_R,
// T5's table). The reference runs on torch's autograd, so it also gives the
// expected gradient of x and of every parameter.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/utils.h>

#include <algorithm>
#include <cstdlib>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "posenc/nn/encoding_registry.h"
#include "posenc/nn/multihead_attention.h"
#include "reference.h"

namespace posenc::nn::test {
namespace {

const auto kF64 = at::TensorOptions().dtype(at::kDouble);
constexpr double kInf = std::numeric_limits<double>::infinity();

// Small sizes that still reach every regime: K = 2 clips offsets of a 7-long
// sequence; T5 with 8 buckets (2 exact per direction) and max_distance 20
// puts offsets 2..6 in the log buckets; xPos scale_base 8 makes the decay visible.
EncodingConfig test_config(bool causal) {
  EncodingConfig c;
  c.dim = 16;
  c.num_heads = 4;
  c.causal = causal;
  c.set("base", 100.0);
  c.set("xpos_scale_base", 8.0);
  c.set("max_distance", 2);
  c.set("t5_num_buckets", 8);
  c.set("t5_max_distance", 20);
  c.set("init_std", 0.5);  // tables large enough that a wrong row shows
  return c;
}

MultiheadAttention make_layer(const std::string& name, bool causal, at::ScalarType dtype = at::kDouble) {
  const EncodingConfig c = test_config(causal);
  MultiheadAttention m(MultiheadAttentionOptions(c.dim, c.num_heads).causal(causal),
                       make_attention_encodings(parse_encoding(name), c));
  m->to(dtype);
  // Non-zero projection biases, so a dropped bias shows.
  at::NoGradGuard no_grad;
  for (auto* p : {&m->q_proj, &m->k_proj, &m->v_proj, &m->out_proj}) (*p)->bias.normal_(0.0, 0.3);
  // CoPE's table starts at zero (the authors' init): draw it, so a wrong position shows.
  const auto params = m->named_parameters();
  if (const at::Tensor* e = params.find("bias.e")) at::Tensor(*e).normal_(0.0, 0.5);
  return m;
}

// A plan with a decoder-only family (nope, fire): an encoder refuses it.
bool needs_decoder(const std::string& name) {
  for (const std::string& part : parse_encoding(name).parts) {
    if (find_encoding_family(part)->needs.causal) return true;
  }
  return false;
}

bool has_part(const std::string& name, const std::string& part) {
  const auto parts = parse_encoding(name).parts;
  return std::find(parts.begin(), parts.end(), part) != parts.end();
}

// ---- the families' formulas, written plainly

// HF T5 _relative_position_bucket of rel = key - query, its float32 logarithm included.
int64_t t5_bucket(int64_t rel, bool bidirectional, int64_t num_buckets, int64_t max_distance) {
  int64_t bucket = 0;
  int64_t n = 0;
  if (bidirectional) {
    num_buckets /= 2;
    if (rel > 0) bucket += num_buckets;
    n = std::abs(rel);
  } else {
    n = std::max<int64_t>(-rel, 0);
  }
  const int64_t max_exact = num_buckets / 2;
  if (n < max_exact) return bucket + n;
  const float ratio = std::log(static_cast<float>(n) / static_cast<float>(max_exact)) /
                      static_cast<float>(std::log(static_cast<double>(max_distance) / max_exact));
  const int64_t large = max_exact + static_cast<int64_t>(ratio * static_cast<float>(num_buckets - max_exact));
  return bucket + std::min(large, num_buckets - 1);
}

// Rotates x (B, H, T, Dh) at positions first..first+T-1, half layout: pair
// (c, c + Dh/2) by p * base^(-2c/Dh); xPos scales pair c by zeta_c^(sign * p / scale_base).
at::Tensor rotate(const at::Tensor& x, int64_t first, double base, double xpos_scale_base, double sign) {
  const int64_t t = x.size(2), dh = x.size(3), half = dh / 2;
  at::Tensor cos = at::empty({t, half}, kF64), sin = at::empty({t, half}, kF64), scale = at::ones({t, half}, kF64);
  for (int64_t i = 0; i < t; ++i) {
    const long double p = first + i;
    for (int64_t c = 0; c < half; ++c) {
      const long double angle = p * std::pow(static_cast<long double>(base), -2.0L * c / dh);
      cos[i][c] = static_cast<double>(std::cos(angle));
      sin[i][c] = static_cast<double>(std::sin(angle));
      if (xpos_scale_base > 0) {
        const long double zeta = (2.0L * c / dh + 0.4L) / 1.4L;
        scale[i][c] = static_cast<double>(std::pow(zeta, sign * p / xpos_scale_base));
      }
    }
  }
  const at::Tensor a = x.narrow(3, 0, half), b = x.narrow(3, half, half);
  return at::cat({(a * cos - b * sin) * scale, (b * cos + a * sin) * scale}, 3);
}

struct Layout {
  at::Tensor offset;  // (Tq, Tk) int64: d = j - i', i' = i + Tk - Tq
  at::Tensor masked;  // (B, 1, Tq, Tk) bool: causal or padding
};

Layout layout(int64_t batch, int64_t q_len, int64_t k_len, bool causal, const at::Tensor& padding) {
  Layout l{at::empty({q_len, k_len}, at::kLong), at::zeros({batch, 1, q_len, k_len}, at::kBool)};
  for (int64_t i = 0; i < q_len; ++i) {
    for (int64_t j = 0; j < k_len; ++j) l.offset[i][j] = j - (i + k_len - q_len);
  }
  if (causal) l.masked = l.masked | (l.offset > 0).view({1, 1, q_len, k_len});
  if (padding.defined()) l.masked = l.masked | padding.view({batch, 1, 1, k_len});
  return l;
}

// table [R, Dh] gathered at clip(d, -K, K) + K -> (Tq, Tk, Dh)
at::Tensor clipped_gather(const at::Tensor& table, const at::Tensor& offset, int64_t max_distance) {
  const at::Tensor rows = offset.clamp(-max_distance, max_distance) + max_distance;
  return table.index_select(0, rows.flatten()).view({offset.size(0), offset.size(1), table.size(-1)});
}

// NEZHA's table from omega: row r = interleaved (sin, cos) of (r - K) * omega.
at::Tensor sinusoid_table(const at::Tensor& omega, int64_t max_distance) {
  const at::Tensor d = at::arange(-max_distance, max_distance + 1, kF64).unsqueeze(1);
  const at::Tensor angle = d * omega.unsqueeze(0);
  return at::stack({angle.sin(), angle.cos()}, 2).view({2 * max_distance + 1, 2 * omega.size(0)});
}

// Dai et al.: R_{i'-j} with M channels (sines then cosines), (Tq, Tk, M), constants.
at::Tensor xl_sinusoids(const at::Tensor& offset, int64_t model_dim, double base) {
  const int64_t q_len = offset.size(0), k_len = offset.size(1), half = model_dim / 2;
  at::Tensor r = at::empty({q_len, k_len, model_dim}, kF64);
  auto a = r.accessor<double, 3>();
  auto o = offset.accessor<int64_t, 2>();
  for (int64_t i = 0; i < q_len; ++i) {
    for (int64_t j = 0; j < k_len; ++j) {
      const long double d = -o[i][j];  // i' - j
      for (int64_t c = 0; c < half; ++c) {
        const long double w = std::pow(static_cast<long double>(base), -2.0L * c / model_dim);
        a[i][j][c] = static_cast<double>(std::sin(d * w));
        a[i][j][c + half] = static_cast<double>(std::cos(d * w));
      }
    }
  }
  return r;
}

struct Reference {
  at::Tensor out;      // (B, Tq, D)
  at::Tensor weights;  // (B, H, Tq, Tk)
};

// The layer's output from its parameters (float64, differentiable wrt them).
Reference reference(MultiheadAttentionImpl& m, const std::string& name, const at::Tensor& query,
                    const at::Tensor& memory, const at::Tensor& padding = {}) {
  const EncodingConfig c = test_config(m.options().causal());
  const int64_t batch = query.size(0), q_len = query.size(1), k_len = memory.size(1);
  const int64_t heads = m.options().num_heads(), dh = m.head_dim();
  auto project = [&](torch::nn::LinearImpl& p, const at::Tensor& x) {
    return (at::matmul(x, p.weight.t()) + p.bias).view({batch, x.size(1), heads, dh}).permute({0, 2, 1, 3});
  };
  at::Tensor q = project(*m.q_proj, query), k = project(*m.k_proj, memory), v = project(*m.v_proj, memory);
  const bool xpos = has_part(name, "rope-xpos");
  if (has_part(name, "rope") || xpos) {
    q = rotate(q, k_len - q_len, c.real("base"), xpos ? c.real("xpos_scale_base") : 0.0, +1.0);
    k = rotate(k, 0, c.real("base"), xpos ? c.real("xpos_scale_base") : 0.0, -1.0);
  }
  const bool causal = m.options().causal() || ((has_part(name, "alibi") || has_part(name, "kerple") ||
                                                 has_part(name, "kerple-power") || has_part(name, "dpb")) &&
                                                c.causal);
  const Layout l = layout(batch, q_len, k_len, causal, padding);

  at::Tensor logits = at::einsum("bhid,bhjd->bhij", {q, k});
  at::Tensor value_vectors;  // (Tq, Tk, Dh) added to v by the weights
  const auto params = m.named_parameters();
  const auto buffers = m.named_buffers();
  if (has_part(name, "shaw")) {
    const at::Tensor a = clipped_gather(params["relative.key_table"], l.offset, c.integer("max_distance"));
    logits = logits + at::einsum("bhid,ijd->bhij", {q, a});
    value_vectors = clipped_gather(params["relative.value_table"], l.offset, c.integer("max_distance"));
  }
  if (has_part(name, "shaw-sinusoidal") || has_part(name, "shaw-learnable-sinusoidal")) {
    const at::Tensor omega =
        has_part(name, "shaw-sinusoidal") ? buffers["relative.omega"] : params["relative.omega"];
    const at::Tensor a = clipped_gather(sinusoid_table(omega, c.integer("max_distance")), l.offset, c.integer("max_distance"));
    logits = logits + at::einsum("bhid,ijd->bhij", {q, a});
    value_vectors = a;
  }
  if (has_part(name, "xl")) {
    const at::Tensor u = params["relative.u"], w = params["relative.v"], w_r = params["relative.w_r"];
    const at::Tensor r = xl_sinusoids(l.offset, w_r.size(1), c.real("base"));
    const at::Tensor a = at::einsum("ijm,hdm->hijd", {r, w_r.view({heads, dh, w_r.size(1)})});
    logits = logits + at::einsum("hd,bhjd->bhj", {u, k}).unsqueeze(2) +
             at::einsum("bhid,hijd->bhij", {q + w.view({1, heads, 1, dh}), a});
  }
  double scale_factor = 1.0;
  if (has_part(name, "deberta")) {
    // He et al. 2021 as HF's DebertaV2: LayerNorm-ed rel_embeddings projected per head (pos_key_proj,
    // pos_query_proj), rows clamp(bucket(i' - j) + 256, 0, 511) of HF's float32 log buckets (256 over
    // 512 positions), c2p q_i . pos_key[row] + p2c k_j . pos_query[row], all over sqrt(3 Dh).
    const auto bucket = [](int64_t rel) -> int64_t {
      const int64_t mid = 128, a = std::llabs(rel);
      if (a <= mid) return rel;
      const float lp = std::ceil(std::log(static_cast<float>(a) / 128.0f) / std::log(511.0f / 128.0f) * 127.0f) + 128.0f;
      return rel < 0 ? -static_cast<int64_t>(lp) : static_cast<int64_t>(lp);
    };
    at::Tensor rows = at::empty({q_len, k_len}, at::kLong);
    for (int64_t i = 0; i < q_len; ++i) {
      for (int64_t j = 0; j < k_len; ++j) rows[i][j] = std::clamp<int64_t>(bucket(i + k_len - q_len - j) + 256, 0, 511);
    }
    at::Tensor rel = params["relative.rel_embeddings"];
    const at::Tensor mean = rel.mean(-1, true), var = (rel - mean).pow(2).mean(-1, true);
    rel = (rel - mean) / at::sqrt(var + 1e-7) * params["relative.norm_rel_ebd.weight"] + params["relative.norm_rel_ebd.bias"];
    const auto table = [&](const std::string& proj) {  // (Tq, Tk, H, Dh) at the pairs' rows
      const at::Tensor t = at::matmul(rel, params["relative." + proj + ".weight"].t()) + params["relative." + proj + ".bias"];
      return t.index_select(0, rows.flatten()).view({q_len, k_len, heads, dh});
    };
    logits = logits + at::einsum("bhid,ijhd->bhij", {q, table("pos_key_proj")}) +
             at::einsum("bhjd,ijhd->bhij", {k, table("pos_query_proj")});
    scale_factor = 3.0;
  }
  logits = logits / std::sqrt(static_cast<double>(dh) * scale_factor);
  if (has_part(name, "alibi")) {
    // The paper's slopes for a power-of-two H: m_h = 2^(-8(h+1)/H).
    at::Tensor slopes = at::empty({heads}, kF64);
    for (int64_t h = 0; h < heads; ++h) slopes[h] = std::pow(2.0, -8.0 * (h + 1) / heads);
    logits = logits - slopes.view({1, heads, 1, 1}) * l.offset.abs().to(at::kDouble);
  }
  if (has_part(name, "kerple") || has_part(name, "kerple-power")) {
    // Chi et al. 2022: -r1 log(1 + r2 |d|) or -r1 |d|^r2 per head.
    const at::Tensor r1 = params["bias.r1"].view({1, heads, 1, 1}), r2 = params["bias.r2"].view({1, heads, 1, 1});
    const at::Tensor dist = l.offset.abs().to(at::kDouble);
    logits = logits - (has_part(name, "kerple") ? r1 * at::log1p(r2 * dist) : r1 * at::pow(dist, r2));
  }
  if (has_part(name, "fire")) {
    // Li et al. 2023: f(psi(i' - j) / psi(max(L, i'))), psi(t) = log(1 + |c| t), L = |512 L_multiplier|,
    // f = w2 relu(w1 x + b1) + b2 per head (decoders only: the layer is causal).
    const at::Tensor qpos = (at::arange(q_len, kF64) + static_cast<double>(k_len - q_len)).view({q_len, 1});
    const at::Tensor c_abs = params["bias.c"].abs(), big_l = (params["bias.L_multiplier"] * 512.0).abs();
    const at::Tensor dist = (-l.offset).clamp_min(0).to(at::kDouble);  // masked pairs are ignored
    const at::Tensor x = at::log1p(c_abs * dist) / at::log1p(c_abs * at::maximum(big_l, qpos));
    const at::Tensor hidden = at::relu(x.unsqueeze(-1) * params["bias.w1"] + params["bias.b1"]);  // (Tq, Tk, hd)
    const at::Tensor f = at::einsum("ijk,hk->hij", {hidden, params["bias.w2"]}) + params["bias.b2"].view({heads, 1, 1});
    logits = logits + f.unsqueeze(0);
  }
  if (has_part(name, "cope")) {
    // Golovneva et al. 2024 (the paper's listing): gates sigmoid of the scaled logits, masked keys count 0,
    // p = reverse cumulative sum clamped at npos - 1, q . e interpolated between floor p and ceil p.
    const at::Tensor e = params["bias.e"];  // [npos, Dh]
    const at::Tensor scaled = at::einsum("bhid,bhjd->bhij", {q, k}) / std::sqrt(static_cast<double>(dh));
    const at::Tensor gates = at::sigmoid(scaled).masked_fill(l.masked, 0.0);
    const at::Tensor pos = gates.flip(-1).cumsum(-1).flip(-1).clamp_max(static_cast<double>(e.size(0) - 1));
    const at::Tensor lo = pos.floor(), hi = pos.ceil(), w = pos - lo;
    const at::Tensor z = at::matmul(q, e.t());  // (B, H, Tq, npos)
    logits = logits + z.gather(-1, hi.to(at::kLong)) * w + z.gather(-1, lo.to(at::kLong)) * (1 - w);
  }
  if (has_part(name, "dpb")) {
    // x-transformers: SiLU(W_in r + b_in), SiLU(W_h . + b_h) (depth 2), W_out . + b_out of r = i' - j.
    const at::Tensor r = (-l.offset).to(at::kDouble).unsqueeze(-1);  // (Tq, Tk, 1)
    at::Tensor h = at::silu(at::matmul(r, params["bias.in_weight"].t()) + params["bias.in_bias"]);
    h = at::silu(at::matmul(h, params["bias.hidden_weight"][0].t()) + params["bias.hidden_bias"][0]);
    const at::Tensor f = at::matmul(h, params["bias.out_weight"].t()) + params["bias.out_bias"];  // (Tq, Tk, H)
    logits = logits + f.permute({2, 0, 1}).unsqueeze(0);
  }
  if (has_part(name, "t5")) {
    at::Tensor buckets = at::empty_like(l.offset);
    for (int64_t i = 0; i < q_len; ++i) {
      for (int64_t j = 0; j < k_len; ++j) {
        buckets[i][j] = t5_bucket(l.offset[i][j].item<int64_t>(), !c.causal, c.integer("t5_num_buckets"), c.integer("t5_max_distance"));
      }
    }
    const at::Tensor table = params["bias.table"];  // [num_buckets, H]
    logits = logits + table.index_select(0, buckets.flatten()).view({q_len, k_len, heads}).permute({2, 0, 1});
  }
  // A row with every key masked gets zero weights (no NaN, no NaN gradient).
  const at::Tensor empty_row = l.masked.all(3, /*keepdim=*/true);
  logits = logits.masked_fill(l.masked, -kInf).masked_fill(empty_row, 0.0);
  const at::Tensor p = logits.softmax(3).masked_fill(empty_row, 0.0);
  at::Tensor o = at::matmul(p, v);
  if (value_vectors.defined()) o = o + at::einsum("bhij,ijd->bhid", {p, value_vectors});
  const at::Tensor merged = o.permute({0, 2, 1, 3}).reshape({batch, q_len, heads * dh});
  return {at::matmul(merged, m.out_proj->weight.t()) + m.out_proj->bias, p};
}

// Every single name and a few combinations (input parts reach no layer).
std::vector<std::string> all_names() {
  std::vector<std::string> names;
  for (const EncodingFamily& info : encoding_families()) names.push_back(info.name);
  for (const char* combo : {"rope+alibi", "rope-xpos+t5", "alibi+shaw", "rope+t5+xl", "learned+shaw-sinusoidal",
                            "sinusoidal+rope+shaw-learnable-sinusoidal"}) {
    names.emplace_back(combo);
  }
  return names;
}

at::Tensor random_x(int64_t batch, int64_t t, int64_t dim) { return at::randn({batch, t, dim}, kF64); }

// Key padding with no fully masked row: batch row 1 pads its last two keys.
at::Tensor padding_mask(int64_t batch, int64_t t) {
  at::Tensor mask = at::zeros({batch, t}, at::kBool);
  mask[1].narrow(0, t - 2, 2).fill_(true);
  return mask;
}

// float64 sums of ~16 terms and a softmax: a few hundred ulps at most.
constexpr double kTolF64 = 1e-11;

TEST(MultiheadAttention, MatchesReferenceForEveryEncodingBothPaths) {
  for (bool causal : {false, true}) {
    for (const std::string& name : all_names()) {
      SCOPED_TRACE(name + (causal ? " causal" : ""));
      if (needs_decoder(name) && !causal) continue;  // an encoder refuses it (test_registry.cpp)
      at::manual_seed(1);
      MultiheadAttention m = make_layer(name, causal);
      const at::Tensor x = random_x(2, 7, 16), mask = padding_mask(2, 7);
      const Reference want = reference(*m, name, x, x, mask);
      // Training: parameters require grad under grad mode -> the composed path.
      const at::Tensor trained = m->forward(x, mask);
      EXPECT_TRUE(trained.requires_grad());
      EXPECT_LT(max_abs_diff(trained, want.out), kTolF64);
      // Evaluation under NoGradGuard -> the fused path.
      m->eval();
      at::NoGradGuard no_grad;
      const at::Tensor evaluated = m->forward(x, mask);
      EXPECT_FALSE(evaluated.requires_grad());
      EXPECT_LT(max_abs_diff(evaluated, want.out), kTolF64);
      EXPECT_LT(max_abs_diff(evaluated, trained), kTolF64);
    }
  }
}

TEST(MultiheadAttention, CrossAttentionQueriesOnTheLastKeys) {
  // Tq = 3 queries at key positions 4..6 of Tk = 7 (decoding with a cache).
  for (bool causal : {false, true}) {
    for (const std::string& name : all_names()) {
      SCOPED_TRACE(name + (causal ? " causal" : ""));
      if (needs_decoder(name) && !causal) continue;  // an encoder refuses it (test_registry.cpp)
      at::manual_seed(2);
      MultiheadAttention m = make_layer(name, causal);
      const at::Tensor query = random_x(2, 3, 16), memory = random_x(2, 7, 16), mask = padding_mask(2, 7);
      const Reference want = reference(*m, name, query, memory, mask);
      const auto [out, weights] = m->attend(query, memory, mask, /*return_weights=*/true);
      EXPECT_LT(max_abs_diff(out, want.out), kTolF64);
      ASSERT_EQ(weights.sizes(), (std::vector<int64_t>{2, 4, 3, 7}));
      EXPECT_LT(max_abs_diff(weights, want.weights), kTolF64);
      at::NoGradGuard no_grad;
      const auto [fused, fused_weights] = m->attend(query, memory, mask, /*return_weights=*/true);
      EXPECT_LT(max_abs_diff(fused, want.out), kTolF64);
      EXPECT_LT(max_abs_diff(fused_weights, want.weights), kTolF64);
    }
  }
}

TEST(MultiheadAttention, WeightsAreADistributionOverUnmaskedKeys) {
  at::manual_seed(3);
  MultiheadAttention m = make_layer("alibi+shaw", /*causal=*/true);
  const at::Tensor x = random_x(2, 6, 16), mask = padding_mask(2, 6);
  at::NoGradGuard no_grad;
  const at::Tensor w = std::get<1>(m->attend(x, x, mask, true));
  EXPECT_LT(max_abs_diff(w.sum(3), at::ones({2, 4, 6}, kF64)), 1e-14);  // 6 terms summed in float64
  // Causal: nothing above the diagonal; padding: batch row 1 gives its last two keys nothing.
  EXPECT_EQ(w.triu(1).abs().max().item<double>(), 0.0);
  EXPECT_EQ(w[1].narrow(2, 4, 2).abs().max().item<double>(), 0.0);
}

TEST(MultiheadAttention, AnEncodingMayAskForTheCausalMask) {
  // Causal ALiBi in a layer whose options are not causal: the mask still applies.
  at::manual_seed(9);
  MultiheadAttention m(MultiheadAttentionOptions(16, 4), make_attention_encodings(parse_encoding("alibi"), test_config(true)));
  m->to(at::kDouble);
  const at::Tensor x = random_x(2, 6, 16);
  for (bool grad : {true, false}) {
    at::AutoGradMode mode(grad);  // composed, then fused
    const at::Tensor w = std::get<1>(m->attend(x, x, {}, true));
    EXPECT_EQ(w.triu(1).abs().max().item<double>(), 0.0);
    const at::Tensor past = at::ones({6, 6}, at::kBool).tril(0).expand_as(w);
    EXPECT_GT(w.masked_select(past).min().item<double>(), 0.0);  // every earlier key keeps some weight
  }
}

TEST(MultiheadAttention, RowWithEveryKeyMaskedGivesTheOutputBias) {
  // Every key of batch row 0 is padding: attention gives zeros there, so the
  // layer's output is out_proj's bias, on both paths.
  at::manual_seed(4);
  MultiheadAttention m = make_layer("t5+shaw", false);
  const at::Tensor x = random_x(2, 5, 16);
  at::Tensor mask = at::zeros({2, 5}, at::kBool);
  mask[0].fill_(true);
  const at::Tensor bias = m->out_proj->bias.detach().expand({5, 16});
  const at::Tensor trained = m->forward(x, mask);
  EXPECT_FALSE(at::isnan(trained).any().item<bool>());
  EXPECT_LT(max_abs_diff(trained[0], bias), 1e-15);
  EXPECT_LT(max_abs_diff(trained[1], reference(*m, "t5+shaw", x, x, mask).out[1]), kTolF64);
  at::NoGradGuard no_grad;
  EXPECT_LT(max_abs_diff(m->forward(x, mask)[0], bias), 1e-15);
}

// d loss / d (x and every parameter), loss = sum(out * g).
std::vector<at::Tensor> gradients(const at::Tensor& out, const at::Tensor& g, const std::vector<at::Tensor>& wrt) {
  return torch::autograd::grad({(out * g).sum()}, wrt, {}, /*retain_graph=*/true, false, /*allow_unused=*/true);
}

TEST(MultiheadAttention, GradientsMatchTheReferenceForEveryParameter) {
  for (bool causal : {false, true}) {
    for (const std::string& name : all_names()) {
      SCOPED_TRACE(name + (causal ? " causal" : ""));
      if (needs_decoder(name) && !causal) continue;  // an encoder refuses it (test_registry.cpp)
      at::manual_seed(5);
      MultiheadAttention m = make_layer(name, causal);
      const at::Tensor x = random_x(2, 7, 16).requires_grad_(true), mask = padding_mask(2, 7);
      std::vector<at::Tensor> wrt{x};
      std::vector<std::string> names{"x"};
      for (const auto& item : m->named_parameters()) {
        wrt.push_back(item.value());
        names.push_back(item.key());
      }
      const at::Tensor g = at::randn({2, 7, 16}, kF64);
      const auto got = gradients(m->forward(x, mask), g, wrt);
      const auto want = gradients(reference(*m, name, x, x, mask).out, g, wrt);
      for (size_t n = 0; n < wrt.size(); ++n) {
        SCOPED_TRACE(names[n]);
        ASSERT_TRUE(got[n].defined()) << "no gradient reaches " << names[n];
        ASSERT_TRUE(want[n].defined());
        // q . b_k is the same for every key, so softmax cancels k_proj's bias
        // (its gradient is rounding noise) unless a rotation makes it depend on j;
        // likewise an MLP bias's output bias, one constant per head (FIRE's b2, DPB's out_bias), and
        // DeBERTa's pos_key_proj bias (c2p adds q_i . b for every key).
        const bool row_constant =
            names[n] == "bias.b2" || names[n] == "bias.out_bias" || names[n] == "relative.pos_key_proj.bias";
        if (!row_constant && (names[n] != "k_proj.bias" || has_part(name, "rope") || has_part(name, "rope-xpos"))) {
          EXPECT_GT(got[n].abs().max().item<double>(), 1e-6);
        }
        EXPECT_LT(max_abs_diff(got[n], want[n]), 1e-10);  // float64 backward sums, as kTolF64 with more terms
      }
    }
  }
}

TEST(MultiheadAttention, FiniteDifferencesAgreeWithBackward) {
  // Central differences in float64, eps 1e-6: truncation O(eps^2 f''') ~ 1e-12
  // and rounding ~ 1e-16 / 1e-6 = 1e-10, so 1e-7 is a wide but meaningful bound.
  for (const std::string& name : {std::string("rope+t5+xl"), std::string("alibi+shaw"),
                                  std::string("rope-xpos+shaw-learnable-sinusoidal")}) {
    SCOPED_TRACE(name);
    at::manual_seed(6);
    MultiheadAttention m = make_layer(name, /*causal=*/true);
    const at::Tensor x = random_x(1, 5, 16).requires_grad_(true);
    const at::Tensor g = at::randn({1, 5, 16}, kF64);
    std::vector<at::Tensor> wrt{x};
    for (const auto& item : m->named_parameters()) wrt.push_back(item.value());
    const auto analytic = gradients(m->forward(x), g, wrt);
    auto loss = [&] {
      at::NoGradGuard no_grad;
      return (m->forward(x) * g).sum().item<double>();
    };
    constexpr double eps = 1e-6;
    for (size_t n = 0; n < wrt.size(); ++n) {
      at::Tensor flat = wrt[n].detach().view({-1});
      // A few entries of each tensor: first, middle, last.
      for (int64_t e : {int64_t{0}, flat.numel() / 2, flat.numel() - 1}) {
        const double saved = flat[e].item<double>();
        flat[e] = saved + eps;
        const double up = loss();
        flat[e] = saved - eps;
        const double down = loss();
        flat[e] = saved;
        const double numeric = (up - down) / (2 * eps);
        EXPECT_NEAR(analytic[n].reshape({-1})[e].item<double>(), numeric, 1e-7) << "tensor " << n << " entry " << e;
      }
    }
  }
}

TEST(MultiheadAttention, Float32PathsAgreeWithTheFloat64Reference) {
  for (const std::string& name : all_names()) {
    SCOPED_TRACE(name);
    at::manual_seed(7);
    MultiheadAttention m = make_layer(name, true, at::kFloat);
    const at::Tensor x = random_x(2, 7, 16), mask = padding_mask(2, 7);
    const at::Tensor trained = m->forward(x.to(at::kFloat), mask);
    at::Tensor evaluated;
    {
      at::NoGradGuard no_grad;
      evaluated = m->forward(x.to(at::kFloat), mask);
    }
    m->to(at::kDouble);
    const at::Tensor want = reference(*m, name, x, x, mask).out;
    // float32 projections and sums of O(1) values: a few hundred float32 ulps.
    EXPECT_LT(max_abs_diff(trained, want), 2e-5);
    EXPECT_LT(max_abs_diff(evaluated, want), 2e-5);
  }
}

TEST(MultiheadAttention, DropoutOnlyInTraining) {
  at::manual_seed(8);
  const EncodingConfig c = test_config(false);
  MultiheadAttention m(MultiheadAttentionOptions(16, 4).dropout(0.5), make_attention_encodings(parse_encoding("shaw"), c));
  m->to(at::kDouble);
  const at::Tensor x = random_x(2, 7, 16);
  const at::Tensor want = reference(*m, "shaw", x, x).out;
  EXPECT_GT(max_abs_diff(m->forward(x), want), 1e-3);  // half the weights dropped
  m->eval();
  EXPECT_LT(max_abs_diff(m->forward(x), want), kTolF64);
}

TEST(MultiheadAttention, SubmodulesAndParameterNames) {
  MultiheadAttention m = make_layer("rope+t5+shaw", false);
  const auto params = m->named_parameters();
  for (const char* key : {"q_proj.weight", "q_proj.bias", "k_proj.weight", "v_proj.weight", "out_proj.weight",
                          "out_proj.bias", "bias.table", "relative.key_table", "relative.value_table"}) {
    EXPECT_TRUE(params.contains(key)) << key;
  }
  EXPECT_EQ(params.size(), 11u);
  const auto children = m->named_children();
  EXPECT_TRUE(children.contains("rotary"));
  MultiheadAttention plain(MultiheadAttentionOptions(16, 4).bias(false));
  EXPECT_EQ(plain->named_parameters().size(), 4u);
  EXPECT_EQ(plain->named_children().size(), 4u);
}

TEST(MultiheadAttention, ConstructionErrors) {
  expect_value_error([] { MultiheadAttention(MultiheadAttentionOptions(10, 4)); },
                     "[MultiheadAttention] dim must be divisible by num_heads, got dim 10 and num_heads 4");
  expect_value_error([] { MultiheadAttention(MultiheadAttentionOptions(16, 0)); },
                     "[MultiheadAttention] num_heads must be >= 1, got 0");
  expect_value_error([] { MultiheadAttention(MultiheadAttentionOptions(0, 4)); },
                     "[MultiheadAttention] dim must be >= 1, got 0");
  expect_value_error([] { MultiheadAttention(MultiheadAttentionOptions(16, 4).dropout(1.0)); },
                     "[MultiheadAttention] dropout must be in [0, 1), got 1");
  expect_value_error(
      [] {
        AttentionEncodings e;
        e.rotary = RotaryEmbedding(8);
        MultiheadAttention(MultiheadAttentionOptions(64, 4), e);
      },
      "[MultiheadAttention] rotary head_dim must be 16 (dim / num_heads), got 8");
  expect_value_error(
      [] {
        AttentionEncodings e;
        e.relative = ShawRelative(ShawRelativeOptions(4, 8));
        MultiheadAttention(MultiheadAttentionOptions(64, 4), e);
      },
      "[MultiheadAttention] relative head_dim must be 16 (dim / num_heads), got 8");
  expect_value_error(
      [] {
        AttentionEncodings e;
        e.bias = AlibiBias(8);
        MultiheadAttention(MultiheadAttentionOptions(64, 4), e);
      },
      "[MultiheadAttention] bias must have num_heads = 4 heads, got 8");
  expect_value_error(
      [] {
        AttentionEncodings e;
        e.relative = TransformerXLRelative(TransformerXLOptions(8, 16));
        MultiheadAttention(MultiheadAttentionOptions(64, 4), e);
      },
      "[MultiheadAttention] relative must have num_heads = 4 heads, got 8");
}

TEST(MultiheadAttention, CallErrors) {
  MultiheadAttention m(MultiheadAttentionOptions(64, 4));
  const at::Tensor x = at::randn({2, 16, 64});
  expect_value_error([&] { m->forward(at::randn({2, 16, 32})); },
                     "[MultiheadAttention] x must be (B, T, D) with D = 64, got (2, 16, 32)");
  expect_value_error([&] { m->forward(at::randn({16, 64})); },
                     "[MultiheadAttention] x must be (B, T, D) with D = 64, got (16, 64)");
  expect_value_error([&] { m->forward(x, at::zeros({2, 15}, at::kBool)); },
                     "[MultiheadAttention] key_padding_mask must be (B, Tk) = (2, 16), got (2, 15)");
  expect_error<c10::TypeError>([&] { m->forward(x, at::zeros({2, 16})); },
                               "[MultiheadAttention] key_padding_mask must be bool (true = padding), got float32");
  expect_error<c10::TypeError>([&] { m->forward(x.to(at::kDouble)); },
                               "[MultiheadAttention] x must have the parameters' dtype (float32), got float64");
  expect_error<c10::TypeError>([&] { m->attend(x, x.to(at::kDouble)); },
                               "[MultiheadAttention] memory must have the parameters' dtype (float32), got float64");
  expect_value_error([&] { m->attend(x, at::randn({3, 16, 64})); },
                     "[MultiheadAttention] memory must have query's batch size 2, got 3");
  expect_value_error([&] { m->attend(x, at::randn({2, 16, 8})); },
                     "[MultiheadAttention] memory must be (B, T, D) with D = 64, got (2, 16, 8)");
}

}  // namespace
}  // namespace posenc::nn::test
