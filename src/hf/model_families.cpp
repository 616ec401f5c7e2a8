#include "model_families.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <set>

#include "family_support.h"
#include "hybrid_families.h"
#include "rotary_config.h"

namespace posenc::hf::detail {
namespace {

// Top-level keys that carry position information and that posenc reads in
// some family; any other key whose name says "position" is refused, named.
const std::set<std::string, std::less<>> kKnownPositionalKeys = {
    "max_position_embeddings", "original_max_position_embeddings", "rope_theta", "rope_scaling",
    "rope_parameters", "partial_rotary_factor", "rotary_pct", "rotary_emb_base", "rotary_dim",
    "rope_local_base_freq", "qk_rope_head_dim", "rope_interleave", "alibi", "position_embedding_type",
    "n_positions", "relative_attention_num_buckets", "relative_attention_max_distance", "global_rope_theta",
    "local_rope_theta", "no_rope_layers", "no_rope_layer_interval"};

constexpr std::array<std::string_view, 6> kPositionalWords = {"rope", "rotary", "position", "alibi",
                                                              "relative_attention", "bucket"};

void refuse_unknown_positional_keys(const Fields& f, const std::string& model_type) {
  for (const auto& [key, value] : f.json().items()) {
    if (kKnownPositionalKeys.contains(key)) continue;
    for (std::string_view word : kPositionalWords) {
      if (key.find(word) != std::string::npos) {
        f.fail(key, "is a positional key posenc does not read (model_type '", model_type,
               "'); docs/hf_configs.md lists the keys read per family");
      }
    }
  }
}

// Llama, Mistral, Qwen, Phi, DeepSeek, gpt-oss, Gemma 1/2, and v5 configs keyed by layer type.
void read_rotary_model(const Fields& f, const std::string& model_type, HfScheme& out) {
  RotaryContext ctx = base_context(f, 10000.0);
  const bool deepseek = model_type == "deepseek_v2" || model_type == "deepseek_v3";
  if (deepseek) {
    // MLA: RoPE acts on the qk_rope_head_dim channels only, interleaved pairs
    // (V2 multiplies complex numbers; V3 unless rope_interleave is false).
    ctx.head_dim = required(f, {"qk_rope_head_dim"}, model_type);
    const bool interleave = model_type == "deepseek_v2" || f.boolean("rope_interleave").value_or(true);
    ctx.layout = interleave ? kernels::RopeLayout::kInterleaved : kernels::RopeLayout::kHalf;
  } else {
    ctx.head_dim = head_dim_of(f, model_type, {"hidden_size"}, {"num_attention_heads"});
    if (model_type.starts_with("gemma") && !f.has("head_dim")) ctx.head_dim = 256;  // HF's default for Gemma
  }
  read_with_context(f, ctx, out);
}

// Families that read like Llama but for the defaults of their HF config class and their rotation layout.
struct RotaryDefaults {
  std::string_view model_type;
  double theta = 10000.0;
  std::optional<double> partial = std::nullopt;    // partial_rotary_factor when the config has none
  std::optional<int64_t> head_dim = std::nullopt;  // head_dim when the config has none (else hidden / heads)
  kernels::RopeLayout layout = kernels::RopeLayout::kHalf;
};

constexpr kernels::RopeLayout kPairs = kernels::RopeLayout::kInterleaved;
constexpr RotaryDefaults kRotaryDefaults[] = {
    {.model_type = "olmo"},
    {.model_type = "olmo2"},
    {.model_type = "granite"},
    {.model_type = "granitemoe"},
    {.model_type = "starcoder2"},
    {.model_type = "stablelm", .partial = 0.25},
    {.model_type = "persimmon", .theta = 25000.0, .partial = 0.5},
    {.model_type = "nemotron", .partial = 0.5},
    {.model_type = "glm", .partial = 0.5, .head_dim = 128, .layout = kPairs},  // the first R channels, in pairs
    {.model_type = "glm4", .partial = 0.5, .head_dim = 128, .layout = kPairs},
    {.model_type = "cohere", .theta = 500000.0, .layout = kPairs},  // v5's default_theta (v4's was 10000)
};

void read_with_defaults(const Fields& f, const std::string& model_type, HfScheme& out) {
  const RotaryDefaults* d = nullptr;
  for (const RotaryDefaults& each : kRotaryDefaults) {
    if (each.model_type == model_type) d = &each;
  }
  RotaryContext ctx = base_context(f, d->theta);
  if (!ctx.partial) ctx.partial = d->partial;
  const bool given = f.has("head_dim") || !d->head_dim;
  ctx.head_dim = given ? head_dim_of(f, model_type, {"hidden_size"}, {"num_attention_heads"}) : *d->head_dim;
  ctx.layout = d->layout;
  read_with_context(f, ctx, out);
}

// Gemma 3 (v4): full-attention layers use rope_theta and rope_scaling,
// sliding-window layers rope_local_base_freq unscaled; layer i is sliding
// unless (i + 1) % sliding_window_pattern == 0 when layer_types is absent.
void read_gemma3(const Fields& f, const std::string& model_type, HfScheme& out) {
  const std::optional<Fields> dict = rope_dict(f);
  std::vector<std::string> types = layer_types_of(f);
  if (types.empty()) {
    const int64_t layers = required(f, {"num_hidden_layers"}, model_type);
    const int64_t pattern = positive(f, {"sliding_window_pattern"}).value_or(6);
    types = periodic_layer_types(layers, pattern, 1, "full_attention", "sliding_attention");
  }
  if (dict && keyed_by_layer_type(*dict, types)) {
    read_rotary_model(f, model_type, out);
    return;
  }
  RotaryContext ctx = base_context(f, 1000000.0);
  ctx.head_dim = positive(f, {"head_dim"}).value_or(256);
  const double local = f.number("rope_local_base_freq").value_or(10000.0);
  set_layer_types(out, types, [&](const std::string& t) {
    if (t == "sliding_attention") {
      RotaryContext c = ctx;
      c.base = local;
      c.base_key = "rope_local_base_freq";
      return HfLayerScheme{read_rotary(c, std::nullopt), {}, {}, {}, {}};
    }
    if (t != "full_attention") f.fail("layer_types", "must hold sliding_attention or full_attention, got '", t, "'");
    return HfLayerScheme{read_rotary(ctx, dict), {}, {}, {}, {}};
  }, f);
}

// GPT-NeoX (Pythia): rotary_pct of the head at rotary_emb_base (v5: partial_rotary_factor, rope_theta).
void read_gpt_neox(const Fields& f, const std::string& model_type, HfScheme& out) {
  RotaryContext ctx = base_context(f, 10000.0);
  if (!f.has("rope_theta")) {
    ctx.base = f.number("rotary_emb_base").value_or(10000.0);
    ctx.base_key = "rotary_emb_base";
  }
  if (!ctx.partial) {
    ctx.partial = f.number("rotary_pct").value_or(0.25);
    ctx.partial_key = "rotary_pct";
  }
  ctx.head_dim = head_dim_of(f, model_type, {"hidden_size"}, {"num_attention_heads"});
  out.scheme.rotary = read_rotary(ctx, rope_dict(f));
}

// GPT-J: the first rotary_dim channels (null: all), interleaved pairs (rotate_every_two).
void read_gptj(const Fields& f, const std::string& model_type, HfScheme& out) {
  RotaryContext ctx = base_context(f, 10000.0);
  ctx.head_dim = head_dim_of(f, model_type, {"n_embd", "hidden_size"}, {"n_head", "num_attention_heads"});
  ctx.rotary_dim = positive(f, {"rotary_dim"});
  if (ctx.rotary_dim && *ctx.rotary_dim > ctx.head_dim) {
    f.fail("rotary_dim", "must be at most the head dimension (", ctx.head_dim, "), got ", *ctx.rotary_dim);
  }
  ctx.layout = kernels::RopeLayout::kInterleaved;
  out.scheme.rotary = read_rotary(ctx, rope_dict(f));
}

HfBias alibi(int64_t heads) {
  HfBias b;
  b.kind = HfBias::Kind::kAlibi;
  b.num_heads = heads;
  return b;
}

// Falcon: ALiBi when `alibi` is true, else RoPE over the whole head.
void read_falcon(const Fields& f, const std::string& model_type, HfScheme& out) {
  const int64_t heads = required(f, {"num_attention_heads", "n_head"}, model_type);
  if (f.boolean("alibi").value_or(false)) {
    out.scheme.bias = alibi(heads);
    return;
  }
  RotaryContext ctx = base_context(f, 10000.0);
  ctx.head_dim = head_dim_of(f, model_type, {"hidden_size"}, {"num_attention_heads", "n_head"});
  out.scheme.rotary = read_rotary(ctx, rope_dict(f));
}

void read_bloom(const Fields& f, const std::string& model_type, HfScheme& out) {
  out.scheme.bias = alibi(required(f, {"n_head", "num_attention_heads"}, model_type));
}

// MPT (HF build_mpt_alibi_tensor): n2 = 2^ceil(log2 H), slope_k = 2^(-k * max / n2),
// k = 1 .. n2; for H < n2 the odd-indexed slopes first, then the even, cut to H.
void read_mpt(const Fields& f, const std::string& model_type, HfScheme& out) {
  const int64_t heads = required(f, {"n_heads"}, model_type);
  const std::optional<Fields> attn = f.object("attn_config");
  bool on = true;
  double max_bias = 8.0;
  if (attn) {
    on = attn->boolean("alibi").value_or(true);
    max_bias = attn->number("alibi_bias_max").value_or(8.0);
    if (attn->boolean("rope").value_or(false)) {
      attn->fail("rope", "is true: HF's MPT has no rotary embedding (it ignores the key); posenc refuses rather "
                         "than guess");
    }
    if (!(std::isfinite(max_bias) && max_bias > 0)) attn->fail("alibi_bias_max", "must be > 0, got ", max_bias);
  }
  if (!on) return;  // HF's MPT then has no positional information at all
  int64_t n2 = 1;
  while (n2 < heads) n2 *= 2;
  std::vector<double> slopes;
  for (int64_t k = 1; k <= n2; ++k) {
    slopes.push_back(std::exp2(-static_cast<double>(k) * (max_bias / static_cast<double>(n2))));
  }
  if (n2 != heads) {
    std::vector<double> mixed;
    for (int64_t k = 1; k < n2; k += 2) mixed.push_back(slopes[static_cast<size_t>(k)]);
    for (int64_t k = 0; k < n2; k += 2) mixed.push_back(slopes[static_cast<size_t>(k)]);
    mixed.resize(static_cast<size_t>(heads));
    slopes = mixed;
  }
  HfBias b = alibi(heads);
  b.alibi_bias_max = max_bias;
  b.alibi_slopes = slopes;
  out.scheme.bias = b;
}

// T5: bucketed relative bias; the encoder's is bidirectional, the decoder's not.
void read_t5(const Fields& f, const std::string& model_type, HfScheme& out) {
  HfBias b;
  b.kind = HfBias::Kind::kT5;
  b.num_heads = required(f, {"num_heads"}, model_type);
  b.num_buckets = positive(f, {"relative_attention_num_buckets"}).value_or(32);
  b.max_distance = positive(f, {"relative_attention_max_distance"}).value_or(128);
  b.bidirectional = true;
  out.scheme.bias = b;
  out.by_layer_type.emplace("encoder", out.scheme);
  b.bidirectional = false;
  out.by_layer_type.emplace("decoder", HfLayerScheme{{}, b, {}, {}, {}});
}

// BERT and its descendants: position_embedding_type absolute (a learned
// table added to the embeddings), relative_key or relative_key_query
// (Shaw et al. over offsets -(max-1) .. max-1, per head_dim).
void read_bert(const Fields& f, const std::string& model_type, HfScheme& out) {
  const std::string type = f.string("position_embedding_type").value_or("absolute");
  const int64_t max_positions = positive(f, {"max_position_embeddings"}).value_or(512);
  const int64_t hidden = positive(f, {"hidden_size"}).value_or(768);
  const int64_t heads = positive(f, {"num_attention_heads"}).value_or(12);
  if (type == "absolute") {
    out.scheme.absolute = HfAbsolute{HfAbsolute::Kind::kLearned, max_positions, hidden};
    return;
  }
  if (type != "relative_key" && type != "relative_key_query") {
    f.fail("position_embedding_type", "must be absolute, relative_key or relative_key_query for model_type '",
           model_type, "', got '", type, "'");
  }
  HfRelative r;
  r.kind = type == "relative_key" ? HfRelative::Kind::kKey : HfRelative::Kind::kKeyQuery;
  r.max_position_embeddings = max_positions;
  r.head_dim = hidden / heads;
  r.num_heads = heads;
  out.scheme.relative = r;
}

void read_gpt2(const Fields& f, const std::string&, HfScheme& out) {
  out.scheme.absolute = HfAbsolute{HfAbsolute::Kind::kLearned, positive(f, {"n_positions"}).value_or(1024),
                                   positive(f, {"n_embd"}).value_or(768)};
}

using Reader = void (*)(const Fields&, const std::string&, HfScheme&);

struct Family {
  std::string_view model_type;
  Reader read;
};

constexpr Family kFamilies[] = {
    {"llama", read_rotary_model},       {"mistral", read_rotary_model},     {"mixtral", read_rotary_model},
    {"qwen2", read_rotary_model},       {"qwen2_moe", read_rotary_model},   {"qwen3", read_rotary_model},
    {"qwen3_moe", read_rotary_model},   {"qwen2_vl", read_rotary_model},    {"qwen2_5_vl", read_rotary_model},
    {"qwen2_vl_text", read_rotary_model}, {"qwen2_5_vl_text", read_rotary_model}, {"qwen3_vl", read_rotary_model},
    {"qwen3_vl_text", read_rotary_model}, {"phi", read_rotary_model},   {"phi3", read_rotary_model},
    {"phimoe", read_rotary_model},      {"deepseek_v2", read_rotary_model}, {"deepseek_v3", read_rotary_model},
    {"gpt_oss", read_rotary_model},     {"gemma", read_rotary_model},       {"gemma2", read_rotary_model},
    {"gemma3", read_gemma3},            {"gemma3_text", read_gemma3},       {"gemma4", read_rotary_model},
    {"gemma4_text", read_rotary_model}, {"gpt_neox", read_gpt_neox},        {"gptj", read_gptj},
    {"falcon", read_falcon},            {"RefinedWeb", read_falcon},        {"RefinedWebModel", read_falcon},
    {"bloom", read_bloom},              {"mpt", read_mpt},                  {"t5", read_t5},
    {"mt5", read_t5},                   {"umt5", read_t5},                  {"bert", read_bert},
    {"roberta", read_bert},             {"xlm-roberta", read_bert},         {"electra", read_bert},
    {"gpt2", read_gpt2},
    {"olmo", read_with_defaults},       {"olmo2", read_with_defaults},      {"granite", read_with_defaults},
    {"granitemoe", read_with_defaults}, {"starcoder2", read_with_defaults}, {"stablelm", read_with_defaults},
    {"persimmon", read_with_defaults},  {"nemotron", read_with_defaults},   {"glm", read_with_defaults},
    {"glm4", read_with_defaults},       {"cohere", read_with_defaults},     {"cohere2", read_cohere2},
    {"exaone4", read_exaone4},          {"olmo3", read_olmo3},              {"smollm3", read_smollm3},
    {"modernbert", read_modernbert},    {"llama4", read_llama4},            {"llama4_text", read_llama4},
};

}  // namespace

std::string known_model_types() {
  std::string out;
  for (const Family& f : kFamilies) {
    if (!out.empty()) out += ", ";
    out += f.model_type;
  }
  return out;
}

void read_model_family(const Fields& text, const std::string& model_type, HfScheme& out) {
  for (const Family& family : kFamilies) {
    if (family.model_type == model_type) {
      refuse_unknown_positional_keys(text, model_type);
      family.read(text, model_type, out);
      return;
    }
  }
  refuse_config(text.source(), "model_type '", model_type, "' is not one posenc reads (", known_model_types(),
                "); docs/hf_configs.md says what is read for each");
}

}  // namespace posenc::hf::detail
