// posenc::hf: configs in the shapes real models publish, each checked for the
// values Hugging Face reads from them; the yarn ramp with beta_fast ==
// beta_slow against a float64 transcription of HF's _compute_yarn_parameters;
// exact error messages. (Module-level checks: tests/python/test_hf_configs.py.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numbers>
#include <stdexcept>
#include <string>
#include <vector>

#include "posenc/hf/hf_config.h"

namespace posenc::hf {
namespace {

using kernels::RopeLayout;
using kernels::RopeType;

void expect_error(const std::function<void()>& f, const std::string& message) {
  try {
    f();
    ADD_FAILURE() << "no exception; expected: " << message;
  } catch (const std::exception& e) {
    EXPECT_EQ(std::string(e.what()), message);
  }
}

TEST(HfConfig, Llama31) {
  const HfScheme s = read_hf_config(R"({"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
    "max_position_embeddings": 131072, "rope_theta": 500000.0, "vocab_size": 128256,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"}})");
  ASSERT_TRUE(s.scheme.rotary);
  const HfRotary& r = *s.scheme.rotary;
  EXPECT_EQ(r.head_dim, 128);
  EXPECT_EQ(r.rotary_dim, 128);
  EXPECT_EQ(r.base, 500000.0);
  EXPECT_EQ(r.layout, RopeLayout::kHalf);
  EXPECT_EQ(r.scaling.type, RopeType::kLlama3);
  EXPECT_EQ(*r.scaling.factor, 8.0);
  EXPECT_EQ(*r.scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(*r.scaling.high_freq_factor, 4.0);
  EXPECT_FALSE(s.scheme.bias || s.scheme.absolute || s.scheme.relative);
}

TEST(HfConfig, TransformersV5RopeParameters) {
  const HfScheme s = read_hf_config(R"({"model_type": "qwen3", "hidden_size": 2048, "num_attention_heads": 16,
    "head_dim": 128, "max_position_embeddings": 40960,
    "rope_parameters": {"rope_type": "yarn", "rope_theta": 1000000.0, "partial_rotary_factor": 0.5, "factor": 4.0,
                        "original_max_position_embeddings": 32768}})");
  const HfRotary& r = *s.scheme.rotary;
  EXPECT_EQ(r.head_dim, 128);
  EXPECT_EQ(r.rotary_dim, 64);
  EXPECT_EQ(r.base, 1000000.0);
  EXPECT_EQ(r.scaling.type, RopeType::kYarn);
  EXPECT_EQ(*r.scaling.original_max_position_embeddings, 32768);
}

TEST(HfConfig, Phi3LongropeTakesTopLevelLengths) {
  std::string shorts, longs;
  for (int i = 0; i < 48; ++i) {
    shorts += std::string(i ? "," : "") + "1.0";
    longs += std::string(i ? "," : "") + std::to_string(1.0 + i * 0.5);
  }
  const HfScheme s = read_hf_config(R"({"model_type": "phi3", "hidden_size": 3072, "num_attention_heads": 32,
    "original_max_position_embeddings": 4096, "max_position_embeddings": 131072, "rope_theta": 10000.0,
    "rope_scaling": {"type": "longrope", "short_factor": [)" + shorts + R"(], "long_factor": [)" + longs + "]}}");
  const HfRotary& r = *s.scheme.rotary;
  EXPECT_EQ(r.rotary_dim, 96);
  EXPECT_EQ(r.scaling.type, RopeType::kLongrope);
  EXPECT_EQ(*r.scaling.original_max_position_embeddings, 4096);
  EXPECT_EQ(*r.scaling.max_position_embeddings, 131072);
  EXPECT_FALSE(r.scaling.factor);
  // HF: sqrt(1 + ln(131072/4096) / ln(4096)).
  const kernels::RopeFrequencies f = kernels::rope_frequencies(96, 10000.0, r.scaling, 5000);
  EXPECT_NEAR(f.attention_factor, std::sqrt(1.0 + std::log(32.0) / std::log(4096.0)), 1e-15);
  EXPECT_NEAR(f.inv_freq[3], 1.0 / ((1.0 + 3 * 0.5) * std::pow(10000.0, 6.0 / 96.0)), 1e-15);
}

// HF _compute_yarn_parameters in float64, written out: the ramp between the
// correction dims of beta_fast and beta_slow, widened by 0.001 when empty.
std::vector<double> hf_yarn(int dim, double base, double factor, double original, double beta_fast,
                            double beta_slow, bool truncate) {
  const auto correction = [&](double rotations) {
    return dim * std::log(original / (rotations * 2 * std::numbers::pi)) / (2 * std::log(base));
  };
  double low = correction(beta_fast), high = correction(beta_slow);
  if (truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, dim - 1.0);
  if (low == high) high += 0.001;
  std::vector<double> out;
  for (int i = 0; i < dim / 2; ++i) {
    const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
    const double extrapolation_factor = 1 - ramp;
    const double pos_freq = std::pow(base, 2.0 * i / dim);
    out.push_back(1 / (factor * pos_freq) * (1 - extrapolation_factor) + 1 / pos_freq * extrapolation_factor);
  }
  return out;
}

TEST(HfConfig, YarnEqualBetasFollowHf) {
  for (const bool truncate : {true, false}) {
    const std::string t = truncate ? "true" : "false";
    const HfScheme s = read_hf_config(R"({"model_type": "qwen2", "hidden_size": 1024, "num_attention_heads": 16,
      "max_position_embeddings": 32768, "rope_theta": 10000.0,
      "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8192,
                       "beta_fast": 8, "beta_slow": 8, "truncate": )" + t + "}}");
    const kernels::RopeFrequencies f = kernels::rope_frequencies(64, 10000.0, s.scheme.rotary->scaling);
    const std::vector<double> ref = hf_yarn(64, 10000.0, 4.0, 8192.0, 8.0, 8.0, truncate);
    ASSERT_EQ(f.inv_freq.size(), ref.size());
    for (size_t i = 0; i < ref.size(); ++i) {
      EXPECT_NEAR(f.inv_freq[i], ref[i], 1e-15 * ref[i]) << "i " << i << " truncate " << truncate;  // 2^-50
    }
    EXPECT_NEAR(f.attention_factor, 0.1 * std::log(4.0) + 1, 1e-15);
  }
  // An integral correction dim makes low == high even when truncated: HF's 0.001 widening.
  const double integral_original = 2 * std::numbers::pi * 8 * std::pow(10000.0, 2.0 * 20 / 64);
  kernels::RopeScaling s;
  s.type = RopeType::kYarn;
  s.factor = 4.0;
  s.original_max_position_embeddings = static_cast<int64_t>(std::llround(integral_original));
  s.beta_fast = 8.0;
  s.beta_slow = 8.0;
  s.truncate = false;
  const kernels::RopeFrequencies f = kernels::rope_frequencies(64, 10000.0, s);
  const std::vector<double> ref =
      hf_yarn(64, 10000.0, 4.0, static_cast<double>(*s.original_max_position_embeddings), 8.0, 8.0, false);
  // 1e-9: the 0.001-wide ramp multiplies the last-bit difference of the correction dim (long double
  // in the kernel, double here) by 1000 and more.
  for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(f.inv_freq[i], ref[i], 1e-9 * ref[i]) << i;
}

