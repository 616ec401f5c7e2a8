// The query/key point of DESIGN.md section 2: rotary embeddings rotate q and
// k by position before q.k, so the score depends on the offset j - i only.
// Typed front ends of families on the contract (family_contract.h), held by
// FamilyTransform (family_module.h); their contracts live in
// src/nn/families/rope.cpp and mrope.cpp.
//
//   RotaryEmbedding                 RoPE (Su et al. 2021) in the half (GPT-NeoX)
//                                   or interleaved (GPT-J) layout, partial rotary,
//                                   Hugging Face scalings, learned frequencies, xPos
//   RotaryEmbeddingAxial            axial 2D/3D RoPE for images and video (Heo et al. 2024)
//   MultimodalRotaryEmbedding       M-RoPE (Qwen2-VL) and its interleaved form (Qwen3-VL)
//
// forward(q, k, positions) -> (q', k'): q, k (B, H, T, D) or any (..., T, D)
// in float32 / float64 / bfloat16 / float16, same shapes and dtypes out;
// the cos/sin tables are computed once and shared by q, k and every head
// (RoPE's, of positions [0, L), by every module of the same settings).
// Gradients flow to q and k (and to omega when the frequencies are learned).
// Formulas: posenc/kernels/rope*.h and docs/rope.md.
#pragma once

#include <ATen/ATen.h>
#include <torch/arg.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "posenc/kernels/rope.h"
#include "posenc/kernels/rope_scaling.h"
#include "posenc/kernels/sinusoidal.h"
#include "posenc/nn/family_module.h"

namespace posenc::nn {

struct RotaryEmbeddingOptions {
  /* implicit */ RotaryEmbeddingOptions(int64_t head_dim) : head_dim_(head_dim) {}
  TORCH_ARG(int64_t, head_dim);        // D of q and k
  TORCH_ARG(int64_t, rotary_dim) = 0;  // R, even; 0: D
  TORCH_ARG(double, base) = 10000.0;
  TORCH_ARG(kernels::RopeLayout, layout) = kernels::RopeLayout::kHalf;
  TORCH_ARG(kernels::RopeScaling, scaling);  // Hugging Face rope_scaling; default: none
  // The length that selects the regime of dynamic / longrope; unset: max position + 1.
  TORCH_ARG(std::optional<int64_t>, seq_len);
  TORCH_ARG(kernels::Precision, precision) = kernels::Precision::kExact;
  // omega (R/2) a trainable parameter, initialised to base^(-2i/R); needs the default scaling.
  TORCH_ARG(bool, learned_frequencies) = false;
  // xPos (Sun et al. 2022) when > 0: q scaled by zeta^((p - xpos_center)/scale_base), k by its inverse.
  TORCH_ARG(double, xpos_scale_base) = 0.0;
  TORCH_ARG(double, xpos_gamma) = 0.4;
  TORCH_ARG(double, xpos_center) = 0.0;
  // Replaces the scaling's attention factor (Hugging Face configs may set it); > 0.
  TORCH_ARG(std::optional<double>, attention_scaling);
};

class RotaryEmbeddingImpl : public FamilyTransformImpl {
 public:
  explicit RotaryEmbeddingImpl(const RotaryEmbeddingOptions& options);

  // q, k (..., T, D); positions int64 (T), or (B, T) when q and k are (B, ..., T, D).
  std::tuple<at::Tensor, at::Tensor> forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& positions);
  // The tables forward uses for non-negative positions without learned
  // frequencies or xPos: (cos, sin), positions.shape + [R/2] in `compute`
  // (float32 or float64), attention factor included.
  std::pair<at::Tensor, at::Tensor> cos_sin(const at::Tensor& positions, at::ScalarType compute);

  const RotaryEmbeddingOptions& options() const noexcept { return options_; }
  int64_t rotary_dim() const;
  // (R/2) float32 parameter "omega"; undefined unless learned_frequencies.
  const at::Tensor& omega() const { return tensor("omega"); }

 private:
  RotaryEmbeddingOptions options_;
};

TORCH_MODULE(RotaryEmbedding);

// How many times the tables shared by RoPE modules of these options were built in `compute` (float32 or
// float64): they grow by doubling and are rebuilt only when the frequencies change.
uint64_t rope_table_builds(const RotaryEmbeddingOptions& options, at::ScalarType compute);

struct RotaryEmbeddingAxialOptions {
  /* implicit */ RotaryEmbeddingAxialOptions(int64_t head_dim) : head_dim_(head_dim) {}
  TORCH_ARG(int64_t, head_dim);
  TORCH_ARG(int64_t, rotary_dim) = 0;             // 0: D
  TORCH_ARG(std::vector<int64_t>, dims_per_axis);  // empty: the even split of R over the coords' axes
  TORCH_ARG(double, base) = 10000.0;
  TORCH_ARG(kernels::RopeLayout, layout) = kernels::RopeLayout::kHalf;
  TORCH_ARG(std::vector<kernels::RopeScaling>, scaling);  // empty, one shared, or one per axis
  TORCH_ARG(std::vector<int64_t>, seq_len);               // empty (max coordinate + 1), or one per axis
  TORCH_ARG(kernels::Precision, precision) = kernels::Precision::kExact;
};

class RotaryEmbeddingAxialImpl : public FamilyTransformImpl {
 public:
  explicit RotaryEmbeddingAxialImpl(const RotaryEmbeddingAxialOptions& options);
  // coords int64 (T, n_axes) or (B, T, n_axes), n_axes 1..3 (e.g. (row, column) of each patch).
  std::tuple<at::Tensor, at::Tensor> forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& coords);
  const RotaryEmbeddingAxialOptions& options() const noexcept { return options_; }

 private:
  RotaryEmbeddingAxialOptions options_;
};

TORCH_MODULE(RotaryEmbeddingAxial);

struct MultimodalRotaryEmbeddingOptions {
  MultimodalRotaryEmbeddingOptions(int64_t head_dim, std::vector<int64_t> mrope_section)
      : head_dim_(head_dim), mrope_section_(std::move(mrope_section)) {}
  TORCH_ARG(int64_t, head_dim);
  TORCH_ARG(std::vector<int64_t>, mrope_section);  // t, h, w sizes summing to R/2
  TORCH_ARG(bool, interleaved) = false;             // Qwen3-VL's assignment
  TORCH_ARG(int64_t, rotary_dim) = 0;               // 0: D
  TORCH_ARG(double, base) = 10000.0;
  TORCH_ARG(kernels::RopeLayout, layout) = kernels::RopeLayout::kHalf;
  TORCH_ARG(kernels::RopeScaling, scaling);
  TORCH_ARG(std::optional<int64_t>, seq_len);
  TORCH_ARG(kernels::Precision, precision) = kernels::Precision::kExact;
};

class MultimodalRotaryEmbeddingImpl : public FamilyTransformImpl {
 public:
  explicit MultimodalRotaryEmbeddingImpl(const MultimodalRotaryEmbeddingOptions& options);
  // positions3 int64 (3, T) or (3, B, T): the t, h, w positions (Qwen2-VL's position_ids).
  std::tuple<at::Tensor, at::Tensor> forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& positions3);
  const MultimodalRotaryEmbeddingOptions& options() const noexcept { return options_; }

 private:
  MultimodalRotaryEmbeddingOptions options_;
};

TORCH_MODULE(MultimodalRotaryEmbedding);

}  // namespace posenc::nn
