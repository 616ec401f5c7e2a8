// The KERPLE offset-rows op, all of it in one place: schema, CPU kernel call,
// autograd and the typed C++ API (posenc/nn/kerple_bias.h).
//   kerple_offset_bias           r1, r2 [H] -> rows [H, q_len + k_len - 1]
//   kerple_offset_bias_backward  grad rows -> (grad_r1, grad_r2) [H]
// The backward has no autograd kernel of its own: first derivatives only, as
// the fused attention that consumes the rows.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <string>
#include <tuple>

#include "op_support.h"
#include "posenc/kernels/kerple.h"
#include "posenc/nn/kerple_bias.h"

namespace posenc::nn {
namespace {

constexpr const char* kOp = "kerple_offset_bias";

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// r1, r2: 1-D, one floating dtype, on the CPU; returns the params.
kernels::KerpleParams checked(const at::Tensor& r1, const at::Tensor& r2, int64_t q_len, int64_t k_len,
                              c10::string_view kind) {
  detail::check_float_tensor(kOp, "r1", r1);
  detail::check_float_tensor(kOp, "r2", r2);
  TORCH_CHECK_VALUE(r1.dim() == 1 && r1.size(0) >= 1, "[", kOp, "] r1 must be 1-D [H] with H >= 1, got ",
                    detail::tuple_of(r1.sizes()));
  TORCH_CHECK_VALUE(r2.sizes() == r1.sizes(), "[", kOp, "] r2 must have r1's shape ", detail::tuple_of(r1.sizes()),
                    ", got ", detail::tuple_of(r2.sizes()));
  TORCH_CHECK_TYPE(r2.scalar_type() == r1.scalar_type(), "[", kOp, "] r2 must have r1's dtype (",
                   detail::dtype_name(r1.scalar_type()), "), got ", detail::dtype_name(r2.scalar_type()));
  return detail::translate_errors([&] {
    kernels::KerpleParams p{kernels::parse_kerple_kind(detail::to_std(kind), kOp), r1.size(0), q_len, k_len};
    kernels::validate(p, kOp);
    return p;
  });
}

at::Tensor offset_bias_cpu(const at::Tensor& r1, const at::Tensor& r2, int64_t q_len, int64_t k_len,
                           c10::string_view kind) {
  const kernels::KerpleParams p = checked(r1, r2, q_len, k_len, kind);
  const at::ScalarType compute = detail::compute_dtype(r1.scalar_type());
  const at::Tensor a = r1.to(compute).contiguous(), b = r2.to(compute).contiguous();
  at::Tensor out = at::empty({p.num_heads, kernels::kerple_columns(p)}, at::TensorOptions().dtype(compute));
  detail::translate_errors([&] {
    if (compute == at::kDouble) {
      kernels::kerple_offset_bias(p, a.data_ptr<double>(), b.data_ptr<double>(), out.data_ptr<double>(), kOp);
    } else {
      kernels::kerple_offset_bias(p, a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), kOp);
    }
  });
  return out.to(r1.scalar_type());
}

std::tuple<at::Tensor, at::Tensor> offset_bias_backward_cpu(const at::Tensor& grad, const at::Tensor& r1,
                                                            const at::Tensor& r2, int64_t q_len, int64_t k_len,
                                                            c10::string_view kind) {
  const kernels::KerpleParams p = checked(r1, r2, q_len, k_len, kind);
  detail::check_float_tensor(kOp, "grad", grad);
  TORCH_CHECK_VALUE(grad.dim() == 2 && grad.size(0) == p.num_heads && grad.size(1) == kernels::kerple_columns(p),
                    "[", kOp, "] grad must be [H, q_len + k_len - 1] = ",
                    detail::tuple_of({p.num_heads, kernels::kerple_columns(p)}), ", got ",
                    detail::tuple_of(grad.sizes()));
  const at::ScalarType compute = detail::compute_dtype(r1.scalar_type());
  const at::Tensor a = r1.to(compute).contiguous(), b = r2.to(compute).contiguous();
  const at::Tensor g = grad.to(compute).contiguous();
  at::Tensor g1 = at::empty({p.num_heads}, at::TensorOptions().dtype(compute));
  at::Tensor g2 = at::empty({p.num_heads}, at::TensorOptions().dtype(compute));
  detail::translate_errors([&] {
    if (compute == at::kDouble) {
      kernels::kerple_offset_bias_backward(p, a.data_ptr<double>(), b.data_ptr<double>(), g.data_ptr<double>(),
                                           g1.data_ptr<double>(), g2.data_ptr<double>(), kOp);
    } else {
      kernels::kerple_offset_bias_backward(p, a.data_ptr<float>(), b.data_ptr<float>(), g.data_ptr<float>(),
                                           g1.data_ptr<float>(), g2.data_ptr<float>(), kOp);
    }
  });
  return {g1.to(r1.scalar_type()), g2.to(r2.scalar_type())};
}

template <class Signature>
c10::TypedOperatorHandle<Signature> find_op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Signature>();
}

