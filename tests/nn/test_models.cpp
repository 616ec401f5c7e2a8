// The small transformers (models.h): shapes for every encoding, the pre-LN
// composition against a forward written here from the submodules (with an
// independent sinusoidal table), the causal decoder never looking ahead, the
// learned table's limit, first_layer_attention, option and token errors.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "posenc/nn/encoding_registry.h"
#include "posenc/nn/models.h"
#include "reference.h"

namespace posenc::nn::test {
namespace {

std::vector<std::string> single_names() {
  std::vector<std::string> names;
  for (const EncodingFamily& info : encoding_families()) names.push_back(info.name);
  return names;
}

TransformerOptions small(const std::string& encoding) {
  TransformerOptions o(50, encoding);
  o.dim(16).layers(2).heads(4).max_positions(32).num_classes(3);
  o.encoding_config().set("max_distance", 3);  // clipping reached at T = 9
  return o;
}

at::Tensor random_tokens(int64_t batch, int64_t t, int64_t vocab = 50) { return at::randint(vocab, {batch, t}); }

TEST(Models, ShapesForEveryEncoding) {
  std::vector<std::string> names = single_names();
  names.emplace_back("learned+shaw");
  names.emplace_back("sinusoidal+rope+alibi");
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    at::manual_seed(1);
    const at::Tensor tokens = random_tokens(2, 9);
    if (find_encoding_family(name) != nullptr && find_encoding_family(name)->needs.causal) {
      // Decoders only (nope, fire): the encoder refuses them (test_registry.cpp).
      TransformerDecoder decoder(small(name));
      EXPECT_EQ(decoder->forward(tokens).sizes(), (std::vector<int64_t>{2, 9, 50}));
      continue;
    }
    TransformerEncoder encoder(small(name));
    at::Tensor mask = at::zeros({2, 9}, at::kBool);
    mask[1].narrow(0, 6, 3).fill_(true);
    EXPECT_EQ(encoder->forward(tokens, mask).sizes(), (std::vector<int64_t>{2, 9, 16}));
    EXPECT_EQ(encoder->classify(tokens, mask).sizes(), (std::vector<int64_t>{2, 3}));
    const auto [start, end] = encoder->span(tokens, mask);
    EXPECT_EQ(start.sizes(), (std::vector<int64_t>{2, 9}));
    EXPECT_EQ(end.sizes(), (std::vector<int64_t>{2, 9}));
    // Padding can never be a span boundary; real positions are finite.
    EXPECT_TRUE(at::equal(at::isinf(start), mask));
    EXPECT_TRUE(at::equal(at::isinf(end), mask));
    EXPECT_TRUE((start.masked_select(mask) < 0).all().item<bool>());

    TransformerDecoder decoder(small(name));
    const at::Tensor logits = decoder->forward(tokens);
    EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{2, 9, 50}));
    EXPECT_TRUE(at::isfinite(logits).all().item<bool>());
  }
}

TEST(Models, EncoderIsPreLayerNormOverEmbeddingPlusSinusoids) {
  // final_norm(blocks(E[tokens] + PE)), block(x) = h + W2 gelu(W1 LN2(h)), h = x + Attn(LN1(x)),
  // with PE from the plain long double table of reference.h.
  at::manual_seed(2);
  TransformerEncoder encoder(small("sinusoidal+shaw"));
  encoder->to(at::kDouble);
  const at::Tensor tokens = random_tokens(2, 9);
  at::Tensor x = encoder->embed->weight.index_select(0, tokens.flatten()).view({2, 9, 16}) +
                 reference_sinusoidal(0, 9, 16).unsqueeze(0);
  for (size_t layer = 0; layer < encoder->blocks->size(); ++layer) {
    auto block = encoder->blocks->ptr<TransformerBlockImpl>(layer);
    const at::Tensor h = x + block->attention->forward(block->norm1->forward(x));
    x = h + block->ffn2->forward(at::gelu(block->ffn1->forward(block->norm2->forward(h))));
  }
  const at::Tensor hidden = encoder->final_norm->forward(x);
  EXPECT_LT(max_abs_diff(encoder->forward(tokens), hidden), 1e-12);  // float64, same ops in the same order
  const at::Tensor cls = at::matmul(hidden.select(1, 0), encoder->cls_head->weight.t()) + encoder->cls_head->bias;
  EXPECT_LT(max_abs_diff(encoder->classify(tokens), cls), 1e-12);
  EXPECT_EQ(encoder->blocks[0]->as<TransformerBlockImpl>()->ffn1->weight.size(0), 64);  // ffn_dim 0: 4 * dim
}