TEST(HfConfig, Qwen2VlMropeSection) {
  const HfScheme s = read_hf_config(R"({"model_type": "qwen2_vl", "hidden_size": 3584, "num_attention_heads": 28,
    "rope_theta": 1000000.0, "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
    "vision_config": {"depth": 32}})");
  const HfRotary& r = *s.scheme.rotary;
  EXPECT_EQ(r.head_dim, 128);
  EXPECT_EQ(r.scaling.type, RopeType::kDefault);
  EXPECT_EQ(r.mrope_section, (std::vector<int64_t>{16, 24, 24}));
  EXPECT_FALSE(r.mrope_interleaved);
}

TEST(HfConfig, Qwen3VlInterleavedInTextConfig) {
  const HfScheme s = read_hf_config(R"({"model_type": "qwen3_vl", "text_config": {"model_type": "qwen3_vl_text",
    "hidden_size": 4096, "num_attention_heads": 32, "head_dim": 128, "rope_theta": 5000000,
    "rope_scaling": {"rope_type": "default", "mrope_section": [24, 20, 20], "mrope_interleaved": true}}})");
  EXPECT_EQ(s.scheme.rotary->mrope_section, (std::vector<int64_t>{24, 20, 20}));
  EXPECT_TRUE(s.scheme.rotary->mrope_interleaved);
  EXPECT_EQ(s.scheme.rotary->base, 5000000.0);
}

