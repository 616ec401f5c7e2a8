// Small pre-LayerNorm transformers (models.h): the encoder with its
// classification and span heads, and the causal decoder. The encoding comes
// from the registry by name: an input encoding added to the token embeddings,
// and fresh inner-point modules for every layer.
#include "posenc/nn/models.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/nn/init.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <utility>

#include "posenc/nn/dropout.h"
#include "posenc/error.h"
#include "op_support.h"

namespace posenc::nn {
namespace {

constexpr double kEmbedInitStd = 0.02;  // token embeddings ~ N(0, 0.02^2), as BERT / GPT-2

int64_t ffn_dim(const TransformerOptions& o) { return o.ffn_dim() == 0 ? 4 * o.dim() : o.ffn_dim(); }

// Checks the sizes, then the encoding name against them; returns the options
// with encoding_config's dim, num_heads, max_positions and causal filled in.
TransformerOptions checked_options(const char* op, TransformerOptions o, bool causal) {
  TORCH_CHECK_VALUE(o.vocab_size() >= 1, "[", op, "] vocab_size must be >= 1, got ", o.vocab_size());
  TORCH_CHECK_VALUE(o.dim() >= 1, "[", op, "] dim must be >= 1, got ", o.dim());
  TORCH_CHECK_VALUE(o.layers() >= 1, "[", op, "] layers must be >= 1, got ", o.layers());
  TORCH_CHECK_VALUE(o.heads() >= 1, "[", op, "] heads must be >= 1, got ", o.heads());
  TORCH_CHECK_VALUE(o.ffn_dim() >= 0, "[", op, "] ffn_dim must be >= 0 (0: 4 * dim), got ", o.ffn_dim());
  TORCH_CHECK_VALUE(o.dropout() >= 0.0 && o.dropout() < 1.0, "[", op, "] dropout must be in [0, 1), got ",
                    o.dropout());
  TORCH_CHECK_VALUE(o.max_positions() >= 1, "[", op, "] max_positions must be >= 1, got ", o.max_positions());
  TORCH_CHECK_VALUE(o.num_classes() >= 1, "[", op, "] num_classes must be >= 1, got ", o.num_classes());
  TORCH_CHECK_VALUE(o.random_positions() >= 0, "[", op, "] random_positions must be >= 0 (0: off), got ",
                    o.random_positions());
  EncodingConfig& config = o.encoding_config();
  config.dim = o.dim();
  config.num_heads = o.heads();
  config.max_positions = o.max_positions();
  config.causal = causal;
  const EncodingPlan plan = parse_encoding(o.encoding());
  validate_encoding(plan, config);
  const std::vector<std::string> every_part = validate_layer_encodings(plan, config, o.layer_encodings());
  if (o.random_positions() > 0) {
    TORCH_CHECK_VALUE(reads_absolute_positions(every_part), "[", op,
                      "] random_positions needs an input or query/key encoding (absolute or rotary), got '",
                      o.encoding(), "'");
    for (const std::string& part : plan.parts) {
      const bool table = part == "learned";  // the one family whose positions index rows
      TORCH_CHECK_VALUE(!table || o.max_positions() >= o.random_positions(), "[", op, "] random_positions ",
                        o.random_positions(), " needs max_positions >= ", o.random_positions(),
                        " (rows of the learned table), got ", o.max_positions());
    }
  }
  return o;
}

torch::nn::Embedding make_embedding(const TransformerOptions& o) {
  torch::nn::Embedding embed(o.vocab_size(), o.dim());
  at::NoGradGuard no_grad;
  embed->weight.normal_(0.0, kEmbedInitStd);
  return embed;
}

// One fresh block per layer, each with its own encoding modules (its layer's, with layer_encodings).
torch::nn::ModuleList make_blocks(const TransformerOptions& o, bool causal) {
  const EncodingPlan plan = parse_encoding(o.encoding());
  const std::vector<std::string>& pattern = o.layer_encodings();
  torch::nn::ModuleList blocks;
  for (int64_t layer = 0; layer < o.layers(); ++layer) {
    if (pattern.empty()) {
      blocks->push_back(TransformerBlock(o, make_attention_encodings(plan, o.encoding_config()), causal));
      continue;
    }
    const LayerEncoding spec = parse_layer_encoding(pattern[static_cast<size_t>(layer) % pattern.size()]);
    blocks->push_back(TransformerBlock(
        o, make_attention_encodings(layer_plan(plan, spec), layer_config(o.encoding_config(), spec)), causal));
  }
  return blocks;
}

void check_tokens(const char* op, const at::Tensor& tokens, int64_t vocab_size) {
  TORCH_CHECK_VALUE(tokens.defined(), "[", op, "] tokens must be a tensor, got None");
  TORCH_CHECK_TYPE(tokens.scalar_type() == at::kLong, "[", op, "] tokens must be int64, got ",
                   detail::dtype_name(tokens.scalar_type()));
  TORCH_CHECK_VALUE(tokens.dim() == 2, "[", op, "] tokens must be 2-D (B, T), got ", tokens.dim(), "-D");
  TORCH_CHECK_VALUE(tokens.numel() > 0, "[", op, "] tokens must not be empty, got ", detail::tuple_of(tokens.sizes()));
  const int64_t lo = tokens.min().item<int64_t>(), hi = tokens.max().item<int64_t>();
  TORCH_CHECK_VALUE(lo >= 0 && hi < vocab_size, "[", op, "] tokens must be in [0, ", vocab_size, "), got ",
                    lo < 0 ? lo : hi);
}

void check_mask(const char* op, const at::Tensor& mask, const at::Tensor& tokens) {
  if (!mask.defined()) return;
  TORCH_CHECK_TYPE(mask.scalar_type() == at::kBool, "[", op, "] key_padding_mask must be bool (true = padding), got ",
                   detail::dtype_name(mask.scalar_type()));
  TORCH_CHECK_VALUE(mask.sizes() == tokens.sizes(), "[", op, "] key_padding_mask must be (B, T) = ",
                    detail::tuple_of(tokens.sizes()), ", got ", detail::tuple_of(mask.sizes()));
}

// tokens (B, T) -> embeddings plus the input encoding at positions (undefined: 0..T-1), (B, T, D)
at::Tensor embed_tokens(torch::nn::Embedding& embed, InputEncoding& encoding, const at::Tensor& tokens,
                        const at::Tensor& positions = {}) {
  const at::Tensor x = embed->forward(tokens);
  if (!encoding) return x;
  return positions.defined() ? encoding->forward_at(x, positions) : encoding->forward(x);
}

at::Tensor run_blocks(torch::nn::ModuleList& blocks, at::Tensor x, const at::Tensor& mask,
                      const at::Tensor& positions) {
  for (size_t layer = 0; layer < blocks->size(); ++layer) {
    x = blocks->ptr<TransformerBlockImpl>(layer)->forward(x, mask, positions);
  }
  return x;
}

// The positions of one forward: the caller's, a random draw in training with
// random_positions, else undefined (0..T-1).
at::Tensor forward_positions(const char* op, const TransformerOptions& o, bool training, const at::Tensor& tokens,
                             const at::Tensor& given) {
  const int64_t length = tokens.size(1);
  if (given.defined()) {
    TORCH_CHECK_VALUE(given.dim() == 1 && given.size(0) == length && given.scalar_type() == at::kLong, "[", op,
                      "] positions must be int64 (T) = (", length, "), got ", given.sizes());
    return given;
  }
  if (training && o.random_positions() > 0) return sample_random_positions(length, o.random_positions());
  return {};
}

// LN1 of the first block, then its attention with the weights: (B, H, T, T).
at::Tensor first_weights(torch::nn::ModuleList& blocks, const at::Tensor& x) {
  auto block = blocks->ptr<TransformerBlockImpl>(0);
  const at::Tensor h = block->norm1->forward(x);
  return std::get<1>(block->attention->attend(h, h, {}, /*return_weights=*/true));
}

}  // namespace

at::Tensor sample_random_positions(int64_t length, int64_t max_positions, std::optional<at::Generator> generator) {
  TORCH_CHECK_VALUE(length >= 0 && length <= max_positions, "[random_positions] length must be in 0..max_positions = ",
                    max_positions, ", got ", length);
  const c10::optional<at::Generator> source = generator ? c10::optional<at::Generator>(*generator) : c10::nullopt;
  const at::Tensor order = at::randperm(max_positions, source, at::TensorOptions().dtype(at::kLong));
  return std::get<0>(order.slice(0, 0, length).sort());
}

// ---------------------------------------------------------------------------
// TransformerBlock

TransformerBlockImpl::TransformerBlockImpl(const TransformerOptions& options, AttentionEncodings encodings,
                                           bool causal)
    : torch::nn::Module("TransformerBlock"), dropout_(options.dropout()) {
  const int64_t dim = options.dim();
  norm1 = register_module("norm1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})));
  attention = register_module(
      "attention",
      MultiheadAttention(MultiheadAttentionOptions(dim, options.heads())
                             .dropout(options.dropout())
                             .causal(causal)
                             .path(options.attention_path()),
                         std::move(encodings)));
  norm2 = register_module("norm2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})));
  ffn1 = register_module("ffn1", torch::nn::Linear(dim, ffn_dim(options)));
  ffn2 = register_module("ffn2", torch::nn::Linear(ffn_dim(options), dim));
}

// x (B, T, D) -> (B, T, D)
at::Tensor TransformerBlockImpl::forward(const at::Tensor& x, const at::Tensor& key_padding_mask,
                                        const at::Tensor& positions) {
  const bool train = is_training() && dropout_ > 0.0;
  const at::Tensor h =
      x + detail::dropout(attention->forward(norm1->forward(x), key_padding_mask, positions), dropout_, train);
  return h + detail::dropout(ffn2->forward(at::gelu(ffn1->forward(norm2->forward(h)))), dropout_, train);
}

// ---------------------------------------------------------------------------
// TransformerEncoder

TransformerEncoderImpl::TransformerEncoderImpl(const TransformerOptions& options)
    : torch::nn::Module("TransformerEncoder"),
      options_(checked_options("TransformerEncoder", options, /*causal=*/false)) {
  const int64_t dim = options_.dim();
  embed = register_module("embed", make_embedding(options_));
  input_encoding = make_input_encoding(parse_encoding(options_.encoding()), options_.encoding_config());
  if (input_encoding) register_module("input_encoding", input_encoding);
  blocks = register_module("blocks", make_blocks(options_, /*causal=*/false));
  final_norm = register_module("final_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})));
  cls_head = register_module("cls_head", torch::nn::Linear(dim, options_.num_classes()));
  span_head = register_module("span_head", torch::nn::Linear(dim, 2));
  // Registered last, so that the other parameters draw the same initial values with or without it.
  if (options_.masked_lm_head()) {
    mlm_head = register_module("mlm_head", torch::nn::Linear(dim, options_.vocab_size()));
  }
}

// tokens (B, T) -> hidden (B, T, D)
at::Tensor TransformerEncoderImpl::forward(const at::Tensor& tokens, const at::Tensor& key_padding_mask,
                                           const at::Tensor& positions) {
  check_tokens("TransformerEncoder", tokens, options_.vocab_size());
  check_mask("TransformerEncoder", key_padding_mask, tokens);
  const at::Tensor p = forward_positions("TransformerEncoder", options_, is_training(), tokens, positions);
  const at::Tensor x = run_blocks(blocks, embed_tokens(embed, input_encoding, tokens, p), key_padding_mask, p);
  return final_norm->forward(x);
}

// tokens (B, T) -> (B, num_classes) from the first token
at::Tensor TransformerEncoderImpl::classify(const at::Tensor& tokens, const at::Tensor& key_padding_mask,
                                            const at::Tensor& positions) {
  return cls_head->forward(forward(tokens, key_padding_mask, positions).select(1, 0));
}

// tokens (B, T) -> start, end logits (B, T), padding at -inf
std::tuple<at::Tensor, at::Tensor> TransformerEncoderImpl::span(const at::Tensor& tokens,
                                                                const at::Tensor& key_padding_mask,
                                                                const at::Tensor& positions) {
  const at::Tensor logits = span_head->forward(forward(tokens, key_padding_mask, positions));  // (B, T, 2)
  at::Tensor start = logits.select(2, 0), end = logits.select(2, 1);
  if (key_padding_mask.defined()) {
    const double inf = std::numeric_limits<double>::infinity();
    start = start.masked_fill(key_padding_mask, -inf);
    end = end.masked_fill(key_padding_mask, -inf);
  }
  return {start, end};
}

// tokens (B, T) -> (B, T, vocab), or (N, vocab) at the given rows
at::Tensor TransformerEncoderImpl::masked_lm(const at::Tensor& tokens, const at::Tensor& key_padding_mask,
                                             const at::Tensor& positions, const at::Tensor& rows) {
  require(!mlm_head.is_empty(), "TransformerEncoder", "masked_lm needs options.masked_lm_head(true)");
  if (!rows.defined()) return mlm_head->forward(forward(tokens, key_padding_mask, positions));
  TORCH_CHECK_TYPE(rows.scalar_type() == at::kLong, "[TransformerEncoder] rows must be int64, got ",
                   detail::dtype_name(rows.scalar_type()));
  TORCH_CHECK_VALUE(rows.dim() == 1, "[TransformerEncoder] rows must be 1-D, got ", rows.dim(), "-D");
  const int64_t cells = tokens.numel();
  if (rows.numel() > 0) {
    const int64_t lo = rows.min().item<int64_t>(), hi = rows.max().item<int64_t>();
    TORCH_CHECK_VALUE(lo >= 0 && hi < cells, "[TransformerEncoder] rows must be in [0, ", cells, ") (B * T), got ",
                      lo < 0 ? lo : hi);
  }
  const at::Tensor hidden = forward(tokens, key_padding_mask, positions);
  return mlm_head->forward(hidden.reshape({cells, hidden.size(-1)}).index_select(0, rows));
}

at::Tensor TransformerEncoderImpl::first_layer_attention(const at::Tensor& tokens) {
  check_tokens("TransformerEncoder", tokens, options_.vocab_size());
  return first_weights(blocks, embed_tokens(embed, input_encoding, tokens));
}

// ---------------------------------------------------------------------------
// TransformerDecoder

TransformerDecoderImpl::TransformerDecoderImpl(const TransformerOptions& options)
    : torch::nn::Module("TransformerDecoder"),
      options_(checked_options("TransformerDecoder", options, /*causal=*/true)) {
  const int64_t dim = options_.dim();
  embed = register_module("embed", make_embedding(options_));
  input_encoding = make_input_encoding(parse_encoding(options_.encoding()), options_.encoding_config());
  if (input_encoding) register_module("input_encoding", input_encoding);
  blocks = register_module("blocks", make_blocks(options_, /*causal=*/true));
  final_norm = register_module("final_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})));
  lm_head = register_module("lm_head", torch::nn::Linear(dim, options_.vocab_size()));
}

// tokens (B, T) -> next-token logits (B, T, vocab)
at::Tensor TransformerDecoderImpl::forward(const at::Tensor& tokens, const at::Tensor& positions) {
  return lm_head->forward(hidden(tokens, positions));
}

// tokens (B, T) -> (B, T, D) before the head
at::Tensor TransformerDecoderImpl::hidden(const at::Tensor& tokens, const at::Tensor& positions) {
  check_tokens("TransformerDecoder", tokens, options_.vocab_size());
  const at::Tensor p = forward_positions("TransformerDecoder", options_, is_training(), tokens, positions);
  const at::Tensor x = run_blocks(blocks, embed_tokens(embed, input_encoding, tokens, p), {}, p);
  return final_norm->forward(x);
}

at::Tensor TransformerDecoderImpl::first_layer_attention(const at::Tensor& tokens) {
  check_tokens("TransformerDecoder", tokens, options_.vocab_size());
  return first_weights(blocks, embed_tokens(embed, input_encoding, tokens));
}

}  // namespace posenc::nn