// Changing tokens after t leaves the outputs at <= t as they were.
void expect_no_look_ahead(const std::function<at::Tensor(const at::Tensor&)>& run, bool want_causal) {
  const at::Tensor tokens = random_tokens(2, 10);
  const at::Tensor before = run(tokens);
  for (int64_t t : {0, 4, 8}) {
    at::Tensor changed = tokens.clone();
    changed.narrow(1, t + 1, 10 - t - 1).copy_((tokens.narrow(1, t + 1, 10 - t - 1) + 7) % 50);
    const at::Tensor after = run(changed);
    const double past = max_abs_diff(after.narrow(1, 0, t + 1), before.narrow(1, 0, t + 1));
    const double future = max_abs_diff(after.narrow(1, t + 1, 10 - t - 1), before.narrow(1, t + 1, 10 - t - 1));
    EXPECT_GT(future, 1e-6) << "t " << t;  // the change reached the later positions
    if (want_causal) {
      EXPECT_LT(past, 1e-12) << "t " << t;  // float64: rows never mix, up to the GEMM's blocking
    } else {
      EXPECT_GT(past, 1e-6) << "t " << t;  // an encoder does look ahead
    }
  }
}

TEST(Models, CausalDecoderDoesNotLookAhead) {
  for (const std::string& name : single_names()) {
    SCOPED_TRACE(name);
    at::manual_seed(3);
    TransformerDecoder decoder(small(name));
    decoder->to(at::kDouble);
    expect_no_look_ahead([&](const at::Tensor& tokens) { return decoder->forward(tokens); }, true);  // composed
    at::NoGradGuard no_grad;
    decoder->eval();
    expect_no_look_ahead([&](const at::Tensor& tokens) { return decoder->forward(tokens); }, true);  // fused
  }
  at::manual_seed(4);
  TransformerEncoder encoder(small("rope"));
  encoder->to(at::kDouble);
  expect_no_look_ahead([&](const at::Tensor& tokens) { return encoder->forward(tokens); }, false);
}

TEST(Models, PaddingIsInvisibleToTheRealTokens) {
  // Changing padded tokens leaves the hidden states of the others, and the class logits, as they were.
  for (const std::string& name : {std::string("learned+t5"), std::string("rope+shaw"), std::string("xl")}) {
    SCOPED_TRACE(name);
    at::manual_seed(8);
    TransformerEncoder encoder(small(name));
    encoder->to(at::kDouble);
    const at::Tensor tokens = random_tokens(2, 9);
    at::Tensor mask = at::zeros({2, 9}, at::kBool);
    mask[1].narrow(0, 5, 4).fill_(true);
    at::Tensor changed = tokens.clone();
    changed[1].narrow(0, 5, 4).copy_((tokens[1].narrow(0, 5, 4) + 11) % 50);
    const at::Tensor before = encoder->forward(tokens, mask), after = encoder->forward(changed, mask);
    EXPECT_LT(max_abs_diff(after[0], before[0]), 1e-12);  // float64, rows never mix
    EXPECT_LT(max_abs_diff(after[1].narrow(0, 0, 5), before[1].narrow(0, 0, 5)), 1e-12);
    EXPECT_GT(max_abs_diff(after[1].narrow(0, 5, 4), before[1].narrow(0, 5, 4)), 1e-6);
    EXPECT_LT(max_abs_diff(encoder->classify(changed, mask), encoder->classify(tokens, mask)), 1e-12);
  }
}

