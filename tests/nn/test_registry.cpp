// The encoding registry (encoding_registry.h): every name parses and builds
// the modules its point calls for, the catalog documents every name with the
// defaults of EncodingConfig, and every error message word for word.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "posenc/nn/encoding_registry.h"
#include "posenc/nn/learnable_sinusoidal_encoding.h"
#include "posenc/nn/learned_encoding.h"
#include "posenc/nn/sinusoidal_encoding.h"
#include "reference.h"

namespace posenc::nn::test {
namespace {

// The names the issues promise; the catalog may hold more (every other list
// below is read from the catalog).
const std::vector<std::string> kContractNames{
    "none", "nope", "sinusoidal", "learned", "learnable-sinusoidal", "rope", "p-rope", "rope-xpos", "alibi", "t5",
    "kerple", "kerple-power", "shaw", "shaw-sinusoidal", "shaw-learnable-sinusoidal", "xl"};

std::vector<std::string> catalog_names() {
  std::vector<std::string> out;
  for (const EncodingFamily& f : encoding_families()) out.push_back(f.name);
  return out;
}

std::string known_names() {
  std::string out;
  for (const std::string& name : catalog_names()) out += (out.empty() ? "" : ", ") + name;
  return out;
}

const std::string kKnown = known_names();

// A config every family accepts: a decoder when the family needs one.
EncodingConfig config_for(const EncodingFamily& f) {
  EncodingConfig c;
  c.causal = f.needs.causal;
  return c;
}

// What each name builds: the modules' names() at (input, rotary, bias, relative), "" for none.
struct Built {
  std::string input, rotary, bias, relative;
};

Built built(const std::string& name, const EncodingConfig& config = {}) {
  const EncodingPlan plan = parse_encoding(name);
  const InputEncoding input = make_input_encoding(plan, config);
  const AttentionEncodings e = make_attention_encodings(plan, config);
  return {input ? input->name() : "", e.rotary ? e.rotary->name() : "", e.bias ? e.bias->name() : "",
          e.relative ? e.relative->name() : ""};
}

TEST(EncodingRegistry, CatalogDescribesEveryFamilyOnce) {
  const auto& catalog = encoding_families();
  const std::vector<std::string> names = catalog_names();
  for (const std::string& name : kContractNames) {
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
  }
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size());  // each name once
  // Points in the documented order: none, input, query/key, logit bias, relative vectors.
  for (size_t n = 1; n < catalog.size(); ++n) EXPECT_LE(catalog[n - 1].point, catalog[n].point) << catalog[n].name;
  EXPECT_EQ(catalog.front().name, "none");
  for (const EncodingFamily& f : catalog) {
    SCOPED_TRACE(f.name);
    EXPECT_EQ(f.name.find('+'), std::string::npos);
    EXPECT_FALSE(f.description.empty());
    EXPECT_EQ(f.description.find('\n'), std::string::npos);  // one line
    // A factory exactly for the point it names.
    EXPECT_EQ(static_cast<bool>(f.make_input), f.point == EncodingPoint::kInput);
    EXPECT_EQ(static_cast<bool>(f.make_attention),
              f.point != EncodingPoint::kInput && f.point != EncodingPoint::kNone);
    EXPECT_EQ(find_encoding_family(f.name), &f);
    for (const EncodingParameter& p : f.parameters) {
      SCOPED_TRACE(p.name);
      EXPECT_EQ(p.range_error(p.value(EncodingConfig{})), "");  // the default is admissible
      EXPECT_FALSE(p.meaning.empty());
    }
  }
  EXPECT_EQ(find_encoding_family("foo"), nullptr);
  EXPECT_EQ(std::string(encoding_point_name(EncodingPoint::kLogitBias)), "logit bias");
  // Defaults come from EncodingConfig.
  const std::map<std::string, std::string> defaults{
      {"base", "10000"},      {"max_positions", "512"},  {"init_std", "0.02"},        {"xpos_scale_base", "512"},
      {"max_distance", "16"}, {"t5_num_buckets", "32"}, {"t5_max_distance", "128"}, {"rope_fraction", "0.25"},
      {"input_scale", "1"}};
  for (const auto& [name, text] : defaults) {
    bool found = false;
    for (const EncodingFamily& f : catalog) {
      for (const EncodingParameter& p : f.parameters) {
        if (p.name != name) continue;
        found = true;
        EXPECT_EQ(p.default_text(), text) << name;
      }
    }
    EXPECT_TRUE(found) << name;
  }
  // Training options: each setting once, max_positions (a model size) left out.
  std::vector<std::string> options;
  for (const EncodingParameter* p : encoding_training_options()) options.push_back(p->name);
  EXPECT_EQ(std::set<std::string>(options.begin(), options.end()).size(), options.size());
  EXPECT_EQ(std::count(options.begin(), options.end(), "max_positions"), 0);
  for (const char* name : {"base", "init_std", "rope_fraction", "xpos_scale_base", "t5_num_buckets",
                           "t5_max_distance", "max_distance", "input_scale"}) {
    EXPECT_EQ(std::count(options.begin(), options.end(), name), 1) << name;
  }
  // Per name, the parameters its factory reads.
  auto parameters = [&](const std::string& name) {
    std::vector<std::string> out;
    for (const EncodingParameter& p : find_encoding_family(name)->parameters) out.push_back(p.name);
    return out;
  };
  EXPECT_EQ(parameters("shaw"), (std::vector<std::string>{"max_distance", "init_std"}));
  EXPECT_EQ(parameters("t5"), (std::vector<std::string>{"t5_num_buckets", "t5_max_distance", "init_std"}));
  EXPECT_EQ(parameters("rope-xpos"), (std::vector<std::string>{"base", "xpos_scale_base"}));
  EXPECT_EQ(parameters("p-rope"), (std::vector<std::string>{"base", "rope_fraction"}));
  EXPECT_EQ(parameters("learned"), (std::vector<std::string>{"max_positions", "init_std"}));
  EXPECT_TRUE(parameters("none").empty());
  EXPECT_TRUE(parameters("alibi").empty());
}

// A family's settings live in its descriptor, not in EncodingConfig: the config reads them by name,
// with the declaring family's default, and a name two families share is one setting.
TEST(EncodingRegistry, SettingsAreReadByNameWithTheirFamilysDefault) {
  std::map<std::string, const EncodingParameter*> first;
  for (const EncodingFamily& f : encoding_families()) {
    for (const EncodingParameter& p : f.parameters) {
      SCOPED_TRACE(f.name + "." + p.name);
      const auto [it, fresh] = first.emplace(p.name, &p);
      EXPECT_EQ(find_encoding_parameter(p.name), it->second);
      if (fresh) continue;
      EXPECT_EQ(p.default_value, it->second->default_value);
      EXPECT_EQ(p.integral, it->second->integral);
      EXPECT_EQ(p.lower, it->second->lower);
      EXPECT_EQ(p.upper, it->second->upper);
      EXPECT_EQ(p.model_size, it->second->model_size);
    }
  }
  EncodingConfig c;
  EXPECT_TRUE(c.settings.empty());
  EXPECT_EQ(c.real("base"), 10000.0);
  EXPECT_EQ(c.integer("cope_npos"), 64);
  EXPECT_EQ(c.real("t5_num_buckets"), 32.0);  // an integer reads as a real
  c.set("cope_npos", 15.6).set("base", 2.5);
  EXPECT_EQ(c.integer("cope_npos"), 16);  // rounded
  EXPECT_EQ(c.real("base"), 2.5);
  EXPECT_EQ(c.settings, (std::map<std::string, double, std::less<>>{{"base", 2.5}, {"cope_npos", 16.0}}));
  c.set("max_positions", 40);  // a model size: its field
  EXPECT_EQ(c.max_positions, 40);
  EXPECT_EQ(c.integer("max_positions"), 40);
  EXPECT_EQ(c.settings.count("max_positions"), 0u);
  expect_value_error([&] { c.set("bse", 1.0); }, "[encoding] no family has a setting 'bse'");
  expect_value_error([&] { (void)c.real("bse"); }, "[encoding] no family has a setting 'bse'");
  expect_value_error([&] { (void)c.integer("base"); }, "[encoding] base is a real setting, not an integer");
  EXPECT_EQ(find_encoding_parameter("bse"), nullptr);
}

TEST(EncodingRegistry, EveryNameParsesAndBuildsItsPoint) {
  const std::map<std::string, Built> want{
      {"none", {}},
      {"nope", {}},
      {"sinusoidal", {"SinusoidalEncoding", "", "", ""}},
      {"learned", {"LearnedEncoding", "", "", ""}},
      {"learnable-sinusoidal", {"LearnableSinusoidalEncoding", "", "", ""}},
      {"rope", {"", "RotaryEmbedding", "", ""}},
      {"p-rope", {"", "RotaryEmbedding", "", ""}},
      {"rope-xpos", {"", "RotaryEmbedding", "", ""}},
      {"alibi", {"", "", "AlibiBias", ""}},
      {"t5", {"", "", "T5Bias", ""}},
      {"kerple", {"", "", "KerpleBias", ""}},
      {"kerple-power", {"", "", "KerpleBias", ""}},
      {"shaw", {"", "", "", "ShawRelative"}},
      {"shaw-sinusoidal", {"", "", "", "SinusoidalRelative"}},
      {"shaw-learnable-sinusoidal", {"", "", "", "SinusoidalRelative"}},
      {"xl", {"", "", "", "TransformerXLRelative"}}};
  for (const EncodingFamily& f : encoding_families()) {
    const std::string& name = f.name;
    SCOPED_TRACE(name);
    const EncodingPlan plan = parse_encoding(name);
    EXPECT_EQ(plan.name, name);
    EXPECT_EQ(plan.parts, std::vector<std::string>{name});
    const Built b = built(name, config_for(f));
    // Exactly the slot of its point is filled.
    EXPECT_EQ(!b.input.empty(), f.point == EncodingPoint::kInput);
    EXPECT_EQ(!b.rotary.empty(), f.point == EncodingPoint::kQueryKey);
    EXPECT_EQ(!b.bias.empty(), f.point == EncodingPoint::kLogitBias);
    EXPECT_EQ(!b.relative.empty(), f.point == EncodingPoint::kRelativeVectors);
    if (!want.count(name)) continue;
    const Built& w = want.at(name);
    EXPECT_EQ(b.input, w.input);
    EXPECT_EQ(b.rotary, w.rotary);
    EXPECT_EQ(b.bias, w.bias);
    EXPECT_EQ(b.relative, w.relative);
  }
  const EncodingPlan combo = parse_encoding("learned+rope+t5+shaw");
  EXPECT_EQ(combo.parts, (std::vector<std::string>{"learned", "rope", "t5", "shaw"}));
  const Built b = built("learned+rope+t5+shaw");
  EXPECT_EQ(b.input, "LearnedEncoding");
  EXPECT_EQ(b.rotary, "RotaryEmbedding");
  EXPECT_EQ(b.bias, "T5Bias");
  EXPECT_EQ(b.relative, "ShawRelative");
}

TEST(EncodingRegistry, ModulesTakeTheirSettingsFromTheConfig) {
  EncodingConfig c;
  c.dim = 48;
  c.num_heads = 3;  // head_dim 16
  c.max_positions = 77;
  c.set("base", 500.0);
  c.set("xpos_scale_base", 64.0);
  c.set("max_distance", 5);
  c.set("t5_num_buckets", 16);
  c.set("t5_max_distance", 40);
  c.set("init_std", 0.0);  // zero tables: the init_std reached the module
  c.causal = true;

  const auto learned = std::dynamic_pointer_cast<LearnedEncodingImpl>(make_input_encoding(parse_encoding("learned"), c).ptr());
  ASSERT_TRUE(learned);
  EXPECT_EQ(learned->table().sizes(), (std::vector<int64_t>{77, 48}));
  EXPECT_EQ(learned->table().abs().max().item<double>(), 0.0);
  const auto sinusoidal =
      std::dynamic_pointer_cast<SinusoidalEncodingImpl>(make_input_encoding(parse_encoding("sinusoidal"), c).ptr());
  ASSERT_TRUE(sinusoidal);
  EXPECT_EQ(sinusoidal->options().dim(), 48);
  EXPECT_EQ(sinusoidal->options().base(), 500.0);
  const auto learnable = std::dynamic_pointer_cast<LearnableSinusoidalEncodingImpl>(
      make_input_encoding(parse_encoding("learnable-sinusoidal"), c).ptr());
  ASSERT_TRUE(learnable);
  EXPECT_EQ(learnable->options().base(), 500.0);
  EXPECT_FALSE(make_input_encoding(parse_encoding("rope"), c));

  const auto rope = make_attention_encodings(parse_encoding("rope"), c).rotary;
  EXPECT_EQ(rope->options().head_dim(), 16);
  EXPECT_EQ(rope->options().base(), 500.0);
  EXPECT_EQ(rope->options().xpos_scale_base(), 0.0);
  const auto xpos = make_attention_encodings(parse_encoding("rope-xpos"), c).rotary;
  EXPECT_EQ(xpos->options().xpos_scale_base(), 64.0);

  const auto alibi = std::dynamic_pointer_cast<AlibiBiasImpl>(make_attention_encodings(parse_encoding("alibi"), c).bias.ptr());
  ASSERT_TRUE(alibi);
  EXPECT_EQ(alibi->num_heads(), 3);
  EXPECT_TRUE(alibi->options().causal());
  const auto t5 = std::dynamic_pointer_cast<T5BiasImpl>(make_attention_encodings(parse_encoding("t5"), c).bias.ptr());
  ASSERT_TRUE(t5);
  EXPECT_EQ(t5->table().sizes(), (std::vector<int64_t>{16, 3}));
  EXPECT_EQ(t5->options().max_distance(), 40);
  EXPECT_FALSE(t5->options().bidirectional());  // causal config: the decoder's buckets

  const auto shaw =
      std::dynamic_pointer_cast<ShawRelativeImpl>(make_attention_encodings(parse_encoding("shaw"), c).relative.ptr());
  ASSERT_TRUE(shaw);
  EXPECT_EQ(shaw->key_table().sizes(), (std::vector<int64_t>{11, 16}));  // shared by the heads
  EXPECT_TRUE(shaw->value_table().defined());
  const auto nezha = std::dynamic_pointer_cast<SinusoidalRelativeImpl>(
      make_attention_encodings(parse_encoding("shaw-sinusoidal"), c).relative.ptr());
  ASSERT_TRUE(nezha);
  EXPECT_TRUE(nezha->has_values());
  EXPECT_FALSE(nezha->options().learnable());
  EXPECT_EQ(nezha->options().max_distance(), 5);
  EXPECT_EQ(nezha->options().base(), 500.0);
  EXPECT_TRUE(nezha->named_parameters().is_empty());
  const auto learnable_nezha = std::dynamic_pointer_cast<SinusoidalRelativeImpl>(
      make_attention_encodings(parse_encoding("shaw-learnable-sinusoidal"), c).relative.ptr());
  ASSERT_TRUE(learnable_nezha);
  EXPECT_TRUE(learnable_nezha->options().learnable());
  EXPECT_TRUE(learnable_nezha->has_values());
  const auto xl = std::dynamic_pointer_cast<TransformerXLRelativeImpl>(
      make_attention_encodings(parse_encoding("xl"), c).relative.ptr());
  ASSERT_TRUE(xl);
  EXPECT_EQ(xl->u().sizes(), (std::vector<int64_t>{3, 16}));
  EXPECT_EQ(xl->options().base(), 500.0);

  // Encoder config: bidirectional T5, non-causal ALiBi.
  c.causal = false;
  EXPECT_TRUE(std::dynamic_pointer_cast<T5BiasImpl>(make_attention_encodings(parse_encoding("t5"), c).bias.ptr())
                  ->options()
                  .bidirectional());
  EXPECT_FALSE(std::dynamic_pointer_cast<AlibiBiasImpl>(make_attention_encodings(parse_encoding("alibi"), c).bias.ptr())
                   ->options()
                   .causal());
}

TEST(EncodingRegistry, EachCallBuildsFreshModules) {
  // One T5 table per layer: two calls never share a parameter.
  const EncodingPlan plan = parse_encoding("t5+shaw");
  const EncodingConfig c;
  const AttentionEncodings a = make_attention_encodings(plan, c), b = make_attention_encodings(plan, c);
  EXPECT_NE(a.bias.ptr(), b.bias.ptr());
  EXPECT_NE(a.relative.ptr(), b.relative.ptr());
}

TEST(EncodingRegistry, ParseErrors) {
  expect_value_error([] { parse_encoding("foo"); },
                     "[encoding] unknown encoding 'foo'; known: " + kKnown + " (combine with '+')");
  expect_value_error([] { parse_encoding("learned+Rope"); },
                     "[encoding] unknown encoding 'Rope'; known: " + kKnown + " (combine with '+')");
  expect_value_error([] { parse_encoding("alibi+t5"); },
                     "[encoding] 'alibi+t5' has two logit bias encodings (alibi, t5); use at most one per point");
  expect_value_error([] { parse_encoding("learned+sinusoidal"); },
                     "[encoding] 'learned+sinusoidal' has two input encodings (learned, sinusoidal); use at most one "
                     "per point");
  expect_value_error([] { parse_encoding("rope+shaw+rope-xpos"); },
                     "[encoding] 'rope+shaw+rope-xpos' has two query/key encodings (rope, rope-xpos); use at most one "
                     "per point");
  expect_value_error([] { parse_encoding("xl+shaw"); },
                     "[encoding] 'xl+shaw' has two relative vectors encodings (xl, shaw); use at most one per point");
  expect_value_error([] { parse_encoding("none+rope"); }, "[encoding] 'none' cannot be combined, got 'none+rope'");
  expect_value_error([] { parse_encoding("rope+none"); }, "[encoding] 'none' cannot be combined, got 'rope+none'");
  expect_value_error([] { parse_encoding("rope+"); }, "[encoding] empty part in 'rope+'");
  expect_value_error([] { parse_encoding("+rope"); }, "[encoding] empty part in '+rope'");
  expect_value_error([] { parse_encoding("rope++t5"); }, "[encoding] empty part in 'rope++t5'");
  expect_value_error([] { parse_encoding(""); }, "[encoding] empty part in ''");
}

// p-rope (Barbero et al. 2024): the pairs i < floor(p head_dim / 2) turn by p_t base^(-2i/head_dim) in the
// half layout (channels i and i + head_dim/2), the others stay as they are; p = 1 is plain rope.
TEST(EncodingRegistry, PRopeTurnsOnlyTheFastestPairs) {
  EncodingConfig c;
  c.dim = 16, c.num_heads = 2, c.set("rope_fraction", 0.5);  // head_dim 8: pairs 0, 1 turn; 2, 3 stay
  AttentionEncodings e = make_attention_encodings(parse_encoding("p-rope"), c);
  const int64_t T = 6, D = 8;
  const at::Tensor q = at::randn({1, 2, T, D}, at::kDouble), k = at::randn({1, 2, T, D}, at::kDouble);
  const at::Tensor positions = at::arange(T, at::kLong) * 1000;  // far positions: angles of thousands of radians
  const auto [qr, kr] = e.rotary->forward(q, k, positions);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = 0; i < D / 2; ++i) {
      const double angle = i < 2 ? static_cast<double>(t * 1000) * std::pow(10000.0, -2.0 * i / D) : 0.0;
      const double x = q[0][1][t][i].item<double>(), y = q[0][1][t][i + D / 2].item<double>();
      EXPECT_NEAR(qr[0][1][t][i].item<double>(), x * std::cos(angle) - y * std::sin(angle), 1e-12);
      EXPECT_NEAR(qr[0][1][t][i + D / 2].item<double>(), y * std::cos(angle) + x * std::sin(angle), 1e-12);
      if (i >= 2) {
        EXPECT_EQ(kr[0][1][t][i].item<double>(), k[0][1][t][i].item<double>());  // untouched, exactly
      }
    }
  }
  c.set("rope_fraction", 1.0);
  const auto [q1, k1] = make_attention_encodings(parse_encoding("p-rope"), c).rotary->forward(q, k, positions);
  const auto [q2, k2] = make_attention_encodings(parse_encoding("rope"), c).rotary->forward(q, k, positions);
  EXPECT_TRUE(at::allclose(q1, q2, 0, 1e-15) && at::allclose(k1, k2, 0, 1e-15));
}

