// Small transformers for the experiments: a pre-LayerNorm encoder with a
// classification head and a span (start/end) head, and a causal decoder for
// language modelling. Sizes and the encoding come from TransformerOptions.
//
//   block(x) = x + Attn(LN(x));  x = x + FFN(LN(x));  FFN = W2 gelu(W1 x), D -> ffn_dim -> D
//   encoder: tokens (B, T) -> embed (scaled by 1) + input encoding -> blocks -> LN -> hidden (B, T, D)
//     classify: hidden[:, 0] (the first token, a [CLS]) -> (B, num_classes) logits
//     span:     hidden -> (start (B, T), end (B, T)) logits, padding masked to -inf
//     masked_lm: hidden -> (B, T, vocab) logits (with masked_lm_head; a separate,
//               untied projection, discarded when fine-tuning)
//   decoder: tokens (B, T) -> same with causal attention -> LN -> (B, T, vocab) logits
#pragma once

#include <ATen/ATen.h>
#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "posenc/nn/encoding_registry.h"
#include "posenc/nn/input_encoding.h"
#include "posenc/nn/multihead_attention.h"

namespace posenc::nn {

struct TransformerOptions {
  TransformerOptions(int64_t vocab_size, std::string encoding) : vocab_size_(vocab_size), encoding_(std::move(encoding)) {}
  TORCH_ARG(int64_t, vocab_size);
  TORCH_ARG(std::string, encoding);      // a registry name, e.g. "learned+shaw"
  TORCH_ARG(int64_t, dim) = 64;
  TORCH_ARG(int64_t, layers) = 2;
  TORCH_ARG(int64_t, heads) = 4;
  TORCH_ARG(int64_t, ffn_dim) = 0;       // 0: 4 * dim
  TORCH_ARG(double, dropout) = 0.0;      // residual and attention dropout
  TORCH_ARG(AttentionPath, attention_path) = AttentionPath::kAuto;  // every layer's (MultiheadAttentionOptions::path)
  TORCH_ARG(int64_t, max_positions) = 512;  // learned table rows
  TORCH_ARG(int64_t, num_classes) = 2;   // encoder classification head
  TORCH_ARG(bool, masked_lm_head) = false;  // encoder: also a D -> vocab head (masked-LM pretraining)
  // Randomized positions (Ruoss et al., ACL 2023): > 0, a model in training
  // mode given no positions draws them as a sorted random subset of
  // [0, random_positions) per forward (torch's default generator); in eval
  // mode positions are 0..T-1. Needs an input or query/key family in the
  // encoding, and max_positions >= random_positions for a learned table.
  TORCH_ARG(int64_t, random_positions) = 0;
  // Per-layer encodings (Gemma 3's local / global layers with their own RoPE
  // base): layer l takes layer_encodings[l % size] ("rope:base=1000000", see
  // parse_layer_encoding), which replaces the inner points of `encoding`; the
  // input point stays `encoding`'s. Empty: every layer takes `encoding`.
  TORCH_ARG(std::vector<std::string>, layer_encodings);
  TORCH_ARG(EncodingConfig, encoding_config);  // dim, num_heads, max_positions, causal are overwritten from above
};

// T distinct positions drawn uniformly from [0, max_positions), sorted
// ascending: int64 (T). generator null: torch's default. Throws
// "[random_positions] length must be in 0..max_positions = 64, got 65".
at::Tensor sample_random_positions(int64_t length, int64_t max_positions, std::optional<at::Generator> generator = {});

// One pre-LN block.
class TransformerBlockImpl : public torch::nn::Module {
 public:
  TransformerBlockImpl(const TransformerOptions& options, AttentionEncodings encodings, bool causal);
  // positions (T) int64: the rotary encoding's (undefined: 0..T-1).
  at::Tensor forward(const at::Tensor& x, const at::Tensor& key_padding_mask = {}, const at::Tensor& positions = {});
  MultiheadAttention attention{nullptr};
  torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr};
  torch::nn::Linear ffn1{nullptr}, ffn2{nullptr};

 private:
  double dropout_;
};
TORCH_MODULE(TransformerBlock);

class TransformerEncoderImpl : public torch::nn::Module {
 public:
  // Throws as parse_encoding / validate_encoding, and
  // "[TransformerEncoder] vocab_size must be >= 1, got 0" (layers, heads, dim likewise).
  explicit TransformerEncoderImpl(const TransformerOptions& options);
  // tokens (B, T) int64 in [0, vocab); key_padding_mask (B, T) bool, true = padding -> (B, T, D).
  // A learned table shorter than T throws "[learned] position 512 is outside the table of 512 rows (valid 0..511)".
  // positions (T) int64, increasing: the positions of the input and rotary encodings (undefined: 0..T-1,
  // or a random draw in training with options.random_positions).
  at::Tensor forward(const at::Tensor& tokens, const at::Tensor& key_padding_mask = {}, const at::Tensor& positions = {});
  at::Tensor classify(const at::Tensor& tokens, const at::Tensor& key_padding_mask = {},
                      const at::Tensor& positions = {});
  std::tuple<at::Tensor, at::Tensor> span(const at::Tensor& tokens, const at::Tensor& key_padding_mask = {},
                                          const at::Tensor& positions = {});
  // Needs masked_lm_head: "[TransformerEncoder] masked_lm needs options.masked_lm_head(true)".
  // rows (N) int64: only the logits at these flattened (B * T) positions, (N, vocab) (masked-LM training
  // scores few positions; the vocabulary head dominates a small model's cost).
  at::Tensor masked_lm(const at::Tensor& tokens, const at::Tensor& key_padding_mask = {},
                       const at::Tensor& positions = {}, const at::Tensor& rows = {});
  // The first layer's attention weights (B, H, T, T) for these tokens (analysis probes).
  at::Tensor first_layer_attention(const at::Tensor& tokens);
  const TransformerOptions& options() const noexcept { return options_; }

  torch::nn::Embedding embed{nullptr};
  InputEncoding input_encoding{nullptr};
  torch::nn::ModuleList blocks{nullptr};
  torch::nn::LayerNorm final_norm{nullptr};
  torch::nn::Linear cls_head{nullptr};   // D -> num_classes
  torch::nn::Linear span_head{nullptr};  // D -> 2 (start, end)
  torch::nn::Linear mlm_head{nullptr};   // D -> vocab (masked_lm_head only)

 private:
  TransformerOptions options_;
};
TORCH_MODULE(TransformerEncoder);

class TransformerDecoderImpl : public torch::nn::Module {
 public:
  explicit TransformerDecoderImpl(const TransformerOptions& options);
  // tokens (B, T) -> next-token logits (B, T, vocab); positions as the encoder's.
  at::Tensor forward(const at::Tensor& tokens, const at::Tensor& positions = {});
  // The final layer norm's output (B, T, D): forward is lm_head of it (training
  // scores it with the head fused into the loss, linear_cross_entropy).
  at::Tensor hidden(const at::Tensor& tokens, const at::Tensor& positions = {});
  at::Tensor first_layer_attention(const at::Tensor& tokens);
  const TransformerOptions& options() const noexcept { return options_; }

  torch::nn::Embedding embed{nullptr};
  InputEncoding input_encoding{nullptr};
  torch::nn::ModuleList blocks{nullptr};
  torch::nn::LayerNorm final_norm{nullptr};
  torch::nn::Linear lm_head{nullptr};

 private:
  TransformerOptions options_;
};
TORCH_MODULE(TransformerDecoder);

}  // namespace posenc::nn