TEST(Models, LearnedTableTooShortNamesTheLimit) {
  TransformerEncoder encoder(small("learned").max_positions(8));
  EXPECT_EQ(encoder->forward(random_tokens(2, 8)).size(1), 8);
  expect_value_error([&] { encoder->forward(random_tokens(2, 9)); },
                     "[learned] position 8 is outside the table of 8 rows (valid 0..7)");
  TransformerDecoder decoder(small("learned+alibi").max_positions(8));
  expect_value_error([&] { decoder->forward(random_tokens(1, 12)); },
                     "[learned] position 8 is outside the table of 8 rows (valid 0..7)");
  // Relative encodings have no such limit.
  TransformerEncoder relative(small("shaw").max_positions(8));
  EXPECT_EQ(relative->forward(random_tokens(1, 40)).size(1), 40);
}

TEST(Models, FirstLayerAttentionRowsAreDistributions) {
  for (const std::string& name : {std::string("none"), std::string("learned+t5"), std::string("rope+shaw"),
                                  std::string("alibi"), std::string("xl")}) {
    SCOPED_TRACE(name);
    at::manual_seed(5);
    TransformerEncoder encoder(small(name));
    const at::Tensor tokens = random_tokens(2, 7);
    const at::Tensor w = encoder->first_layer_attention(tokens);
    ASSERT_EQ(w.sizes(), (std::vector<int64_t>{2, 4, 7, 7}));
    EXPECT_GE(w.min().item<double>(), 0.0);
    EXPECT_LT(max_abs_diff(w.sum(3), at::ones({2, 4, 7})), 1e-6);  // 7 float32 terms
    // The weights of the first block's attention on LN1 of the encoded embeddings.
    auto block = encoder->blocks->ptr<TransformerBlockImpl>(0);
    at::Tensor x = encoder->embed->forward(tokens);
    if (encoder->input_encoding) x = encoder->input_encoding->forward(x);
    const at::Tensor h = block->norm1->forward(x);
    EXPECT_LT(max_abs_diff(w, std::get<1>(block->attention->attend(h, h, {}, true))), 1e-6);

    TransformerDecoder decoder(small(name));
    const at::Tensor c = decoder->first_layer_attention(tokens);
    EXPECT_LT(max_abs_diff(c.sum(3), at::ones({2, 4, 7})), 1e-6);
    EXPECT_EQ(c.triu(1).abs().max().item<double>(), 0.0);  // causal
  }
}

TEST(Models, EncodingConfigFollowsTheOptions) {
  TransformerOptions o = small("t5");
  o.encoding_config().dim = 999;  // overwritten
  o.encoding_config().num_heads = 7;
  o.encoding_config().causal = true;
  o.encoding_config().set("t5_num_buckets", 12);  // kept
  TransformerEncoder encoder(o);
  const EncodingConfig& c = encoder->options().encoding_config();
  EXPECT_EQ(c.dim, 16);
  EXPECT_EQ(c.num_heads, 4);
  EXPECT_EQ(c.max_positions, 32);
  EXPECT_FALSE(c.causal);
  EXPECT_EQ(c.integer("t5_num_buckets"), 12);
  TransformerDecoder decoder(o);
  EXPECT_TRUE(decoder->options().encoding_config().causal);

  // Each layer owns its T5 table (12 buckets x 4 heads): listed once each, separate storage.
  const auto params = encoder->named_parameters();
  const at::Tensor t0 = params["blocks.0.attention.bias.table"], t1 = params["blocks.1.attention.bias.table"];
  EXPECT_EQ(t0.sizes(), (std::vector<int64_t>{12, 4}));
  EXPECT_NE(t0.data_ptr(), t1.data_ptr());
  std::set<void*> storages;
  for (const auto& p : encoder->parameters()) storages.insert(p.data_ptr());
  EXPECT_EQ(storages.size(), encoder->parameters().size());
  for (const char* key : {"embed.weight", "final_norm.weight", "cls_head.weight", "span_head.weight",
                          "blocks.1.ffn2.weight", "blocks.0.norm1.weight", "blocks.0.attention.q_proj.weight"}) {
    EXPECT_TRUE(params.contains(key)) << key;
  }
  EXPECT_TRUE(decoder->named_parameters().contains("lm_head.weight"));
  EXPECT_TRUE(TransformerEncoder(small("learned"))->named_parameters().contains("input_encoding.table"));
}