// Every parameter's range is enforced by the registry, with the descriptor's words.
TEST(EncodingRegistry, ParametersOutOfRangeAreRefused) {
  for (const EncodingFamily& f : encoding_families()) {
    for (const EncodingParameter& p : f.parameters) {
      SCOPED_TRACE(f.name + " " + p.name);
      EncodingConfig c = config_for(f);
      const double bad = p.lower - 1.0;  // below an open or closed lower bound
      p.set(c, bad);
      std::ostringstream got;
      got << bad;
      std::string message;
      try {
        validate_encoding(parse_encoding(f.name), c);
      } catch (const c10::ValueError& e) {
        message = e.what_without_backtrace();
      }
      EXPECT_EQ(message.rfind("[encoding] " + p.name + " must be ", 0), 0u) << message;
      EXPECT_NE(message.find(", got " + got.str()), std::string::npos) << message;
    }
  }
  EncodingConfig c;
  c.set("t5_num_buckets", 1);
  expect_value_error([&] { validate_encoding(parse_encoding("t5"), c); },
                     "[encoding] t5_num_buckets must be >= 2, got 1");
  c = EncodingConfig{};
  c.set("base", -1);
  expect_value_error([&] { validate_encoding(parse_encoding("rope"), c); },
                     "[encoding] base must be finite and > 0, got -1");
  c.set("base", 10000);
  c.set("init_std", -0.5);
  expect_value_error([&] { validate_encoding(parse_encoding("shaw"), c); },
                     "[encoding] init_std must be finite and >= 0, got -0.5");
  EXPECT_NO_THROW(validate_encoding(parse_encoding("rope"), c));  // rope does not read init_std
}

