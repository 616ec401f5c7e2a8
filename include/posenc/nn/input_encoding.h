// The input point of DESIGN.md section 2: an encoding that gives every
// position a vector and meets the token embeddings x before attention, either
// added (x + pe) or concatenated (cat([x, pe], -1)). InputEncodingImpl holds
// that shared part; a family only says how to encode positions.
//
//   x: (B, T, D) or (T, D), float32 / float64 / bfloat16 / float16
//   add:    (B, T, D)          pe has D = dim() features
//   concat: (B, T, D + dim())  pe has its own dim()
// The math runs in float32 (float64 for float64 x) and the result is rounded
// once to x's dtype.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace posenc::nn {

enum class InputMode {
  kAdd,     // x + pe
  kConcat,  // cat([x, pe], -1)
};

// "add" | "concat"
std::string_view input_mode_name(InputMode mode) noexcept;

class InputEncodingImpl : public torch::nn::Module {
 public:
  // Row t of x gets position start + t.
  at::Tensor forward(const at::Tensor& x, int64_t start = 0);
  // Explicit positions: integers, (T) for every batch row, or (B, T) when x
  // is (B, T, D). (Not an overload of forward: torch's module holders need
  // a single forward.)
  at::Tensor forward_at(const at::Tensor& x, const at::Tensor& positions);

  // The encoding of positions start .. start+count-1: (count, dim()), in
  // `compute` (float32 or float64), differentiable wrt the module's parameters.
  virtual at::Tensor encode_range(int64_t start, int64_t count, at::ScalarType compute) = 0;
  // The encoding of integer positions of any shape S: S + (dim()).
  virtual at::Tensor encode(const at::Tensor& positions, at::ScalarType compute) = 0;

  int64_t dim() const noexcept { return dim_; }
  InputMode mode() const noexcept { return mode_; }

 protected:
  // `name` (e.g. "SinusoidalEncoding") becomes the module's name() and the
  // prefix of its error messages.
  InputEncodingImpl(std::string name, int64_t dim, InputMode mode);

 private:
  // x checked, pe: (T, dim) or (B, T, dim) in x's compute dtype.
  at::Tensor combine(const at::Tensor& x, const at::Tensor& pe) const;
  void check_input(const at::Tensor& x) const;

  int64_t dim_;
  InputMode mode_;
};

// A handle to any input encoding: InputEncoding encoding = SinusoidalEncoding(64);
class InputEncoding : public torch::nn::ModuleHolder<InputEncodingImpl> {
 public:
  /* implicit */ InputEncoding(std::nullptr_t) : ModuleHolder(nullptr) {}
  /* implicit */ InputEncoding(std::shared_ptr<InputEncodingImpl> impl) : ModuleHolder(std::move(impl)) {}
  template <class Impl, class = std::enable_if_t<std::is_base_of_v<InputEncodingImpl, Impl>>>
  /* implicit */ InputEncoding(const torch::nn::ModuleHolder<Impl>& holder)
      : ModuleHolder(std::shared_ptr<InputEncodingImpl>(holder.ptr())) {}
};

}  // namespace posenc::nn
