// The dynamic position bias ops, all of each in one place: schema, CPU kernel
// call, autograd and the typed C++ API (posenc/nn/dpb_bias.h).
//   dpb_offset_bias           the DPB MLP's tensors -> rows [H, q_len + k_len - 1]
//   dpb_offset_bias_backward  grad rows -> the gradient of each tensor
//   cpb_grid_bias             fc1_weight, fc1_bias, fc2_weight -> grid [H, 2Hg-1, 2Wg-1]
//   cpb_grid_bias_backward    grad grid -> the three gradients
// The backwards have no autograd kernel of their own: first derivatives only,
// as the fused attention that consumes the rows and the grid.
#include "posenc/kernels/dpb.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <string>
#include <tuple>
#include <vector>

#include "op_support.h"
#include "posenc/nn/dpb_bias.h"

namespace posenc::nn {
namespace {

constexpr const char* kDpb = "dpb_offset_bias";
constexpr const char* kCpb = "cpb_grid_bias";

using Opt = c10::optional<at::Tensor>;
using detail::given;
using detail::tuple_of;
using detail::value_of;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// t: floating, CPU, with sizes `want` (-1: any extent, written "*") and the dtype of `first`, the op's
// first tensor (named first_name).
void check_tensor(const char* op, const char* name, const at::Tensor& t, const char* first_name,
                  const at::Tensor& first, std::vector<int64_t> want, const char* layout) {
  detail::check_float_tensor(op, name, t);
  bool ok = t.dim() == static_cast<int64_t>(want.size());
  for (size_t k = 0; ok && k < want.size(); ++k) ok = want[k] < 0 || t.size(static_cast<int64_t>(k)) == want[k];
  TORCH_CHECK_VALUE(ok, "[", op, "] ", name, " must be ", layout, " = ", tuple_of(want), ", got ", tuple_of(t.sizes()));
  TORCH_CHECK_TYPE(t.scalar_type() == first.scalar_type(), "[", op, "] ", name, " must have ", first_name, "'s dtype (",
                   detail::dtype_name(first.scalar_type()), "), got ", detail::dtype_name(t.scalar_type()));
}

// ---------------------------------------------------------------------------
// DPB

// Checks every tensor against in_weight's hidden, the depth against
// hidden_weight, the heads against out_weight; returns the params.
kernels::DpbParams checked_dpb(const at::Tensor& in_weight, const at::Tensor& in_bias, const at::Tensor& hidden_weight,
                               const at::Tensor& hidden_bias, const Opt& norm_weight, const Opt& norm_bias,
                               const at::Tensor& out_weight, const at::Tensor& out_bias, int64_t q_len, int64_t k_len,
                               bool log_distance) {
  detail::check_float_tensor(kDpb, "in_weight", in_weight);
  TORCH_CHECK_VALUE(in_weight.dim() == 2 && in_weight.size(0) >= 1 && in_weight.size(1) == 1, "[", kDpb,
                    "] in_weight must be [hidden, 1] with hidden >= 1, got ", tuple_of(in_weight.sizes()));
  const int64_t hd = in_weight.size(0);
  check_tensor(kDpb, "in_bias", in_bias, "in_weight", in_weight, {hd}, "[hidden]");
  detail::check_float_tensor(kDpb, "hidden_weight", hidden_weight);
  TORCH_CHECK_VALUE(hidden_weight.dim() == 3, "[", kDpb,
                    "] hidden_weight must be [depth-1, hidden, hidden] = ", tuple_of({-1, hd, hd}), ", got ",
                    tuple_of(hidden_weight.sizes()));
  const int64_t depth = hidden_weight.size(0) + 1;
  check_tensor(kDpb, "hidden_weight", hidden_weight, "in_weight", in_weight, {depth - 1, hd, hd},
               "[depth-1, hidden, hidden]");
  check_tensor(kDpb, "hidden_bias", hidden_bias, "in_weight", in_weight, {depth - 1, hd}, "[depth-1, hidden]");
  TORCH_CHECK_VALUE(given(norm_weight) == given(norm_bias), "[", kDpb,
                    "] norm_weight and norm_bias must be given together (LayerNorm) or both be None");
  if (given(norm_weight)) {
    check_tensor(kDpb, "norm_weight", *norm_weight, "in_weight", in_weight, {depth, hd}, "[depth, hidden]");
    check_tensor(kDpb, "norm_bias", *norm_bias, "in_weight", in_weight, {depth, hd}, "[depth, hidden]");
  }
  detail::check_float_tensor(kDpb, "out_weight", out_weight);
  TORCH_CHECK_VALUE(out_weight.dim() == 2 && out_weight.size(0) >= 1 && out_weight.size(1) == hd, "[", kDpb,
                    "] out_weight must be [num_heads, hidden] = ", tuple_of({-1, hd}), " with num_heads >= 1, got ",
                    tuple_of(out_weight.sizes()));
  check_tensor(kDpb, "out_weight", out_weight, "in_weight", in_weight, {out_weight.size(0), hd}, "[num_heads, hidden]");
  check_tensor(kDpb, "out_bias", out_bias, "in_weight", in_weight, {out_weight.size(0)}, "[num_heads]");
  return detail::translate_errors([&] {
    const kernels::DpbParams p{out_weight.size(0), hd, depth, log_distance, given(norm_weight), q_len, k_len};
    kernels::validate(p, kDpb);
    return p;
  });
}

// The tensors in the compute dtype, contiguous, kept alive while the kernel reads them.
struct DpbCompute {
  std::vector<at::Tensor> t;  // in_w, in_b, hid_w, hid_b, ln_w, ln_b, out_w, out_b
  DpbCompute(at::ScalarType compute, std::initializer_list<at::Tensor> tensors) {
    for (const at::Tensor& x : tensors) t.push_back(x.defined() ? x.to(compute).contiguous() : x);
  }
  template <class T>
  kernels::DpbWeights<T> weights() const {
    auto p = [&](size_t k) -> const T* { return t[k].defined() ? t[k].data_ptr<T>() : nullptr; };
    return {p(0), p(1), p(2), p(3), p(4), p(5), p(6), p(7)};
  }
};

at::Tensor dpb_cpu(const at::Tensor& in_weight, const at::Tensor& in_bias, const at::Tensor& hidden_weight,
                   const at::Tensor& hidden_bias, const Opt& norm_weight, const Opt& norm_bias,
                   const at::Tensor& out_weight, const at::Tensor& out_bias, int64_t q_len, int64_t k_len,
                   bool log_distance) {
  const kernels::DpbParams p = checked_dpb(in_weight, in_bias, hidden_weight, hidden_bias, norm_weight, norm_bias,
                                           out_weight, out_bias, q_len, k_len, log_distance);
  const at::ScalarType compute = detail::compute_dtype(in_weight.scalar_type());
  const DpbCompute c(compute, {in_weight, in_bias, hidden_weight, hidden_bias, value_of(norm_weight),
                               value_of(norm_bias), out_weight, out_bias});
  at::Tensor out = at::empty({p.num_heads, kernels::dpb_columns(p)}, at::TensorOptions().dtype(compute));
  detail::translate_errors([&] {
    if (compute == at::kDouble) {
      kernels::dpb_offset_bias(p, c.weights<double>(), out.data_ptr<double>(), kDpb);
    } else {
      kernels::dpb_offset_bias(p, c.weights<float>(), out.data_ptr<float>(), kDpb);
    }
  });
  return out.to(in_weight.scalar_type());
}

using DpbGrads =
    std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

// Without the norm its two gradients are empty [0] tensors (the schema has no optional outputs).
DpbGrads dpb_backward_cpu(const at::Tensor& grad, const at::Tensor& in_weight, const at::Tensor& in_bias,
                          const at::Tensor& hidden_weight, const at::Tensor& hidden_bias, const Opt& norm_weight,
                          const Opt& norm_bias, const at::Tensor& out_weight, const at::Tensor& out_bias, int64_t q_len,
                          int64_t k_len, bool log_distance) {
  const kernels::DpbParams p = checked_dpb(in_weight, in_bias, hidden_weight, hidden_bias, norm_weight, norm_bias,
                                           out_weight, out_bias, q_len, k_len, log_distance);
  detail::check_float_tensor(kDpb, "grad", grad);
  const int64_t columns = kernels::dpb_columns(p);
  TORCH_CHECK_VALUE(grad.dim() == 2 && grad.size(0) == p.num_heads && grad.size(1) == columns, "[", kDpb,
                    "] grad must be [H, q_len + k_len - 1] = ", tuple_of({p.num_heads, columns}), ", got ",
                    tuple_of(grad.sizes()));
  const at::ScalarType compute = detail::compute_dtype(in_weight.scalar_type());
  const DpbCompute c(compute, {in_weight, in_bias, hidden_weight, hidden_bias, value_of(norm_weight),
                               value_of(norm_bias), out_weight, out_bias});
  const at::Tensor g = grad.to(compute).contiguous();
  const auto opts = at::TensorOptions().dtype(compute);
  std::vector<at::Tensor> out;
  for (size_t k = 0; k < c.t.size(); ++k)
    out.push_back(c.t[k].defined() ? at::empty_like(c.t[k]) : at::empty({0}, opts));
  detail::translate_errors([&] {
    auto run = [&]<class T>(T*) {
      auto ptr = [&](size_t k) -> T* { return c.t[k].defined() ? out[k].data_ptr<T>() : nullptr; };
      kernels::dpb_offset_bias_backward(
          p, c.weights<T>(), g.data_ptr<T>(),
          kernels::DpbGradients<T>{ptr(0), ptr(1), ptr(2), ptr(3), ptr(4), ptr(5), ptr(6), ptr(7)}, kDpb);
    };
    if (compute == at::kDouble)
      run(static_cast<double*>(nullptr));
    else
      run(static_cast<float*>(nullptr));
  });
  const at::ScalarType dtype = in_weight.scalar_type();
  return {out[0].to(dtype), out[1].to(dtype), out[2].to(dtype), out[3].to(dtype),
          out[4].to(dtype), out[5].to(dtype), out[6].to(dtype), out[7].to(dtype)};
}

template <class Signature>
c10::TypedOperatorHandle<Signature> find_op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Signature>();
}

at::Tensor call_dpb(const at::Tensor& in_weight, const at::Tensor& in_bias, const at::Tensor& hidden_weight,
                    const at::Tensor& hidden_bias, const Opt& norm_weight, const Opt& norm_bias,
                    const at::Tensor& out_weight, const at::Tensor& out_bias, int64_t q_len, int64_t k_len,
                    bool log_distance) {
  static const auto op = find_op<decltype(dpb_cpu)>("posenc::dpb_offset_bias");
  return op.call(in_weight, in_bias, hidden_weight, hidden_bias, norm_weight, norm_bias, out_weight, out_bias, q_len,
                 k_len, log_distance);
}

class DpbFunction : public torch::autograd::Function<DpbFunction> {
 public:
  // Optional tensors as c10::optional: autograd counts only the given ones as inputs.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& in_weight, const at::Tensor& in_bias,
                            const at::Tensor& hidden_weight, const at::Tensor& hidden_bias, const Opt& norm_weight,
                            const Opt& norm_bias, const at::Tensor& out_weight, const at::Tensor& out_bias,
                            int64_t q_len, int64_t k_len, bool log_distance) {
    at::AutoDispatchBelowADInplaceOrView guard;
    at::Tensor out = call_dpb(in_weight, in_bias, hidden_weight, hidden_bias, norm_weight, norm_bias, out_weight,
                              out_bias, q_len, k_len, log_distance);  // validates
    ctx->save_for_backward({in_weight, in_bias, hidden_weight, hidden_bias, value_of(norm_weight), value_of(norm_bias),
                            out_weight, out_bias});
    ctx->saved_data["q_len"] = q_len;
    ctx->saved_data["k_len"] = k_len;
    ctx->saved_data["log_distance"] = log_distance;
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list s = ctx->get_saved_variables();
    const auto& d = ctx->saved_data;
    static const auto op = find_op<decltype(dpb_backward_cpu)>("posenc::dpb_offset_bias_backward");
    const bool norm = s[4].defined();
    const DpbGrads g = op.call(grads[0], s[0], s[1], s[2], s[3], norm ? Opt(s[4]) : Opt(), norm ? Opt(s[5]) : Opt(),
                               s[6], s[7], d.at("q_len").toInt(), d.at("k_len").toInt(), d.at("log_distance").toBool());
    // One per forward argument; none for the absent norm and the integers.
    return {std::get<0>(g),
            std::get<1>(g),
            std::get<2>(g),
            std::get<3>(g),
            norm ? std::get<4>(g) : at::Tensor(),
            norm ? std::get<5>(g) : at::Tensor(),
            std::get<6>(g),
            std::get<7>(g),
            at::Tensor(),
            at::Tensor(),
            at::Tensor()};
  }
};