// Per-layer encodings (Gemma 3's local and global layers): a plan of inner points and its settings.
TEST(EncodingRegistry, LayerEncodingsReplaceTheInnerPointsWithTheirSettings) {
  const LayerEncoding global = parse_layer_encoding("rope:base=1000000");
  EXPECT_EQ(global.plan.parts, std::vector<std::string>{"rope"});
  ASSERT_EQ(global.settings.size(), 1u);
  EXPECT_EQ(global.settings[0].first->name, "base");
  EXPECT_EQ(global.settings[0].second, 1e6);
  const EncodingConfig c = layer_config(EncodingConfig{}, global);
  EXPECT_EQ(c.real("base"), 1e6);
  EXPECT_EQ(c.real("init_std"), EncodingConfig{}.real("init_std"));  // the rest untouched
  EXPECT_EQ(make_attention_encodings(global.plan, c).rotary->options().base(), 1e6);
  // The model's input point stays; its inner points give way to the layer's.
  EXPECT_EQ(layer_plan(parse_encoding("learned+rope+t5"), parse_layer_encoding("alibi")).parts,
            (std::vector<std::string>{"learned", "alibi"}));
  EXPECT_EQ(layer_plan(parse_encoding("rope"), parse_layer_encoding("none")).parts, std::vector<std::string>{"none"});
  const LayerEncoding two = parse_layer_encoding("rope+t5:base=500:t5_num_buckets=16");
  EXPECT_EQ(layer_config(EncodingConfig{}, two).integer("t5_num_buckets"), 16);
  EXPECT_EQ(layer_config(EncodingConfig{}, two).real("base"), 500.0);

  expect_value_error([] { parse_layer_encoding("rope:foo=1"); },
                     "[encoding] layer encoding 'rope:foo=1': rope has no setting 'foo' (its settings: base)");
  expect_value_error([] { parse_layer_encoding("alibi:base=1"); },
                     "[encoding] layer encoding 'alibi:base=1': alibi has no setting 'base' (its settings: none)");
  expect_value_error([] { parse_layer_encoding("rope:base"); },
                     "[encoding] layer encoding 'rope:base': expected key=value, got 'base'");
  expect_value_error([] { parse_layer_encoding("rope:base=1e4x"); },
                     "[encoding] layer encoding 'rope:base=1e4x': base must be a number, got '1e4x'");
  expect_value_error([] { parse_layer_encoding("sinusoidal+rope"); },
                     "[encoding] layer encoding 'sinusoidal+rope': sinusoidal is an input encoding (added once, "
                     "before the first layer); give it in the model's encoding");
  expect_value_error([] { parse_layer_encoding("foo"); },
                     "[encoding] unknown encoding 'foo'; known: " + kKnown + " (combine with '+')");
}