TEST(HfConfig, DeepSeekV3RopePartInterleaved) {
  const HfScheme s = read_hf_config(R"({"model_type": "deepseek_v3", "hidden_size": 7168,
    "num_attention_heads": 128, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "max_position_embeddings": 163840,
    "rope_theta": 10000, "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0,
    "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096, "type": "yarn"}})");
  const HfRotary& r = *s.scheme.rotary;
  EXPECT_EQ(r.head_dim, 64);
  EXPECT_EQ(r.rotary_dim, 64);
  EXPECT_EQ(r.layout, RopeLayout::kInterleaved);
  EXPECT_EQ(*r.scaling.mscale_all_dim, 1.0);
}

TEST(HfConfig, Gemma3LayerTypes) {
  const HfScheme s = read_hf_config(R"({"model_type": "gemma3_text", "num_hidden_layers": 12, "head_dim": 256,
    "hidden_size": 1152, "num_attention_heads": 4, "rope_theta": 1000000, "rope_local_base_freq": 10000,
    "sliding_window_pattern": 6, "rope_scaling": {"rope_type": "linear", "factor": 8.0}})");
  ASSERT_EQ(s.layer_types.size(), 12u);
  EXPECT_EQ(s.layer_types[5], "full_attention");
  EXPECT_EQ(s.layer_types[4], "sliding_attention");
  EXPECT_EQ(s.for_layer(0).rotary->base, 10000.0);
  EXPECT_EQ(s.for_layer(0).rotary->scaling.type, RopeType::kDefault);
  EXPECT_EQ(s.for_layer(5).rotary->base, 1000000.0);
  EXPECT_EQ(s.for_layer(11).rotary->scaling.type, RopeType::kLinear);
  expect_error([&] { s.for_layer(12); },
               "[hf] config.json: layer 12 is out of range: the config has 12 layers (layer_types)");
}

// Layers without positional encoding are a layer type whose scheme is empty; the others keep their rotary.
TEST(HfConfig, HybridNopeAndPerLayerTheta) {
  const HfScheme cohere2 = read_hf_config(R"({"model_type": "cohere2", "hidden_size": 4096,
    "num_attention_heads": 32, "num_hidden_layers": 8, "rope_theta": 50000, "sliding_window": 4096})");
  ASSERT_EQ(cohere2.layer_types.size(), 8u);
  for (int64_t i = 0; i < 8; ++i) {
    const HfLayerScheme& l = cohere2.for_layer(i);
    EXPECT_EQ(l.rotary.has_value(), i % 4 != 3) << i;
    EXPECT_FALSE(l.bias || l.absolute || l.relative);
  }
  EXPECT_EQ(cohere2.for_layer(0).rotary->layout, posenc::kernels::RopeLayout::kInterleaved);
  EXPECT_EQ(cohere2.for_layer(0).rotary->head_dim, 128);

  const HfScheme modernbert = read_hf_config(R"({"model_type": "modernbert", "hidden_size": 768,
    "num_attention_heads": 12, "num_hidden_layers": 6, "global_rope_theta": 160000.0, "local_rope_theta": 10000.0})");
  EXPECT_EQ(modernbert.layer_types, (std::vector<std::string>{"full_attention", "sliding_attention",
                                                               "sliding_attention", "full_attention",
                                                               "sliding_attention", "sliding_attention"}));
  EXPECT_EQ(modernbert.for_layer(3).rotary->base, 160000.0);
  EXPECT_EQ(modernbert.for_layer(4).rotary->base, 10000.0);
  expect_error([] { read_hf_config(R"({"model_type": "modernbert", "hidden_size": 768, "num_attention_heads": 12,
    "num_hidden_layers": 6, "global_rope_theta": -1})"); },
               "[hf] config.json: global_rope_theta must be > 0, got -1");
}

// Llama 4: RoPE on three layers of four, a query temperature by position on the fourth (Scout's values;
// attn_temperature_tuning is the number 4 in its config, a truthy flag).
TEST(HfConfig, Llama4QueryTemperatureOnNopeLayers) {
  const HfScheme s = read_hf_config(R"({"model_type": "llama4", "text_config": {"model_type": "llama4_text",
    "hidden_size": 5120, "num_attention_heads": 40, "head_dim": 128, "num_hidden_layers": 8,
    "no_rope_layers": [1, 1, 1, 0, 1, 1, 1, 0], "attn_temperature_tuning": 4, "floor_scale": 8192,
    "attn_scale": 0.1, "rope_theta": 500000.0, "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
    "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}})");
  ASSERT_EQ(s.layer_types.size(), 8u);
  EXPECT_EQ(s.layer_types[3], "full_attention");
  EXPECT_EQ(s.layer_types[4], "chunked_attention");
  EXPECT_EQ(s.for_layer(0).rotary->layout, posenc::kernels::RopeLayout::kInterleaved);
  EXPECT_EQ(s.for_layer(0).rotary->scaling.type, RopeType::kLlama3);
  EXPECT_FALSE(s.for_layer(0).query_temperature);
  EXPECT_FALSE(s.for_layer(7).rotary);
  ASSERT_TRUE(s.for_layer(7).query_temperature);
  EXPECT_EQ(s.for_layer(7).query_temperature->floor_scale, 8192.0);
  EXPECT_EQ(s.for_layer(7).query_temperature->attn_scale, 0.1);
  expect_error([] { read_hf_config(R"({"model_type": "llama4_text", "hidden_size": 512, "num_attention_heads": 4,
    "num_hidden_layers": 4, "no_rope_layers": [1, 0]})"); },
               "[hf] config.json: no_rope_layers must have one entry per layer (num_hidden_layers = 4), got 2");
}

