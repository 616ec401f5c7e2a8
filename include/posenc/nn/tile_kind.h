// The kinds of tile term (posenc/nn/attention_terms.h's TileTerm): a registry
// the families fill from their own files (FIRE: src/nn/families/fire.cpp, CoPE:
// src/nn/families/cope.cpp) so that the attention code names none of them; a
// library user may register a kind of their own the same way. A kind says
// how its tensors are checked, how the fused kernels compute it per tile
// (kernels/tile_bias.h), how its parameter gradients come back from the
// kernel's double buffer, and its dense form for the composed path.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/kernels/tile_bias.h"

namespace posenc::nn {

// What a kind's fused term is made from: its tensors contiguous in the
// compute dtype, q and k as the kernel sees them (kernel views in the compute
// dtype, alive as long as the term), the attention's scale and key padding.
struct TileInputs {
  const std::vector<at::Tensor>& tensors;
  const at::Tensor& q;
  const at::Tensor& k;
  double scale;
  const uint8_t* key_padding;  // (B, Tk) bytes, non-zero = padding; null: none
  int64_t key_padding_stride;
};

class TileKind {
 public:
  virtual ~TileKind() = default;

  // The spec's name ("fire") and the name in messages ("FIRE").
  virtual std::string name() const = 0;
  virtual std::string display_name() const = 0;
  // Its tensors' names in messages, in order ("fire_w1", ...): their count is the kind's tensor count.
  virtual std::vector<std::string> tensor_names() const = 0;
  // Whether the term is defined only for keys j <= i'.
  virtual bool needs_causal() const = 0;
  // Shapes and values against q (B, H, Tq, Dh); the dtype rule is the attention's.
  virtual void check(const std::vector<at::Tensor>& tensors, const at::Tensor& q) const = 0;
  virtual std::shared_ptr<const kernels::TileBias<float>> fused_float(const TileInputs& in) const = 0;
  virtual std::shared_ptr<const kernels::TileBias<double>> fused_double(const TileInputs& in) const = 0;
  // The kernel's double gradient buffer (the term's gradient_size()) as one gradient per tensor,
  // in the compute dtype; needs[t] false: undefined.
  virtual std::vector<at::Tensor> gradients(const at::Tensor& buffer, const std::vector<at::Tensor>& tensors,
                                            const std::vector<bool>& needs, at::ScalarType compute) const = 0;
  // The dense term (B | 1, H, Tq, Tk) from differentiable ops, tensors and q, k in the compute dtype;
  // only called with pairs (Tq, Tk > 0).
  virtual at::Tensor dense(const std::vector<at::Tensor>& tensors, const at::Tensor& q, const at::Tensor& k,
                           double scale, const std::optional<at::Tensor>& key_padding_mask) const = 0;
};

// Registers a kind at load time (a static object in the family's file); a second kind of one name is refused.
struct TileKindRegistration {
  explicit TileKindRegistration(std::unique_ptr<TileKind> kind);
};

// "[attention] unknown tile kind 'foo' (known: cope, fire)".
const TileKind& tile_kind(std::string_view name);
std::vector<std::string> tile_kind_names();

}  // namespace posenc::nn
