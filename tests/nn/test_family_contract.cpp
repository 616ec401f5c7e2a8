// The family contract (posenc/nn/family_contract.h) and its one holder
// (family_module.h): a module built by name from settings is the typed
// module (same draws for a seed, same parameters, same bias and terms), the
// registry builds the holder, and bad settings or state are refused by name.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "posenc/nn/cope_bias.h"
#include "posenc/nn/deberta_relative.h"
#include "posenc/nn/encoding_registry.h"
#include "posenc/nn/family_module.h"
#include "posenc/nn/fire_bias.h"
#include "posenc/nn/kerple_bias.h"
#include "posenc/nn/learned_encoding.h"
#include "posenc/nn/ops.h"
#include "posenc/nn/relative_encodings.h"
#include "posenc/nn/sinusoidal_grid_encoding.h"
#include "reference.h"

namespace posenc::nn::test {
namespace {

TEST(FamilyContract, TheHolderByNameIsTheTypedModule) {
  at::manual_seed(3);
  KerpleBias typed(KerpleBiasOptions(4).kind(kernels::KerpleKind::kPower).causal(true));
  at::manual_seed(3);
  FamilySettings s;
  s.set("num_heads", int64_t{4}).set("kind", std::string("power")).set("causal", true);
  FamilyBias held("KerpleBias", s);
  ASSERT_EQ(held->named_parameters().size(), 2u);
  EXPECT_TRUE(at::equal(held->named_parameters()["r1"], typed->r1()));
  EXPECT_TRUE(at::equal(held->named_parameters()["r2"], typed->r2()));
  EXPECT_TRUE(at::equal(held->bias(3, 5), typed->bias(3, 5)));
  EXPECT_EQ(held->name(), "KerpleBias");
  // The defaults filled in, in the contract's order.
  EXPECT_EQ(held->settings().to_json(),
            R"({"num_heads":4,"kind":"power","causal":true,"r1":null,"r2":null,"eps":0.01})");
}

TEST(FamilyContract, TermsAreTheTypedModulesTerms) {
  at::manual_seed(5);
  FireBias fire(FireBiasOptions(2).hidden(6));
  AttentionTerms terms;
  fire->add_terms(terms, 4, 6, at::kDouble);
  ASSERT_EQ(terms.tiles.size(), 1u);
  EXPECT_EQ(terms.tiles[0].kind, "fire");
  ASSERT_EQ(terms.tiles[0].tensors.size(), 6u);
  EXPECT_TRUE(terms.causal);
  EXPECT_TRUE(at::equal(terms.tiles[0].tensors[5], fire->threshold().to(at::kDouble)));
  EXPECT_TRUE(at::equal(terms.tiles[0].tensors[4], fire->c().abs().to(at::kDouble)));
  // A second FIRE term in one call is refused by the family.
  expect_value_error([&] { fire->add_terms(terms, 4, 6, at::kDouble); },
                     "[FireBias] the attention terms already hold a FIRE term");
}

TEST(FamilyContract, TheRegistryBuildsTheHolder) {
  EncodingConfig config;
  config.num_heads = 4, config.dim = 32, config.causal = true;
  for (const std::string name : {"kerple", "kerple-power", "fire", "cope"}) {
    const AttentionEncodings slots = make_attention_encodings(parse_encoding(name), config);
    ASSERT_TRUE(slots.bias) << name;
    EXPECT_NE(dynamic_cast<const FamilyBiasImpl*>(slots.bias.get()), nullptr) << name;
  }
  const AttentionEncodings cope = make_attention_encodings(parse_encoding("cope"), config);
  EXPECT_EQ(cope.bias->named_parameters()["e"].sizes(), (std::vector<int64_t>{64, 8}));
}

TEST(FamilyContract, CatalogOfContracts) {
  std::vector<std::string> names;
  for (const FamilyContract* c : family_contracts()) names.push_back(c->module);
  for (const char* want : {"CopeBias", "FireBias", "KerpleBias"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  }
  EXPECT_EQ(family_contract("FireBias").describe(family_contract("FireBias").complete(
                FamilySettings().set("num_heads", int64_t{2}))),
            "num_heads=2, hidden=32, init_c=0.1, init_L=512");
}

TEST(FamilyContract, TheInputHolderByNameIsTheTypedModule) {
  torch::manual_seed(3);
  LearnedEncoding typed(LearnedEncodingOptions(6, 4).mode(InputMode::kConcat));
  torch::manual_seed(3);
  FamilyInput held("LearnedEncoding", FamilySettings().set("max_positions", int64_t{6}).set("dim", int64_t{4}),
                   InputMode::kConcat);
  EXPECT_EQ(family_contract("LearnedEncoding").point(), "input");
  EXPECT_TRUE(at::equal(typed->table(), held->tensor("table")));
  EXPECT_EQ(held->named_parameters().keys(), std::vector<std::string>{"table"});
  const at::Tensor x = at::randn({2, 3, 5});
  EXPECT_TRUE(at::equal(typed->forward(x, 2), held->forward(x, 2)));
  EXPECT_TRUE(at::equal(held->forward(x, 2).narrow(-1, 5, 4)[1], typed->table().narrow(0, 2, 3)));

  // A grid family: its sizes fixed by the front end, every cell or some rows.
  SinusoidalEncoding2d grid(SinusoidalEncoding2dOptions(2, 3, 8));
  kernels::SinusoidalGridParams p;
  p.height = 2, p.width = 3, p.dim = 8;
  EXPECT_TRUE(at::equal(grid->grid(at::kDouble), ops::sinusoidal_2d(p, at::kDouble)));
  EmbedCall rows;
  rows.positions = at::tensor({5, 0}, at::kLong), rows.dtype = at::kDouble;
  EXPECT_TRUE(at::equal(grid->embed(rows), ops::sinusoidal_2d(p, at::kDouble).index_select(0, *rows.positions)));
  expect_value_error([] { FamilyInput("SinusoidalEncoding2d", FamilySettings().set("dim", int64_t{8})); },
                     "[SinusoidalEncoding2d] takes 2 grid sizes, got 0");
  expect_value_error([] { FamilyInput("KerpleBias", FamilySettings().set("num_heads", int64_t{2})); },
                     "[KerpleBias] acts at the logit bias point, not at the input");
  expect_value_error([&] { grid->forward(at::zeros({7, 8})); },
                     "[SinusoidalEncoding2d] cells 0..6 must lie in the grid of 6 cells (0..5)");
}

// The relative-vectors holder by name is the typed module: the same draws, logits, values and terms, and the
// parameter-or-buffer choice a setting makes (SinusoidalRelative's omega).
TEST(FamilyContract, TheRelativeHolderByNameIsTheTypedModule) {
  at::manual_seed(3);
  ShawRelative typed(ShawRelativeOptions(2, 4).num_heads(3).values(true).key_logits(true));
  at::manual_seed(3);
  FamilyRelative held("ShawRelative", FamilySettings()
                                          .set("max_distance", int64_t{2})
                                          .set("head_dim", int64_t{4})
                                          .set("num_heads", int64_t{3})
                                          .set("key_logits", true));
  EXPECT_EQ(family_contract("ShawRelative").point(), "relative vectors");
  EXPECT_EQ(held->named_parameters().keys(), (std::vector<std::string>{"key_table", "value_table"}));
  EXPECT_TRUE(at::equal(typed->key_table(), held->tensor("key_table")));
  EXPECT_TRUE(at::equal(typed->value_table(), held->tensor("value_table")));
  const at::Tensor q = at::randn({2, 3, 5, 4}), k = at::randn({2, 3, 6, 4}), probs = at::rand({2, 3, 5, 6});
  EXPECT_TRUE(at::equal(typed->logits(q, k), held->logits(q, k)));
  EXPECT_TRUE(at::equal(typed->values(probs), held->values(probs)));
  EXPECT_TRUE(held->has_values());
  // The key term rides the fused attention as relative queries on the key table.
  AttentionTerms terms;
  held->add_terms(terms, 5, 6, at::kFloat);
  EXPECT_TRUE(at::equal(terms.rel_q, held->tensor("key_table")));
  EXPECT_EQ(terms.max_distance, 2);

  const FamilySettings nezha = FamilySettings().set("max_distance", int64_t{3}).set("head_dim", int64_t{8});
  EXPECT_EQ(FamilyRelative("SinusoidalRelative", nezha)->named_buffers().keys(), std::vector<std::string>{"omega"});
  FamilySettings learnable = nezha;
  learnable.set("learnable", true);
  EXPECT_EQ(FamilyRelative("SinusoidalRelative", learnable)->named_parameters().keys(),
            std::vector<std::string>{"omega"});
  expect_value_error([] { FamilyRelative("KerpleBias", FamilySettings().set("num_heads", int64_t{2})); },
                     "[KerpleBias] acts at the logit bias point, not at the relative-vectors point");
  expect_error<c10::Error>([] { FamilyRelative("TransformerXLRelative", FamilySettings()
                                                                          .set("num_heads", int64_t{2})
                                                                          .set("head_dim", int64_t{4}))
                                    ->values(at::zeros({1, 2, 3, 3})); },
                           "[TransformerXLRelative] has no value vectors");
}

// Submodules (torch's own Linear and LayerNorm, whose constructors draw before the contract), tensors
// borrowed from the layer, a list-of-words setting and a view of the terms: DeBERTa's holder by name is the
// typed module, and each is refused by name.
TEST(FamilyContract, SubmodulesBorrowedTensorsAndWordLists) {
  at::manual_seed(8);
  DebertaRelative typed(DebertaRelativeOptions(2, 4).c2p(false));
  at::manual_seed(8);
  FamilyRelative held("DebertaRelative", FamilySettings()
                                             .set("num_heads", int64_t{2})
                                             .set("head_dim", int64_t{4})
                                             .set("pos_att_type", std::vector<std::string>{"p2c"}));
  EXPECT_EQ(held->named_parameters().keys(),
            (std::vector<std::string>{"rel_embeddings", "norm_rel_ebd.weight", "norm_rel_ebd.bias",
                                      "pos_query_proj.weight", "pos_query_proj.bias"}));
  EXPECT_TRUE(std::dynamic_pointer_cast<torch::nn::LinearImpl>(held->submodule("pos_query_proj")));
  EXPECT_FALSE(held->submodule("pos_key_proj"));
  EXPECT_TRUE(at::equal(typed->pos_query_proj->weight, held->tensor("pos_query_proj.weight")));
  // The state is the submodule's own tensor: the contract's reset draws into the Linear.
  EXPECT_TRUE(held->tensor("pos_query_proj.weight").is_same(held->submodule("pos_query_proj")->named_parameters()["weight"]));
  const at::Tensor before = typed->pos_query_proj->weight.clone();
  typed->reset_parameters();
  EXPECT_FALSE(at::equal(before, typed->pos_query_proj->weight));
  EXPECT_TRUE(at::equal(typed->pos_query_proj->weight, typed->tensor("pos_query_proj.weight")));
  expect_value_error([&] { held->call("tables"); },
                     "[DebertaRelative] tables is a view of the module's attention terms: read them with add_terms");

  // share_att_key borrows the layer's projections, checked against the contract's shapes.
  DebertaRelative shared(DebertaRelativeOptions(2, 4).share_att_key(true));
  EXPECT_EQ(shared->named_parameters().keys(),
            (std::vector<std::string>{"rel_embeddings", "norm_rel_ebd.weight", "norm_rel_ebd.bias"}));
  expect_value_error([&] { shared->tables(at::kFloat); },
                     "[DebertaRelative] share_att_key needs the attention layer's q/k projections (MultiheadAttention "
                     "hands them over), got none");
  expect_value_error([&] { shared->share_projections(torch::nn::Linear(8, 8), torch::nn::Linear(4, 8)); },
                     "[DebertaRelative] the layer's k_proj.weight must have shape [8, 8], got [8, 4]");
  torch::nn::Linear q_proj(torch::nn::LinearOptions(8, 8).bias(false)), k_proj(8, 8);
  shared->share_projections(q_proj, k_proj);
  const auto [pos_key, pos_query] = shared->tables(at::kDouble);
  const at::Tensor rel = at::layer_norm(shared->rel_embeddings().to(at::kDouble), {8}, {}, {}, 1e-7);
  EXPECT_TRUE(at::allclose(pos_query, at::linear(rel, q_proj->weight.to(at::kDouble)).view({-1, 2, 4}).permute({1, 0, 2}),
                           1e-12, 1e-12));
  EXPECT_TRUE(at::allclose(pos_key, at::linear(rel, k_proj->weight.to(at::kDouble), k_proj->bias.to(at::kDouble))
                                        .view({-1, 2, 4})
                                        .permute({1, 0, 2}),
                           1e-12, 1e-12));

  const FamilyContract& deberta = family_contract("DebertaRelative");
  const FamilySettings base = FamilySettings().set("num_heads", int64_t{2}).set("head_dim", int64_t{4});
  FamilySettings words = base;
  words.set("pos_att_type", std::vector<std::string>{"c2p", "c2c"});
  expect_value_error([&] { deberta.complete(words); },
                     "[DebertaRelative] pos_att_type must hold only 'c2p' and 'p2c', got 'c2c'");
  words.set("pos_att_type", std::string("c2p"));
  expect_error<c10::TypeError>([&] { deberta.complete(words); },
                               "[DebertaRelative] pos_att_type must be a list of strings, got 'c2p'");
  const FamilySettings s = deberta.complete(base);
  EXPECT_EQ(FamilySettings::from_json(s.to_json(), "test").words("pos_att_type"),
            (std::vector<std::string>{"p2c", "c2p"}));
  EXPECT_EQ(s.integer("model_dim"), 8);
}

TEST(FamilyContract, BadSettingsAndStateAreRefusedByName) {
  const FamilyContract& kerple = family_contract("KerpleBias");
  expect_value_error([&] { kerple.complete(FamilySettings().set("num_heads", int64_t{2}).set("rank", int64_t{3})); },
                     "[KerpleBias] unknown setting 'rank'");
  expect_value_error([&] { kerple.complete(FamilySettings()); }, "[KerpleBias] num_heads is required");
  expect_value_error([&] { kerple.complete(FamilySettings().set("num_heads", int64_t{0})); },
                     "[KerpleBias] num_heads must be >= 1, got 0");
  expect_value_error(
      [&] { kerple.complete(FamilySettings().set("num_heads", int64_t{2}).set("kind", std::string("cubic"))); },
      "[KerpleBias] kind must be 'log' or 'power', got 'cubic'");
  expect_error<c10::TypeError>(
      [&] { kerple.complete(FamilySettings().set("num_heads", 2.5)); },
      "[KerpleBias] num_heads must be an int, got 2.5");
  expect_value_error([&] { kerple.complete(FamilySettings().set("num_heads", int64_t{2}).set("eps", 2.0)); },
                     "[KerpleBias] eps must be in (0, 1], got 2");
  const FamilySettings s = kerple.complete(FamilySettings().set("num_heads", int64_t{2}));
  expect_value_error([&] { kerple.expand_state(s, {at::zeros({2})}); },
                     "[KerpleBias] state must hold 2 tensors (r1, r2), got 1");
  expect_value_error([&] { kerple.expand_state(s, {at::zeros({2}), at::zeros({3})}); },
                     "[KerpleBias] r2 must have shape [2], got [3]");
  expect_value_error([] { family_contract("NoSuchBias"); },
                     "[family] unknown module 'NoSuchBias'; known: AlibiBias, AlibiBias2d, ContinuousPositionBias2d, "
                     "CopeBias, DebertaRelative, DynamicPositionBias, FireBias, KerpleBias, LearnableSinusoidalEncoding, LearnedEncoding, "
                     "MultimodalRotaryEmbedding, QueryTemperature, Relative2d, RotaryEmbedding, RotaryEmbeddingAxial, "
                     "ShawRelative, SinusoidalEncoding, SinusoidalEncoding2d, SinusoidalEncoding3d, SinusoidalRelative, "
                     "T5Bias, T5Bias2d, TransformerXLRelative");
}

}  // namespace
}  // namespace posenc::nn::test