TEST(EncodingRegistry, SettingsByName) {
  EncodingConfig c;
  apply_encoding_settings(c, {"input_scale=0.5", "t5_num_buckets=16", "base=5e5"});
  EXPECT_EQ(c.real("input_scale"), 0.5);
  EXPECT_EQ(c.integer("t5_num_buckets"), 16);
  EXPECT_EQ(c.real("base"), 5e5);
  const auto table = std::dynamic_pointer_cast<SinusoidalEncodingImpl>(
      make_input_encoding(parse_encoding("sinusoidal"), c).ptr());
  ASSERT_TRUE(table);
  EXPECT_EQ(table->options().scale(), 0.5);  // the amplitude reached the module
  std::string known;
  for (const EncodingParameter* p : encoding_training_options()) known += (known.empty() ? "" : ", ") + p->name;
  expect_value_error([&] { apply_encoding_settings(c, {"foo=1"}); },
                     "[encoding] unknown setting 'foo'; known: " + known);
  expect_value_error([&] { apply_encoding_settings(c, {"base"}); }, "[encoding] expected key=value, got 'base'");
  expect_value_error([&] { apply_encoding_settings(c, {"base=big"}); },
                     "[encoding] base must be a number, got 'big'");
  c.set("input_scale", 0);
  expect_value_error([&] { validate_encoding(parse_encoding("sinusoidal"), c); },
                     "[encoding] input_scale must be finite and > 0, got 0");
}

