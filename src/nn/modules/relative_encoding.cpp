// The relative-vectors point's base (posenc/nn/relative_encoding.h): the
// checks every relative module makes of its inputs, under its name.
#include "posenc/nn/relative_encoding.h"

#include <ATen/ATen.h>

#include <string>
#include <utility>

#include "op_support.h"

namespace posenc::nn {

using detail::dtype_name;

void check_relative_qk(std::string_view module, int64_t num_heads, int64_t head_dim, const at::Tensor& q,
                       const at::Tensor& k) {
  TORCH_CHECK_VALUE(q.defined(), "[", module, "] q must be a tensor, got None");
  TORCH_CHECK_VALUE(k.defined(), "[", module, "] k must be a tensor, got None");
  TORCH_CHECK_TYPE(detail::is_float_dtype(q.scalar_type()), "[", module,
                   "] q must be float32, float64, bfloat16 or float16, got ", q.scalar_type());
  TORCH_CHECK_TYPE(k.scalar_type() == q.scalar_type(), "[", module, "] k must have q's dtype (",
                   dtype_name(q.scalar_type()), "), got ", dtype_name(k.scalar_type()));
  TORCH_CHECK_VALUE(q.dim() == 4, "[", module, "] q must be 4-D (B, H, Tq, Dh), got ", q.dim(), "-D");
  TORCH_CHECK_VALUE(k.dim() == 4, "[", module, "] k must be 4-D (B, H, Tk, Dh), got ", k.dim(), "-D");
  TORCH_CHECK_VALUE(q.size(3) == head_dim, "[", module, "] q must have head_dim = ", head_dim,
                    " in its last dimension, got ", q.size(3));
  TORCH_CHECK_VALUE(num_heads == 0 || q.size(1) == num_heads, "[", module, "] q must have num_heads = ", num_heads,
                    " heads, got ", q.size(1));
  TORCH_CHECK_VALUE(k.size(0) == q.size(0) && k.size(1) == q.size(1) && k.size(3) == q.size(3), "[", module,
                    "] k must have q's (B, H, Dh) = (", q.size(0), ", ", q.size(1), ", ", q.size(3), "), got (",
                    k.size(0), ", ", k.size(1), ", ", k.size(3), ")");
}

void check_relative_probs(std::string_view module, int64_t num_heads, const at::Tensor& probs) {
  TORCH_CHECK_VALUE(probs.defined(), "[", module, "] probs must be a tensor, got None");
  TORCH_CHECK_TYPE(detail::is_float_dtype(probs.scalar_type()), "[", module,
                   "] probs must be float32, float64, bfloat16 or float16, got ", probs.scalar_type());
  TORCH_CHECK_VALUE(probs.dim() == 4, "[", module, "] probs must be 4-D (B, H, Tq, Tk), got ", probs.dim(), "-D");
  TORCH_CHECK_VALUE(num_heads == 0 || probs.size(1) == num_heads, "[", module, "] probs must have num_heads = ",
                    num_heads, " heads, got ", probs.size(1));
}

at::ScalarType relative_compute_dtype(const at::Tensor& input, const at::Tensor& param) noexcept {
  return input.scalar_type() == at::kDouble || param.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
}

RelativeEncodingImpl::RelativeEncodingImpl(std::string name, int64_t num_heads, int64_t head_dim, bool shared_ok)
    : torch::nn::Module(std::move(name)), num_heads_(num_heads), head_dim_(head_dim) {
  if (shared_ok) {
    TORCH_CHECK_VALUE(num_heads >= 0, "[", this->name(),
                      "] num_heads must be >= 0 (0: one table shared by the heads), got ", num_heads);
  } else {
    TORCH_CHECK_VALUE(num_heads >= 1, "[", this->name(), "] num_heads must be >= 1, got ", num_heads);
  }
  TORCH_CHECK_VALUE(head_dim >= 1, "[", this->name(), "] head_dim must be >= 1, got ", head_dim);
}

at::Tensor RelativeEncodingImpl::values(const at::Tensor& /*probs*/) {
  TORCH_CHECK(false, "[", name(), "] has no value vectors");
}

void RelativeEncodingImpl::check_qk(const at::Tensor& q, const at::Tensor& k) const {
  check_relative_qk(name(), num_heads_, head_dim_, q, k);
}

void RelativeEncodingImpl::check_probs(const at::Tensor& probs) const {
  check_relative_probs(name(), num_heads_, probs);
}

at::ScalarType RelativeEncodingImpl::compute_dtype(const at::Tensor& input, const at::Tensor& param) noexcept {
  return relative_compute_dtype(input, param);
}

}  // namespace posenc::nn