TEST(Models, EmbeddingsStartFromN0002) {
  at::manual_seed(6);
  TransformerEncoder encoder(TransformerOptions(1000, "none").dim(64));
  const at::Tensor w = encoder->embed->weight;
  // 64000 draws: the sample std is within 1% of 0.02 with overwhelming probability (se 0.28%).
  EXPECT_NEAR(w.std().item<double>(), 0.02, 2e-4);
  EXPECT_NEAR(w.mean().item<double>(), 0.0, 4e-4);
}

TEST(Models, DropoutOnlyInTraining) {
  at::manual_seed(7);
  TransformerEncoder encoder(small("shaw").dropout(0.3));
  const at::Tensor tokens = random_tokens(2, 9);
  EXPECT_GT(max_abs_diff(encoder->forward(tokens), encoder->forward(tokens)), 1e-3);
  encoder->eval();
  EXPECT_EQ(max_abs_diff(encoder->forward(tokens), encoder->forward(tokens)), 0.0);
}

// Randomized positions (Ruoss et al. 2023): a sorted draw without replacement, uniform over [0, max).
TEST(Models, LayerEncodingsCycleOverTheLayers) {
  TransformerOptions o = small("learned+rope");
  o.layers(5).layer_encodings({"rope:base=10000", "rope:base=1000000", "alibi"});
  TransformerDecoder decoder(o);
  ASSERT_TRUE(decoder->input_encoding);  // the model's input point stays
  auto attention = [&](int64_t layer) { return decoder->blocks->ptr<TransformerBlockImpl>(layer)->attention; };
  const double want[] = {1e4, 1e6, 0.0, 1e4, 1e6};  // 0: the alibi layer, no rotation
  for (int64_t layer = 0; layer < 5; ++layer) {
    SCOPED_TRACE(layer);
    const AttentionEncodings& e = attention(layer)->encodings();
    if (want[layer] == 0.0) {
      EXPECT_FALSE(e.rotary);
      EXPECT_TRUE(e.bias);
    } else {
      ASSERT_TRUE(e.rotary);
      EXPECT_EQ(e.rotary->options().base(), want[layer]);
      EXPECT_FALSE(e.bias);
    }
  }
  EXPECT_EQ(decoder->forward(random_tokens(2, 9)).sizes(), (std::vector<int64_t>{2, 9, 50}));
  // Each layer's plan is validated with its settings.
  TransformerOptions bad = small("rope");
  bad.layer_encodings({"rope:base=-1"});
  expect_value_error([&] { TransformerDecoder{bad}; }, "[encoding] base must be finite and > 0, got -1");
}

TEST(RandomPositions, SortedDistinctUniformDraws) {
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(11);
  std::vector<int64_t> hits(40, 0);
  const int64_t draws = 4000;
  for (int64_t n = 0; n < draws; ++n) {
    const at::Tensor p = sample_random_positions(10, 40, g);
    ASSERT_EQ(p.sizes(), (std::vector<int64_t>{10}));
    ASSERT_EQ(p.scalar_type(), at::kLong);
    for (int64_t t = 0; t < 10; ++t) {
      const int64_t v = p[t].item<int64_t>();
      ASSERT_TRUE(v >= 0 && v < 40);
      if (t > 0) {
        ASSERT_LT(p[t - 1].item<int64_t>(), v);  // sorted and distinct
      }
      ++hits[static_cast<size_t>(v)];
    }
  }
  // Each position is drawn with probability 10/40: 1000 expected hits, sd sqrt(4000 * 0.25 * 0.75) = 27.4;
  // 5 sd is a bound a fair draw breaks with probability < 1e-5 over the 40 positions.
  for (int64_t v = 0; v < 40; ++v) EXPECT_NEAR(hits[static_cast<size_t>(v)], 1000, 137) << v;
  EXPECT_TRUE(at::equal(sample_random_positions(40, 40, g), at::arange(40, at::kLong)));  // the whole range
  expect_value_error([&] { sample_random_positions(41, 40, g); },
                     "[random_positions] length must be in 0..max_positions = 40, got 41");
}