at::Tensor dpb_autograd(const at::Tensor& in_weight, const at::Tensor& in_bias, const at::Tensor& hidden_weight,
                        const at::Tensor& hidden_bias, const Opt& norm_weight, const Opt& norm_bias,
                        const at::Tensor& out_weight, const at::Tensor& out_bias, int64_t q_len, int64_t k_len,
                        bool log_distance) {
  return DpbFunction::apply(in_weight, in_bias, hidden_weight, hidden_bias, norm_weight, norm_bias, out_weight,
                            out_bias, q_len, k_len, log_distance);
}

// ---------------------------------------------------------------------------
// CPB

kernels::CpbParams checked_cpb(const at::Tensor& fc1_weight, const at::Tensor& fc1_bias, const at::Tensor& fc2_weight,
                               int64_t height, int64_t width, int64_t pretrained_height, int64_t pretrained_width) {
  detail::check_float_tensor(kCpb, "fc1_weight", fc1_weight);
  TORCH_CHECK_VALUE(fc1_weight.dim() == 2 && fc1_weight.size(0) >= 1 && fc1_weight.size(1) == 2, "[", kCpb,
                    "] fc1_weight must be [hidden, 2] with hidden >= 1, got ", tuple_of(fc1_weight.sizes()));
  const int64_t hd = fc1_weight.size(0);
  check_tensor(kCpb, "fc1_bias", fc1_bias, "fc1_weight", fc1_weight, {hd}, "[hidden]");
  detail::check_float_tensor(kCpb, "fc2_weight", fc2_weight);
  TORCH_CHECK_VALUE(fc2_weight.dim() == 2 && fc2_weight.size(0) >= 1 && fc2_weight.size(1) == hd, "[", kCpb,
                    "] fc2_weight must be [num_heads, hidden] = ", tuple_of({-1, hd}), " with num_heads >= 1, got ",
                    tuple_of(fc2_weight.sizes()));
  check_tensor(kCpb, "fc2_weight", fc2_weight, "fc1_weight", fc1_weight, {fc2_weight.size(0), hd},
               "[num_heads, hidden]");
  return detail::translate_errors([&] {
    const kernels::CpbParams p{fc2_weight.size(0), hd, height, width, pretrained_height, pretrained_width};
    kernels::validate(p, kCpb);
    return p;
  });
}

