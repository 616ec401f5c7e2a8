#include "posenc/nn/input_encoding.h"

#include <utility>
#include <vector>

#include "op_support.h"

namespace posenc::nn {

std::string_view input_mode_name(InputMode mode) noexcept { return mode == InputMode::kAdd ? "add" : "concat"; }

InputEncodingImpl::InputEncodingImpl(std::string name, int64_t dim, InputMode mode)
    : torch::nn::Module(std::move(name)), dim_(dim), mode_(mode) {}

void InputEncodingImpl::check_input(const at::Tensor& x) const {
  TORCH_CHECK_TYPE(detail::is_float_dtype(x.scalar_type()), "[", name(),
                   "] x must be float32, float64, bfloat16 or float16, got ", x.scalar_type());
  TORCH_CHECK_VALUE(x.dim() == 2 || x.dim() == 3, "[", name(), "] x must have shape (B, T, D) or (T, D), got ",
                    x.sizes());
  TORCH_CHECK_VALUE(mode_ != InputMode::kAdd || x.size(-1) == dim_, "[", name(), "] x must have ", dim_,
                    " features (the encoding dim) in add mode, got ", x.size(-1));
}

// x: (B, T, D) | (T, D) -> same (add) | (..., T, D + dim) (concat)
at::Tensor InputEncodingImpl::forward(const at::Tensor& x, int64_t start) {
  check_input(x);
  const int64_t tokens = x.size(-2);
  const at::ScalarType compute = detail::compute_dtype(x.scalar_type());
  const at::Tensor pe = tokens == 0 ? at::empty({0, dim_}, at::TensorOptions().dtype(compute))
                                    : encode_range(start, tokens, compute);
  return combine(x, pe);
}

// positions: (T) | (B, T)
at::Tensor InputEncodingImpl::forward_at(const at::Tensor& x, const at::Tensor& positions) {
  check_input(x);
  const int64_t tokens = x.size(-2);
  const bool shared = positions.dim() == 1 && positions.size(0) == tokens;
  const bool per_row = x.dim() == 3 && positions.dim() == 2 && positions.size(0) == x.size(0) &&
                       positions.size(1) == tokens;
  TORCH_CHECK_VALUE(shared || per_row, "[", name(), "] positions must have shape (T) or (B, T) for x of shape ",
                    x.sizes(), ", got ", positions.sizes());
  return combine(x, encode(positions, detail::compute_dtype(x.scalar_type())));
}

at::Tensor InputEncodingImpl::combine(const at::Tensor& x, const at::Tensor& pe) const {
  TORCH_INTERNAL_ASSERT(pe.size(-1) == dim_ && pe.scalar_type() == detail::compute_dtype(x.scalar_type()));
  if (mode_ == InputMode::kAdd) {
    // One rounding to x's dtype, after the sum in the compute dtype.
    return (x.to(pe.scalar_type()) + pe).to(x.scalar_type());
  }
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes.back() = dim_;
  return at::cat({x, pe.to(x.scalar_type()).expand(sizes)}, -1);
}

}  // namespace posenc::nn