TEST(RandomPositions, ModelsDrawInTrainingOnlyAndTakeExplicitPositions) {
  for (const char* encoding : {"rope", "learned", "sinusoidal+rope"}) {
    SCOPED_TRACE(encoding);
    at::manual_seed(3);
    TransformerEncoder model(small(encoding).random_positions(32));
    const at::Tensor tokens = random_tokens(2, 8);
    model->eval();
    const at::Tensor at_range = model->forward(tokens);
    // Explicit 0..T-1 is the default.
    EXPECT_TRUE(at::equal(model->forward(tokens, {}, at::arange(8, at::kLong)), at_range));
    // Eval mode never draws.
    EXPECT_TRUE(at::equal(model->forward(tokens), at_range));
    // Training mode draws: the same as the explicit draw from the same generator state.
    model->train();
    at::manual_seed(9);
    const at::Tensor drawn = model->forward(tokens);
    at::manual_seed(9);
    const at::Tensor positions = sample_random_positions(8, 32);
    EXPECT_TRUE(at::equal(drawn, model->forward(tokens, {}, positions)));
    EXPECT_FALSE(at::allclose(drawn, at_range));
  }
  // RoPE alone sees only offsets: shifting every position leaves an encoder's output unchanged.
  at::manual_seed(4);
  TransformerEncoder rope(small("rope"));
  rope->eval();
  const at::Tensor tokens = random_tokens(2, 8).to(at::kLong);
  const at::Tensor base = rope->forward(tokens, {}, at::arange(8, at::kLong) * 3);
  EXPECT_TRUE(at::allclose(base, rope->forward(tokens, {}, at::arange(8, at::kLong) * 3 + 1000), 1e-4, 1e-4));
}

TEST(RandomPositions, Errors) {
  expect_value_error([] { TransformerEncoder(small("alibi").random_positions(64)); },
                     "[TransformerEncoder] random_positions needs an input or query/key encoding (absolute or "
                     "rotary), got 'alibi'");
  expect_value_error([] { TransformerEncoder(small("learned").random_positions(64)); },
                     "[TransformerEncoder] random_positions 64 needs max_positions >= 64 (rows of the learned "
                     "table), got 32");
  expect_value_error([] { TransformerEncoder(small("rope").random_positions(-1)); },
                     "[TransformerEncoder] random_positions must be >= 0 (0: off), got -1");
  TransformerDecoder decoder(small("rope"));
  expect_value_error([&] { decoder->forward(random_tokens(1, 8), at::arange(7, at::kLong)); },
                     "[TransformerDecoder] positions must be int64 (T) = (8), got [7]");
}

