// Encodings by name (encoding_registry.h): one catalog entry per single name
// (its point, paper and defaults), a parser for "A+B" plans, and the
// factories that turn a plan and a config into modules. Adding a family
// means one catalog row and one case in a factory.
#include "posenc/nn/encoding_registry.h"

#include <c10/util/Exception.h>

#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/nn/attention_biases.h"
#include "posenc/nn/kerple_bias.h"
#include "posenc/nn/learnable_sinusoidal_encoding.h"
#include "posenc/nn/learned_encoding.h"
#include "posenc/nn/relative_encodings.h"
#include "posenc/nn/rotary_embedding.h"
#include "posenc/nn/sinusoidal_encoding.h"

namespace posenc::nn {
namespace {

constexpr const char* kOp = "encoding";

// A number as the catalog prints defaults: 10000, 0.02.
template <class T>
std::string num(T value) {
  std::ostringstream s;
  s << value;
  return s.str();
}

std::vector<EncodingInfo> build_catalog() {
  const EncodingConfig d;  // the defaults
  const std::pair<std::string, std::string> init{"init_std", num(d.init_std) + " (N(0, init_std^2) initialisation)"};
  const std::pair<std::string, std::string> clip{
      "max_distance", num(d.max_distance) + " (K: offsets clipped to [-K, K])"};
  return {
      {"none", "none", "no position information: attention sees a bag of tokens", {}},
      {"nope", "none",
       "no positional encoding in a causal decoder, where the mask alone carries position (Kazemnejad et al. 2023); "
       "decoders only",
       {}},
      {"sinusoidal", "input",
       "fixed sinusoids added to the token embeddings, interleaved (sin, cos) (Vaswani et al. 2017)",
       {{"base", num(d.base) + " (frequencies base^(-2i/dim))"}}},
      {"learned", "input", "a trainable table of one vector per position, added to the embeddings (BERT, GPT-2)",
       {{"max_positions", num(d.max_positions) + " (rows; the model's max_positions, positions beyond it are an error)"},
        init}},
      {"learnable-sinusoidal", "input",
       "sinusoids with trainable frequencies, initialised to the fixed ones (Wang et al., ICLR 2021)",
       {{"base", num(d.base) + " (initial frequencies base^(-2i/dim))"}}},
      {"rope", "query/key",
       "rotary embedding of q and k, half (GPT-NeoX) layout, full head_dim (Su et al. 2021, RoFormer)",
       {{"base", num(d.base) + " (frequencies base^(-2i/head_dim))"}}},
      {"p-rope", "query/key",
       "RoPE on the fastest share p of its frequency pairs only; the slowest pairs do not turn and carry content "
       "(Barbero et al. 2024, p-RoPE; Gemma's proportional RoPE)",
       {{"base", num(d.base) + " (frequencies base^(-2i/head_dim))"},
        {"rope_fraction", num(d.rope_fraction) + " (p: pairs i < floor(p head_dim / 2) turn, the rest stay)"}}},
      {"rope-xpos", "query/key", "RoPE with the xPos exponential decay of q.k with distance (Sun et al. 2022)",
       {{"base", num(d.base) + " (frequencies base^(-2i/head_dim))"},
        {"xpos_scale_base", num(d.xpos_scale_base) + " (decay zeta^((i-j)/scale_base), gamma 0.4)"}}},
      {"alibi", "logit bias",
       "fixed linear penalty -m_h |i - j| with the paper's geometric slopes, causal in the decoder (Press et al., "
       "ICLR 2022)",
       {}},
      {"t5", "logit bias",
       "a learned scalar per (log-bucketed offset, head) (Raffel et al. 2020); T5 shares one table across layers, "
       "here each layer owns one (a shared submodule would be listed and stepped twice)",
       {{"t5_num_buckets", num(d.t5_num_buckets) + " (buckets; bidirectional in the encoder, causal in the decoder)"},
        {"t5_max_distance", num(d.t5_max_distance) + " (offsets beyond share the last bucket)"},
        init}},
      {"kerple", "logit bias",
       "learned logarithmic kernel -r1_h log(1 + r2_h |i - j|), r1, r2 > 0 per head from U(0, 2), U(0, 1) and kept "
       ">= 0.01 (the authors' code), causal in the decoder (Chi et al. 2022, KERPLE)",
       {}},
      {"kerple-power", "logit bias",
       "learned power kernel -r1_h |i - j|^r2_h per head, r1 from U(0, 2) kept >= 0.01, r2 from U(0, 1) kept in "
       "[0.01, 2], causal in the decoder (Chi et al. 2022, KERPLE)",
       {}},
      {"shaw", "relative vectors",
       "learned key and value vectors per clipped offset, one table shared by the heads (Shaw et al. 2018)",
       {clip, init}},
      {"shaw-sinusoidal", "relative vectors",
       "fixed sinusoids of the clipped offset as relative key and value vectors (NEZHA, Wei et al. 2019)",
       {clip, {"base", num(d.base) + " (frequencies base^(-2i/head_dim))"}}},
      {"shaw-learnable-sinusoidal", "relative vectors",
       "NEZHA's relative sinusoids with trainable frequencies (Wang et al., ICLR 2021)",
       {clip, {"base", num(d.base) + " (initial frequencies base^(-2i/head_dim))"}}},
      {"xl", "relative vectors",
       "content and position shifts u, v and projected sinusoids W_R R_(i-j) over every offset (Dai et al. 2019, "
       "Transformer-XL)",
       {{"base", num(d.base) + " (frequencies of R, model_dim = dim channels)"}, init}},
  };
}

const EncodingInfo* find_info(std::string_view name) {
  for (const EncodingInfo& info : encoding_catalog()) {
    if (info.name == name) return &info;
  }
  return nullptr;
}

std::string known_names() {
  std::string out;
  for (const EncodingInfo& info : encoding_catalog()) out += (out.empty() ? "" : ", ") + info.name;
  return out;
}

bool has(const EncodingPlan& plan, std::string_view part) {
  for (const std::string& p : plan.parts) {
    if (p == part) return true;
  }
  return false;
}

}  // namespace

const std::vector<EncodingInfo>& encoding_catalog() {
  static const std::vector<EncodingInfo> catalog = build_catalog();
  return catalog;
}

EncodingPlan parse_encoding(std::string_view name) {
  EncodingPlan plan{std::string(name), {}};
  std::vector<const EncodingInfo*> infos;
  size_t start = 0;
  while (true) {
    const size_t end = name.find('+', start);
    const std::string_view part = name.substr(start, end == std::string_view::npos ? name.npos : end - start);
    TORCH_CHECK_VALUE(!part.empty(), "[", kOp, "] empty part in '", name, "'");
    const EncodingInfo* info = find_info(part);
    TORCH_CHECK_VALUE(info != nullptr, "[", kOp, "] unknown encoding '", part, "'; known: ", known_names(),
                      " (combine with '+')");
    plan.parts.emplace_back(part);
    infos.push_back(info);
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  if (infos.size() > 1) {
    for (const EncodingInfo* info : infos) {
      TORCH_CHECK_VALUE(info->point != "none", "[", kOp, "] '", info->name, "' cannot be combined, got '", name, "'");
    }
  }
  for (size_t a = 0; a < infos.size(); ++a) {
    for (size_t b = a + 1; b < infos.size(); ++b) {
      TORCH_CHECK_VALUE(infos[a]->point != infos[b]->point, "[", kOp, "] '", name, "' has two ", infos[a]->point,
                        " encodings (", infos[a]->name, ", ", infos[b]->name, "); use at most one per point");
    }
  }
  return plan;
}

void validate_encoding(const EncodingPlan& plan, const EncodingConfig& config) {
  for (const std::string& part : plan.parts) {
    TORCH_CHECK_VALUE(find_info(part) != nullptr, "[", kOp, "] unknown encoding '", part, "'; known: ",
                      known_names(), " (combine with '+')");
  }
  TORCH_CHECK_VALUE(config.dim >= 1, "[", kOp, "] dim must be >= 1, got ", config.dim);
  TORCH_CHECK_VALUE(config.num_heads >= 1, "[", kOp, "] num_heads must be >= 1, got ", config.num_heads);
  TORCH_CHECK_VALUE(config.dim % config.num_heads == 0, "[", kOp, "] dim must be divisible by num_heads, got dim ",
                    config.dim, " and num_heads ", config.num_heads);
  const int64_t head_dim = config.dim / config.num_heads;
  // Without a causal mask nothing tells positions apart: that baseline is 'none'.
  TORCH_CHECK_VALUE(!has(plan, "nope") || config.causal, "[", kOp,
                    "] nope needs a causal model (a decoder): an encoder sees a bag of tokens; use 'none' for that "
                    "baseline");
  for (const std::string& part : plan.parts) {
    // Sinusoids and rotations work on (sin, cos) pairs of channels.
    if (part == "rope" || part == "p-rope" || part == "rope-xpos" || part == "shaw-sinusoidal" ||
        part == "shaw-learnable-sinusoidal") {
      TORCH_CHECK_VALUE(head_dim % 2 == 0, "[", kOp, "] ", part, " needs an even head_dim, got ", head_dim);
    }
    if (part == "sinusoidal" || part == "learnable-sinusoidal" || part == "xl") {
      TORCH_CHECK_VALUE(config.dim % 2 == 0, "[", kOp, "] ", part, " needs an even dim, got ", config.dim);
    }
  }
  if (has(plan, "p-rope")) {
    TORCH_CHECK_VALUE(config.rope_fraction > 0 && config.rope_fraction <= 1, "[", kOp,
                      "] rope_fraction must be in (0, 1], got ", config.rope_fraction);
  }
  // The remaining settings are checked by the modules, in their own words.
}

InputEncoding make_input_encoding(const EncodingPlan& plan, const EncodingConfig& config) {
  validate_encoding(plan, config);
  if (has(plan, "sinusoidal")) return SinusoidalEncoding(SinusoidalEncodingOptions(config.dim).base(config.base));
  if (has(plan, "learned")) {
    return LearnedEncoding(LearnedEncodingOptions(config.max_positions, config.dim).init_std(config.init_std));
  }
  if (has(plan, "learnable-sinusoidal")) {
    return LearnableSinusoidalEncoding(LearnableSinusoidalEncodingOptions(config.dim).base(config.base));
  }
  return nullptr;
}

AttentionEncodings make_attention_encodings(const EncodingPlan& plan, const EncodingConfig& config) {
  validate_encoding(plan, config);
  const int64_t heads = config.num_heads, head_dim = config.dim / config.num_heads;
  AttentionEncodings out;
  for (const std::string& part : plan.parts) {
    if (part == "rope") {
      out.rotary = RotaryEmbedding(RotaryEmbeddingOptions(head_dim).base(config.base).scaling(config.rope_scaling));
    } else if (part == "p-rope") {
      // Hugging Face's "proportional" type at factor 1 is exactly p-RoPE: the first floor(p d/2) pairs keep
      // base^(-2i/d), the others get frequency 0.
      kernels::RopeScaling s;
      s.type = kernels::RopeType::kProportional;
      s.partial_rotary_factor = config.rope_fraction;
      out.rotary = RotaryEmbedding(RotaryEmbeddingOptions(head_dim).base(config.base).scaling(s));
    } else if (part == "rope-xpos") {
      out.rotary =
          RotaryEmbedding(RotaryEmbeddingOptions(head_dim).base(config.base).xpos_scale_base(config.xpos_scale_base));
    } else if (part == "alibi") {
      out.bias = AlibiBias(AlibiBiasOptions(heads).causal(config.causal));
    } else if (part == "t5") {
      out.bias = T5Bias(T5BiasOptions(heads)
                            .num_buckets(config.t5_num_buckets)
                            .max_distance(config.t5_max_distance)
                            .bidirectional(!config.causal)
                            .init_std(config.init_std));
    } else if (part == "kerple" || part == "kerple-power") {
      out.bias = KerpleBias(KerpleBiasOptions(heads)
                                .kind(part == "kerple" ? kernels::KerpleKind::kLog : kernels::KerpleKind::kPower)
                                .causal(config.causal));
    } else if (part == "shaw") {
      out.relative = ShawRelative(
          ShawRelativeOptions(config.max_distance, head_dim).num_heads(0).values(true).init_std(config.init_std));
    } else if (part == "shaw-sinusoidal" || part == "shaw-learnable-sinusoidal") {
      out.relative = SinusoidalRelative(SinusoidalRelativeOptions(config.max_distance, head_dim)
                                            .base(config.base)
                                            .values(true)
                                            .learnable(part == "shaw-learnable-sinusoidal"));
    } else if (part == "xl") {
      out.relative =
          TransformerXLRelative(TransformerXLOptions(heads, head_dim).base(config.base).init_std(config.init_std));
    }
  }
  return out;
}

}  // namespace posenc::nn