TEST(EncodingRegistry, ValidateErrors) {
  EncodingConfig c;
  c.dim = 10;
  c.num_heads = 4;
  expect_value_error([&] { validate_encoding(parse_encoding("none"), c); },
                     "[encoding] dim must be divisible by num_heads, got dim 10 and num_heads 4");
  {
    EncodingConfig encoder;  // causal false
    expect_value_error([&] { make_attention_encodings(parse_encoding("nope"), encoder); },
                       "[encoding] nope needs a causal model (a decoder): an encoder sees a bag of tokens; use 'none' "
                       "for that baseline");
    encoder.causal = true;
    EXPECT_FALSE(make_attention_encodings(parse_encoding("nope"), encoder).bias);
    expect_value_error([] { parse_encoding("nope+rope"); }, "[encoding] 'nope' cannot be combined, got 'nope+rope'");
  }
  c.dim = 20;  // head_dim 5
  expect_value_error([&] { validate_encoding(parse_encoding("learned+rope"), c); },
                     "[encoding] rope needs an even head_dim, got 5");
  expect_value_error([&] { make_attention_encodings(parse_encoding("rope-xpos"), c); },
                     "[encoding] rope-xpos needs an even head_dim, got 5");
  expect_value_error([&] { make_attention_encodings(parse_encoding("shaw-sinusoidal"), c); },
                     "[encoding] shaw-sinusoidal needs an even head_dim, got 5");
  expect_value_error([&] { make_attention_encodings(parse_encoding("p-rope"), c); },
                     "[encoding] p-rope needs an even head_dim, got 5");
  {
    EncodingConfig p;
    for (const double bad : {0.0, -0.5, 1.5}) {
      p.set("rope_fraction", bad);
      std::ostringstream text;
      text << bad;
      expect_value_error([&] { make_attention_encodings(parse_encoding("p-rope"), p); },
                         "[encoding] rope_fraction must be in (0, 1], got " + text.str());
    }
  }
  EXPECT_NO_THROW(validate_encoding(parse_encoding("shaw+alibi+learned"), c));  // odd head_dim is fine there
  c.dim = 21;
  c.num_heads = 3;  // head_dim 7, odd dim
  expect_value_error([&] { make_input_encoding(parse_encoding("sinusoidal"), c); },
                     "[encoding] sinusoidal needs an even dim, got 21");
  expect_value_error([&] { validate_encoding(parse_encoding("xl"), c); }, "[encoding] xl needs an even dim, got 21");
  c.num_heads = 0;
  expect_value_error([&] { validate_encoding(parse_encoding("none"), c); },
                     "[encoding] num_heads must be >= 1, got 0");
  // A plan not made by parse_encoding.
  expect_value_error([&] { validate_encoding(EncodingPlan{"bar", {"bar"}}, EncodingConfig{}); },
                     "[encoding] unknown encoding 'bar'; known: " + kKnown + " (combine with '+')");
  // The modules' own checks reach through, in their words.
  EncodingConfig bad;
  bad.set("t5_num_buckets", 3);
  expect_value_error([&] { make_attention_encodings(parse_encoding("t5"), bad); },
                     "[T5Bias] num_buckets must be even when bidirectional (half per direction), got 3");
  {
    EncodingConfig e;
    e.causal = true;
    e.set("cope_npos", 0);
    expect_value_error([&] { make_attention_encodings(parse_encoding("cope"), e); },
                       "[encoding] cope_npos must be >= 1, got 0");
    e.set("cope_npos", 16);  // reaches the module: its table has 16 rows
    const AttentionEncodings slots = make_attention_encodings(parse_encoding("cope"), e);
    EXPECT_EQ(slots.bias->named_parameters()["e"].size(0), 16);
    e.set("deberta_position_buckets", -1);
    expect_value_error([&] { make_attention_encodings(parse_encoding("deberta"), e); },
                       "[encoding] deberta_position_buckets must be >= 0, got -1");
    e.set("deberta_position_buckets", 600);
    expect_value_error([&] { make_attention_encodings(parse_encoding("deberta"), e); },
                       "[DebertaRelative] position_buckets must be <= max_relative_positions, got 600 > 512");
    e.set("deberta_max_relative_positions", 0);
    expect_value_error([&] { make_attention_encodings(parse_encoding("deberta"), e); },
                       "[encoding] deberta_max_relative_positions must be >= 1, got 0");
  }
}

}  // namespace
}  // namespace posenc::nn::test