TEST(Models, OptionErrors) {
  expect_value_error([] { TransformerEncoder(TransformerOptions(0, "none")); },
                     "[TransformerEncoder] vocab_size must be >= 1, got 0");
  expect_value_error([] { TransformerEncoder(TransformerOptions(10, "none").layers(0)); },
                     "[TransformerEncoder] layers must be >= 1, got 0");
  expect_value_error([] { TransformerEncoder(TransformerOptions(10, "none").heads(0)); },
                     "[TransformerEncoder] heads must be >= 1, got 0");
  expect_value_error([] { TransformerDecoder(TransformerOptions(10, "none").dim(0)); },
                     "[TransformerDecoder] dim must be >= 1, got 0");
  expect_value_error([] { TransformerDecoder(TransformerOptions(10, "none").ffn_dim(-1)); },
                     "[TransformerDecoder] ffn_dim must be >= 0 (0: 4 * dim), got -1");
  expect_value_error([] { TransformerEncoder(TransformerOptions(10, "none").dropout(1.5)); },
                     "[TransformerEncoder] dropout must be in [0, 1), got 1.5");
  expect_value_error([] { TransformerEncoder(TransformerOptions(10, "none").max_positions(0)); },
                     "[TransformerEncoder] max_positions must be >= 1, got 0");
  expect_value_error([] { TransformerEncoder(TransformerOptions(10, "none").num_classes(0)); },
                     "[TransformerEncoder] num_classes must be >= 1, got 0");
  expect_value_error([] { TransformerEncoder(TransformerOptions(10, "none").dim(10).heads(4)); },
                     "[encoding] dim must be divisible by num_heads, got dim 10 and num_heads 4");
  expect_value_error([] { TransformerDecoder(TransformerOptions(10, "rope").dim(20).heads(4)); },
                     "[encoding] rope needs an even head_dim, got 5");
  expect_value_error([] { TransformerEncoder(TransformerOptions(10, "alibi+t5")); },
                     "[encoding] 'alibi+t5' has two logit bias encodings (alibi, t5); use at most one per point");
}

TEST(Models, MaskedLmAtRowsIsTheFullLogitsAtThoseRows) {
  TransformerOptions o = small("learned");
  o.masked_lm_head(true);
  TransformerEncoder encoder(o);
  encoder->eval();
  const at::Tensor tokens = random_tokens(2, 9);
  const at::Tensor rows = at::tensor(std::vector<int64_t>{0, 4, 9, 17}, at::kLong);
  const at::Tensor full = encoder->masked_lm(tokens).reshape({18, 50});
  const at::Tensor picked = encoder->masked_lm(tokens, {}, {}, rows);
  EXPECT_EQ(picked.sizes(), (std::vector<int64_t>{4, 50}));
  EXPECT_TRUE(at::allclose(picked, full.index_select(0, rows), 1e-6, 1e-6));
  expect_value_error([&] { encoder->masked_lm(tokens, {}, {}, at::tensor(std::vector<int64_t>{3, 18}, at::kLong)); },
                     "[TransformerEncoder] rows must be in [0, 18) (B * T), got 18");
  expect_value_error([&] { encoder->masked_lm(tokens, {}, {}, at::zeros({2, 2}, at::kLong)); },
                     "[TransformerEncoder] rows must be 1-D, got 2-D");
  expect_error<c10::TypeError>([&] { encoder->masked_lm(tokens, {}, {}, at::zeros({2})); },
                               "[TransformerEncoder] rows must be int64, got float32");
}

TEST(Models, TokenErrors) {
  TransformerEncoder encoder(small("none"));
  TransformerDecoder decoder(small("none"));
  expect_value_error([&] { encoder->forward(at::full({2, 4}, 50, at::kLong)); },
                     "[TransformerEncoder] tokens must be in [0, 50), got 50");
  expect_value_error([&] { decoder->forward(at::full({2, 4}, -1, at::kLong)); },
                     "[TransformerDecoder] tokens must be in [0, 50), got -1");
  expect_error<c10::TypeError>([&] { encoder->forward(at::zeros({2, 4})); },
                               "[TransformerEncoder] tokens must be int64, got float32");
  expect_value_error([&] { encoder->classify(at::zeros({2, 4, 1}, at::kLong)); },
                     "[TransformerEncoder] tokens must be 2-D (B, T), got 3-D");
  expect_value_error([&] { decoder->forward(at::zeros({2, 0}, at::kLong)); },
                     "[TransformerDecoder] tokens must not be empty, got (2, 0)");
  expect_value_error([&] { encoder->span(at::zeros({2, 4}, at::kLong), at::zeros({2, 5}, at::kBool)); },
                     "[TransformerEncoder] key_padding_mask must be (B, T) = (2, 4), got (2, 5)");
  expect_error<c10::TypeError>([&] { encoder->forward(at::zeros({2, 4}, at::kLong), at::zeros({2, 4})); },
                               "[TransformerEncoder] key_padding_mask must be bool (true = padding), got float32");
}

}  // namespace
}  // namespace posenc::nn::test