TEST(HfConfig, Biases) {
  const HfScheme bloom = read_hf_config(R"({"model_type": "bloom", "n_head": 16, "hidden_size": 1024})");
  EXPECT_EQ(bloom.scheme.bias->kind, HfBias::Kind::kAlibi);
  EXPECT_EQ(bloom.scheme.bias->num_heads, 16);
  EXPECT_TRUE(bloom.scheme.bias->alibi_slopes.empty());
  // MPT, 6 heads: n2 = 8, base_k = k * 8/8, slopes 2^-k, odd-indexed first: 2^-2, 2^-4, 2^-6, 2^-8, 2^-1, 2^-3.
  const HfScheme mpt = read_hf_config(R"({"model_type": "mpt", "n_heads": 6, "d_model": 768,
    "attn_config": {"alibi": true, "alibi_bias_max": 8}})");
  const std::vector<double> want = {0.25, 1.0 / 16, 1.0 / 64, 1.0 / 256, 0.5, 0.125};
  EXPECT_EQ(mpt.scheme.bias->alibi_slopes, want);
  const HfScheme t5 = read_hf_config(R"({"model_type": "t5", "num_heads": 8, "d_model": 512,
    "relative_attention_num_buckets": 32, "relative_attention_max_distance": 128})");
  EXPECT_TRUE(t5.scheme.bias->bidirectional);
  EXPECT_FALSE(t5.for_layer_type("decoder").bias->bidirectional);
  EXPECT_EQ(t5.scheme.bias->max_distance, 128);
}

TEST(HfConfig, Errors) {
  expect_error([] { read_hf_config(R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 1,
    "rope_scaling": {"rope_type": "linear", "factor": -2}})"); },
               "[hf] config.json: rope_scaling.factor must be > 0, got -2");
  expect_error([] { read_hf_config(R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 1,
    "rope_scaling": {"rope_type": "linear", "factor": 2, "foo": 1}})"); },
               "[hf] config.json: rope_scaling.foo is not a rope parameter posenc knows (HF keys: rope_type, "
               "rope_theta, partial_rotary_factor, factor, original_max_position_embeddings, beta_fast, beta_slow, "
               "mscale, mscale_all_dim, truncate, attention_factor, short_factor, long_factor, low_freq_factor, "
               "high_freq_factor, mrope_section, mrope_interleaved)");
  expect_error([] { read_hf_config(R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 1,
    "max_position_embeddings": 4096, "rope_scaling": {"rope_type": "yarn", "factor": 4, "beta_fast": 1,
    "beta_slow": 2}})"); },
               "[hf] config.json: rope_scaling.beta_fast must be >= beta_slow (2), got 1");
  expect_error([] { read_hf_config(R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 1,
    "rope_positions": 3})"); },
               "[hf] config.json: rope_positions is a positional key posenc does not read (model_type 'llama'); "
               "docs/hf_configs.md lists the keys read per family");
  expect_error([] { read_hf_config("{\"model_type\": ", "x/config.json"); },
               "[hf] x/config.json: not valid JSON: parse error at line 1, column 16: syntax error while parsing value - unexpected end of input; "
               "expected '[', '{', or a literal");
}

TEST(HfConfig, MisplacedScalingKeys) {
  EXPECT_EQ(*misplaced_scaling_key("mrope_section"),
            "[rope] mrope_section goes to the multimodal rotary; use posenc.hf.positional_scheme or "
            "apply_mrope(..., mrope_section=...)");
  EXPECT_FALSE(misplaced_scaling_key("factor"));
}

}  // namespace
}  // namespace posenc::hf
