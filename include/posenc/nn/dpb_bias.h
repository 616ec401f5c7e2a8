// Dynamic position biases: a small MLP of the relative position gives each
// head's logit bias. Formulas, layouts and gradients: posenc/kernels/dpb.h.
//
//   DynamicPositionBias       1D, x-transformers' DynamicPositionBias: b_h(d) =
//                             MLP(phi(i' - j))_h, phi the identity or sign(r) log(1 + |r|);
//                             written as offset rows [H, Tq + Tk - 1] (the fused
//                             attention's offset_bias), so no (Tq, Tk) tensor.
//   ContinuousPositionBias2d  2D, Swin Transformer V2's log-spaced CPB (Liu et al.,
//                             CVPR 2022): 16 sigmoid(MLP(log-spaced (dy, dx)))_h on a
//                             height x width grid, written as grid_bias [H, 2H-1, 2W-1].
//
// Parameters mirror the sources' modules (torch.nn.Linear's [out, in] layout):
//   DynamicPositionBias  in_weight [hidden, 1], in_bias [hidden]     x-transformers mlp.0.0
//                        hidden_weight [depth-1, hidden, hidden],
//                        hidden_bias [depth-1, hidden]               mlp.1.0 .. mlp.{depth-1}.0, stacked
//                        norm_weight, norm_bias [depth, hidden]      mlp.l.1 (LayerNorm), norm only
//                        out_weight [num_heads, hidden], out_bias    mlp.{depth}
//   ContinuousPositionBias2d  fc1_weight [hidden, 2], fc1_bias [hidden], fc2_weight [num_heads, hidden]
//                        (Swin V2's cpb_mlp.0.weight, cpb_mlp.0.bias, cpb_mlp.2.weight)
// Initialisation as the sources: torch.nn.Linear's default U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for
// weights and biases, LayerNorm gamma 1 and beta 0 (x-transformers); N(0, 0.02^2) weights (timm's
// trunc_normal_ at std 0.02 truncates at +-2, i.e. never) and a zero bias (Swin V2's _init_weights).
#pragma once

#include <ATen/ATen.h>
#include <torch/arg.h>

#include <cstdint>

#include "posenc/nn/attention_bias.h"
#include "posenc/nn/family_module.h"

namespace posenc::nn {

struct DynamicPositionBiasOptions {
  // x-transformers builds it with hidden = model dim / 4.
  DynamicPositionBiasOptions(int64_t num_heads, int64_t hidden) : num_heads_(num_heads), hidden_(hidden) {}
  TORCH_ARG(int64_t, num_heads);
  TORCH_ARG(int64_t, hidden);
  TORCH_ARG(int64_t, depth) = 2;          // x-transformers' dynamic_pos_bias_mlp_depth
  TORCH_ARG(bool, log_distance) = false;  // dynamic_pos_bias_log_distance
  TORCH_ARG(bool, norm) = false;          // dynamic_pos_bias_norm: LayerNorm before each SiLU
  TORCH_ARG(bool, causal) = false;        // -inf on keys after the query (a decoder)
};

// The typed front ends of the two contracts (src/nn/families/dpb.cpp): reset_parameters (the
// weights drawn again, LayerNorm to gamma 1, beta 0), bias, add_terms (the O(H*T) offset rows / the
// grid) and the repr are the holder's.
// "[DynamicPositionBias] hidden must be >= 1, got 0", "... depth must be >= 1, got 0".
class DynamicPositionBiasImpl : public FamilyBiasImpl {
 public:
  explicit DynamicPositionBiasImpl(const DynamicPositionBiasOptions& options);

  // [num_heads, q_len + k_len - 1] in `dtype` (default: the parameters'), element d + k_len - 1 for
  // d = j - i'; differentiable wrt every parameter.
  at::Tensor offset_rows(int64_t q_len, int64_t k_len, c10::optional<at::ScalarType> dtype = c10::nullopt);

  const DynamicPositionBiasOptions& options() const noexcept { return options_; }

 private:
  DynamicPositionBiasOptions options_;
};

TORCH_MODULE(DynamicPositionBias);

struct ContinuousPositionBias2dOptions {
  ContinuousPositionBias2dOptions(int64_t num_heads, int64_t height, int64_t width)
      : num_heads_(num_heads), height_(height), width_(width) {}
  TORCH_ARG(int64_t, num_heads);
  TORCH_ARG(int64_t, height);
  TORCH_ARG(int64_t, width);
  TORCH_ARG(int64_t, hidden) = 512;  // Swin V2's cpb_mlp width
  // Swin V2's pretrained_window_size: the coordinates are normalised by it
  // (0: by the grid itself); >= 2 when set.
  TORCH_ARG(int64_t, pretrained_height) = 0;
  TORCH_ARG(int64_t, pretrained_width) = 0;
  TORCH_ARG(double, init_std) = 0.02;
};

// On the height x width grid flattened as y*width + x: bias(q_len, k_len)
// needs q_len == k_len == height*width.
class ContinuousPositionBias2dImpl : public FamilyBiasImpl {
 public:
  explicit ContinuousPositionBias2dImpl(const ContinuousPositionBias2dOptions& options);

  // [num_heads, 2*height-1, 2*width-1] in `dtype` (default: the parameters'); differentiable.
  at::Tensor grid(c10::optional<at::ScalarType> dtype = c10::nullopt);

  const ContinuousPositionBias2dOptions& options() const noexcept { return options_; }

 private:
  ContinuousPositionBias2dOptions options_;
};

TORCH_MODULE(ContinuousPositionBias2d);

namespace ops {

// The DPB MLP's tensors, shapes as the module's parameters; norm_* undefined without the norm.
struct DpbTensors {
  at::Tensor in_weight, in_bias, hidden_weight, hidden_bias, norm_weight, norm_bias, out_weight, out_bias;
};

// torch.ops.posenc.dpb_offset_bias: one floating dtype, CPU -> [H, q_len + k_len - 1] in that dtype (0
// columns when a length is 0); differentiable wrt every tensor (first derivatives). Shapes refused by name:
// "[dpb_offset_bias] in_bias must be [hidden] = (4), got (3)".
at::Tensor dpb_offset_bias(const DpbTensors& mlp, int64_t q_len, int64_t k_len, bool log_distance = false);

// torch.ops.posenc.cpb_grid_bias: fc1_weight [hidden, 2], fc1_bias [hidden], fc2_weight [H, hidden] ->
// [H, 2*height-1, 2*width-1]; differentiable wrt the three.
at::Tensor cpb_grid_bias(const at::Tensor& fc1_weight, const at::Tensor& fc1_bias, const at::Tensor& fc2_weight,
                         int64_t height, int64_t width, int64_t pretrained_height = 0, int64_t pretrained_width = 0);

}  // namespace ops
}  // namespace posenc::nn