at::Tensor call_forward(const at::Tensor& r1, const at::Tensor& r2, int64_t q_len, int64_t k_len,
                        c10::string_view kind) {
  static const auto op = find_op<decltype(offset_bias_cpu)>("posenc::kerple_offset_bias");
  return op.call(r1, r2, q_len, k_len, kind);
}

std::tuple<at::Tensor, at::Tensor> call_backward(const at::Tensor& grad, const at::Tensor& r1, const at::Tensor& r2,
                                                 int64_t q_len, int64_t k_len, c10::string_view kind) {
  static const auto op = find_op<decltype(offset_bias_backward_cpu)>("posenc::kerple_offset_bias_backward");
  return op.call(grad, r1, r2, q_len, k_len, kind);
}

class KerpleOffsetBiasFunction : public torch::autograd::Function<KerpleOffsetBiasFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& r1, const at::Tensor& r2, int64_t q_len,
                            int64_t k_len, c10::string_view kind) {
    at::AutoDispatchBelowADInplaceOrView guard;
    at::Tensor out = call_forward(r1, r2, q_len, k_len, kind);  // validates
    ctx->save_for_backward({r1, r2});
    ctx->saved_data["q_len"] = q_len;
    ctx->saved_data["k_len"] = k_len;
    ctx->saved_data["kind"] = std::string(kind);
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const auto& d = ctx->saved_data;
    const std::string kind = d.at("kind").toStringRef();
    auto [g1, g2] =
        call_backward(grads[0], saved[0], saved[1], d.at("q_len").toInt(), d.at("k_len").toInt(), kind);
    return {g1, g2, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor offset_bias_autograd(const at::Tensor& r1, const at::Tensor& r2, int64_t q_len, int64_t k_len,
                                c10::string_view kind) {
  return KerpleOffsetBiasFunction::apply(r1, r2, q_len, k_len, kind);
}

}  // namespace

namespace ops {

at::Tensor kerple_offset_bias(const at::Tensor& r1, const at::Tensor& r2, int64_t q_len, int64_t k_len,
                              kernels::KerpleKind kind) {
  const std::string_view name = kernels::kerple_kind_name(kind);
  return call_forward(r1, r2, q_len, k_len, c10::string_view(name.data(), name.size()));
}

}  // namespace ops

// KERPLE (posenc/kernels/kerple.h): kind "log" -r1 log(1 + r2|d|) | "power" -r1 |d|^r2, d = j - i'.
TORCH_LIBRARY_FRAGMENT(posenc, m) {
  m.def("kerple_offset_bias(Tensor r1, Tensor r2, int q_len, int k_len, str kind=\"log\") -> Tensor");
  m.def("kerple_offset_bias_backward(Tensor grad, Tensor r1, Tensor r2, int q_len, int k_len, str kind) "
        "-> (Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(posenc, CPU, m) {
  m.impl("kerple_offset_bias", offset_bias_cpu);
  m.impl("kerple_offset_bias_backward", offset_bias_backward_cpu);
}

TORCH_LIBRARY_IMPL(posenc, Autograd, m) { m.impl("kerple_offset_bias", offset_bias_autograd); }

}  // namespace posenc::nn