at::Tensor cpb_cpu(const at::Tensor& fc1_weight, const at::Tensor& fc1_bias, const at::Tensor& fc2_weight,
                   int64_t height, int64_t width, int64_t pretrained_height, int64_t pretrained_width) {
  const kernels::CpbParams p =
      checked_cpb(fc1_weight, fc1_bias, fc2_weight, height, width, pretrained_height, pretrained_width);
  const at::ScalarType compute = detail::compute_dtype(fc1_weight.scalar_type());
  const at::Tensor w1 = fc1_weight.to(compute).contiguous(), b1 = fc1_bias.to(compute).contiguous();
  const at::Tensor w2 = fc2_weight.to(compute).contiguous();
  at::Tensor out =
      at::empty({p.num_heads, kernels::cpb_rows(p), kernels::cpb_cols(p)}, at::TensorOptions().dtype(compute));
  detail::translate_errors([&] {
    if (compute == at::kDouble) {
      kernels::cpb_grid_bias<double>(p, {w1.data_ptr<double>(), b1.data_ptr<double>(), w2.data_ptr<double>()},
                                     out.data_ptr<double>(), kCpb);
    } else {
      kernels::cpb_grid_bias<float>(p, {w1.data_ptr<float>(), b1.data_ptr<float>(), w2.data_ptr<float>()},
                                    out.data_ptr<float>(), kCpb);
    }
  });
  return out.to(fc1_weight.scalar_type());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> cpb_backward_cpu(const at::Tensor& grad, const at::Tensor& fc1_weight,
                                                                const at::Tensor& fc1_bias,
                                                                const at::Tensor& fc2_weight, int64_t height,
                                                                int64_t width, int64_t pretrained_height,
                                                                int64_t pretrained_width) {
  const kernels::CpbParams p =
      checked_cpb(fc1_weight, fc1_bias, fc2_weight, height, width, pretrained_height, pretrained_width);
  detail::check_float_tensor(kCpb, "grad", grad);
  const std::vector<int64_t> want{p.num_heads, kernels::cpb_rows(p), kernels::cpb_cols(p)};
  TORCH_CHECK_VALUE(grad.sizes() == at::IntArrayRef(want), "[", kCpb,
                    "] grad must be [H, 2*height-1, 2*width-1] = ", tuple_of(want), ", got ", tuple_of(grad.sizes()));
  const at::ScalarType compute = detail::compute_dtype(fc1_weight.scalar_type());
  const at::Tensor w1 = fc1_weight.to(compute).contiguous(), b1 = fc1_bias.to(compute).contiguous();
  const at::Tensor w2 = fc2_weight.to(compute).contiguous(), g = grad.to(compute).contiguous();
  at::Tensor g1 = at::empty_like(w1), gb = at::empty_like(b1), g2 = at::empty_like(w2);
  detail::translate_errors([&] {
    auto run = [&]<class T>(T*) {
      kernels::cpb_grid_bias_backward<T>(p, {w1.data_ptr<T>(), b1.data_ptr<T>(), w2.data_ptr<T>()}, g.data_ptr<T>(),
                                         {g1.data_ptr<T>(), gb.data_ptr<T>(), g2.data_ptr<T>()}, kCpb);
    };
    if (compute == at::kDouble)
      run(static_cast<double*>(nullptr));
    else
      run(static_cast<float*>(nullptr));
  });
  const at::ScalarType dtype = fc1_weight.scalar_type();
  return {g1.to(dtype), gb.to(dtype), g2.to(dtype)};
}

at::Tensor call_cpb(const at::Tensor& fc1_weight, const at::Tensor& fc1_bias, const at::Tensor& fc2_weight,
                    int64_t height, int64_t width, int64_t pretrained_height, int64_t pretrained_width) {
  static const auto op = find_op<decltype(cpb_cpu)>("posenc::cpb_grid_bias");
  return op.call(fc1_weight, fc1_bias, fc2_weight, height, width, pretrained_height, pretrained_width);
}

class CpbFunction : public torch::autograd::Function<CpbFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& fc1_weight, const at::Tensor& fc1_bias,
                            const at::Tensor& fc2_weight, int64_t height, int64_t width, int64_t pretrained_height,
                            int64_t pretrained_width) {
    at::AutoDispatchBelowADInplaceOrView guard;
    at::Tensor out = call_cpb(fc1_weight, fc1_bias, fc2_weight, height, width, pretrained_height, pretrained_width);
    ctx->save_for_backward({fc1_weight, fc1_bias, fc2_weight});
    ctx->saved_data["height"] = height;
    ctx->saved_data["width"] = width;
    ctx->saved_data["pretrained_height"] = pretrained_height;
    ctx->saved_data["pretrained_width"] = pretrained_width;
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list s = ctx->get_saved_variables();
    const auto& d = ctx->saved_data;
    static const auto op = find_op<decltype(cpb_backward_cpu)>("posenc::cpb_grid_bias_backward");
    auto [g1, gb, g2] = op.call(grads[0], s[0], s[1], s[2], d.at("height").toInt(), d.at("width").toInt(),
                                d.at("pretrained_height").toInt(), d.at("pretrained_width").toInt());
    return {g1, gb, g2, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor cpb_autograd(const at::Tensor& fc1_weight, const at::Tensor& fc1_bias, const at::Tensor& fc2_weight,
                        int64_t height, int64_t width, int64_t pretrained_height, int64_t pretrained_width) {
  return CpbFunction::apply(fc1_weight, fc1_bias, fc2_weight, height, width, pretrained_height, pretrained_width);
}

}  // namespace

namespace ops {

at::Tensor dpb_offset_bias(const DpbTensors& mlp, int64_t q_len, int64_t k_len, bool log_distance) {
  auto opt = [](const at::Tensor& t) { return t.defined() ? Opt(t) : Opt(); };
  return call_dpb(mlp.in_weight, mlp.in_bias, mlp.hidden_weight, mlp.hidden_bias, opt(mlp.norm_weight),
                  opt(mlp.norm_bias), mlp.out_weight, mlp.out_bias, q_len, k_len, log_distance);
}

at::Tensor cpb_grid_bias(const at::Tensor& fc1_weight, const at::Tensor& fc1_bias, const at::Tensor& fc2_weight,
                         int64_t height, int64_t width, int64_t pretrained_height, int64_t pretrained_width) {
  return call_cpb(fc1_weight, fc1_bias, fc2_weight, height, width, pretrained_height, pretrained_width);
}

}  // namespace ops

// DPB (x-transformers): MLP(phi(i' - j)) per offset; CPB (Swin V2): 16 sigmoid(MLP(log-spaced (dy, dx))).
TORCH_LIBRARY_FRAGMENT(posenc, m) {
  m.def(
      "dpb_offset_bias(Tensor in_weight, Tensor in_bias, Tensor hidden_weight, Tensor hidden_bias, "
      "Tensor? norm_weight, Tensor? norm_bias, Tensor out_weight, Tensor out_bias, int q_len, int k_len, "
      "bool log_distance=False) -> Tensor");
  m.def(
      "dpb_offset_bias_backward(Tensor grad, Tensor in_weight, Tensor in_bias, Tensor hidden_weight, "
      "Tensor hidden_bias, Tensor? norm_weight, Tensor? norm_bias, Tensor out_weight, Tensor out_bias, int q_len, "
      "int k_len, bool log_distance) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)");
  m.def(
      "cpb_grid_bias(Tensor fc1_weight, Tensor fc1_bias, Tensor fc2_weight, int height, int width, "
      "int pretrained_height=0, int pretrained_width=0) -> Tensor");
  m.def(
      "cpb_grid_bias_backward(Tensor grad, Tensor fc1_weight, Tensor fc1_bias, Tensor fc2_weight, int height, "
      "int width, int pretrained_height, int pretrained_width) -> (Tensor, Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(posenc, CPU, m) {
  m.impl("dpb_offset_bias", dpb_cpu);
  m.impl("dpb_offset_bias_backward", dpb_backward_cpu);
  m.impl("cpb_grid_bias", cpb_cpu);
  m.impl("cpb_grid_bias_backward", cpb_backward_cpu);
}

TORCH_LIBRARY_IMPL(posenc, Autograd, m) {
  m.impl("dpb_offset_bias", dpb_autograd);
  m.impl("cpb_grid_bias", cpb_autograd);
}

}  // namespace posenc::nn
