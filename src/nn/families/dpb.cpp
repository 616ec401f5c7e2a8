// The dynamic position biases' torch layer, all of it in one file (docs/families.md): its op, the
// contract its one holder works through, the typed C++ front end and the
// descriptor. Each part keeps its own notes below.
//
// Its op. The dynamic position bias ops, all of each in one place: schema, CPU kernel
// call, autograd and the typed C++ API (posenc/nn/dpb_bias.h).
//   dpb_offset_bias           the DPB MLP's tensors -> rows [H, q_len + k_len - 1]
//   dpb_offset_bias_backward  grad rows -> the gradient of each tensor
//   cpb_grid_bias             fc1_weight, fc1_bias, fc2_weight -> grid [H, 2Hg-1, 2Wg-1]
//   cpb_grid_bias_backward    grad grid -> the three gradients
// The backwards have no autograd kernel of their own: first derivatives only,
// as the fused attention that consumes the rows and the grid.
//
// Its module. The dynamic position biases' contracts (posenc/nn/family_contract.h): the
// MLPs' parameters, and per call the offset rows (1D) or the grid (2D) from
// the dpb ops, whose autograd carries every parameter's gradient. The fused
// attention gets the rows / grid; the dense form spreads them to [H, Tq, Tk].
// Then the typed C++ front ends and the 1D family's descriptor (families/families.h).
#include "posenc/nn/dpb_bias.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>
#include <tuple>
#include <vector>

#include "families/families.h"
#include "op_support.h"
#include "posenc/kernels/dpb.h"

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

namespace posenc::nn {
namespace {

constexpr const char* kDpbModule = "DynamicPositionBias";
constexpr const char* kCpbModule = "ContinuousPositionBias2d";

// torch.nn.Linear.reset_parameters: kaiming_uniform(a = sqrt(5)) is U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
// and the bias the same bound.
void linear_init(at::Tensor& t, int64_t fan_in) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  t.uniform_(-bound, bound);
}

at::Tensor as(const at::Tensor& x, at::ScalarType t) { return x.defined() ? x.to(t) : x; }

// ---------------------------------------------------------------------------
// DynamicPositionBias: state in_weight, in_bias, hidden_weight, hidden_bias, [norm_weight, norm_bias], out_*.

enum DpbSlot { kInWeight, kInBias, kHiddenWeight, kHiddenBias, kNormWeight, kNormBias, kOutWeight, kOutBias };

at::Tensor dpb_rows(const FamilySettings& s, const FamilyState& t, int64_t q_len, int64_t k_len, at::ScalarType dtype) {
  return ops::dpb_offset_bias({as(t[kInWeight], dtype), as(t[kInBias], dtype), as(t[kHiddenWeight], dtype),
                               as(t[kHiddenBias], dtype), as(t[kNormWeight], dtype), as(t[kNormBias], dtype),
                               as(t[kOutWeight], dtype), as(t[kOutBias], dtype)},
                              q_len, k_len, s.flag("log_distance"));
}

// [H, q_len, k_len]: the rows read at j - i' + k_len - 1 = j - i + q_len - 1.
at::Tensor dpb_dense(const FamilySettings& s, const FamilyState& t, int64_t q_len, int64_t k_len) {
  const int64_t heads = s.integer("num_heads");
  const bool causal = s.flag("causal");
  if (causal) families::check_causal_lengths(kDpbModule, q_len, k_len);
  if (q_len == 0 || k_len == 0) return at::zeros({heads, q_len, k_len}, t[kInWeight].options());
  const at::Tensor rows = dpb_rows(s, t, q_len, k_len, t[kInWeight].scalar_type());
  return families::spread_offset_rows(rows, q_len, k_len, causal);
}

void dpb_terms(const FamilySettings& s, const FamilyState& t, AttentionTerms& out, int64_t q_len, int64_t k_len,
               at::ScalarType compute) {
  if (s.flag("causal")) out.causal = true;
  if (q_len == 0 || k_len == 0) return;  // no pair, no row
  const at::Tensor rows = dpb_rows(s, t, q_len, k_len, compute);
  families::accumulate(out.offset_bias, rows);
}

FamilyContract dpb_contract() {
  FamilyContract c;
  c.module = kDpbModule;
  c.summary =
      "x-transformers' DynamicPositionBias: for query i (at i' = i + k_len - q_len) and key j, bias[h, i, j] = "
      "MLP(phi(i' - j))_h, phi(r) = r or sign(r) log(1 + |r|) (log_distance), with the MLP Linear(1, hidden) "
      "[+ LayerNorm] + SiLU, depth - 1 times Linear(hidden, hidden) [+ LayerNorm] + SiLU, then Linear(hidden, "
      "num_heads); -inf where j > i' when causal. x-transformers builds it with hidden = model dim // 4, depth 2, no "
      "norm, linear distance. Parameters (nn.Linear's [out, in] layout, hidden layers stacked): in_weight "
      "[hidden, 1], in_bias [hidden], hidden_weight [depth-1, hidden, hidden], hidden_bias [depth-1, hidden], "
      "norm_weight / norm_bias [depth, hidden] (norm only), out_weight [num_heads, hidden], out_bias [num_heads].";
  c.settings = {
      size_setting("num_heads", "H"),
      size_setting("hidden", "the MLP's width (x-transformers: model dim // 4)"),
      integer_setting("depth", 2, "Linear + SiLU layers before the output layer", 1),
      flag_setting("log_distance", false, "phi(r) = sign(r) log(1 + |r|) instead of r"),
      flag_setting("norm", false, "LayerNorm before each SiLU"),
      flag_setting("causal", false, "-inf on keys after the query (a decoder)"),
  };
  c.state = {{"in_weight"},         {"in_bias"},          {"hidden_weight"}, {"hidden_bias"},
             {"norm_weight", true, "norm"}, {"norm_bias", true, "norm"}, {"out_weight"},    {"out_bias"}};
  c.check = [](const FamilySettings& s) {
    detail::translate_errors([&] {
      kernels::validate(kernels::DpbParams{s.integer("num_heads"), s.integer("hidden"), s.integer("depth"),
                                           s.flag("log_distance"), s.flag("norm"), 0, 0},
                        kDpbModule);
    });
  };
  c.shapes = [](const FamilySettings& s) {
    const int64_t hd = s.integer("hidden"), depth = s.integer("depth"), heads = s.integer("num_heads");
    return std::vector<std::vector<int64_t>>{{hd, 1},    {hd},     {depth - 1, hd, hd}, {depth - 1, hd},
                                             {depth, hd}, {depth, hd}, {heads, hd},        {heads}};
  };
  c.reset = [](const FamilySettings& s, FamilyState& t) {
    const int64_t hd = s.integer("hidden");
    linear_init(t[kInWeight], 1);
    linear_init(t[kInBias], 1);
    linear_init(t[kHiddenWeight], hd);
    linear_init(t[kHiddenBias], hd);
    if (s.flag("norm")) {
      t[kNormWeight].fill_(1.0);
      t[kNormBias].zero_();
    }
    linear_init(t[kOutWeight], hd);
    linear_init(t[kOutBias], hd);
  };
  c.dense = dpb_dense;
  c.terms = dpb_terms;
  // [num_heads, q_len + k_len - 1]: the bias of offset d = j - i' at column d + k_len - 1.
  c.methods = {{"offset_rows", {"q_len", "k_len", "dtype"},
                [](const FamilySettings& s, const FamilyState& t, const MethodCall& call) {
                  return dpb_rows(s, t, call.q_len, call.k_len, call.dtype.value_or(t[kInWeight].scalar_type()));
                }}};
  c.shown = {"num_heads", "hidden", "depth", "log_distance", "norm", "causal"};
  return c;
}

// ---------------------------------------------------------------------------
// ContinuousPositionBias2d: state fc1_weight, fc1_bias, fc2_weight.

void check_cells(const FamilySettings& s, int64_t q_len, int64_t k_len) {
  const int64_t cells = s.integer("height") * s.integer("width");
  TORCH_CHECK_VALUE(q_len == cells && k_len == cells, "[", kCpbModule, "] q_len and k_len must both be height*width = ",
                    cells, ", got ", q_len, " and ", k_len);
}

at::Tensor cpb_grid(const FamilySettings& s, const FamilyState& t, at::ScalarType dtype) {
  return ops::cpb_grid_bias(t[0].to(dtype), t[1].to(dtype), t[2].to(dtype), s.integer("height"), s.integer("width"),
                            s.integer("pretrained_height"), s.integer("pretrained_width"));
}

// [H, HW, HW]: bias[h, i, j] = grid[h, y_j - y_i + H - 1, x_j - x_i + W - 1].
at::Tensor cpb_dense(const FamilySettings& s, const FamilyState& t, int64_t q_len, int64_t k_len) {
  check_cells(s, q_len, k_len);
  const int64_t height = s.integer("height"), width = s.integer("width"), cells = height * width;
  const at::Tensor g = cpb_grid(s, t, t[0].scalar_type());
  const at::Tensor cell = at::arange(cells, at::kLong);
  const at::Tensor y = at::floor_divide(cell, width), x = at::remainder(cell, width);
  const at::Tensor row = y.unsqueeze(0) - y.unsqueeze(1) + (height - 1);
  const at::Tensor col = x.unsqueeze(0) - x.unsqueeze(1) + (width - 1);
  const at::Tensor flat = (row * (2 * width - 1) + col).flatten();
  return g.flatten(1).index_select(1, flat).view({s.integer("num_heads"), cells, cells});
}

void cpb_terms(const FamilySettings& s, const FamilyState& t, AttentionTerms& out, int64_t q_len, int64_t k_len,
               at::ScalarType compute) {
  check_cells(s, q_len, k_len);
  const at::Tensor g = cpb_grid(s, t, compute);
  families::accumulate(out.grid_bias, g);
  out.grid_height = s.integer("height");
  out.grid_width = s.integer("width");
}

FamilyContract cpb_contract() {
  FamilyContract c;
  c.module = kCpbModule;
  c.summary =
      "Swin Transformer V2's continuous position bias (Liu et al. 2022) on a height x width grid flattened as "
      "y*width + x: bias[h, i, j] = 16 sigmoid(W2 ReLU(W1 (c(y_i - y_j, height), c(x_i - x_j, width)) + b1))_h with "
      "c(t, n) = sign(8t/(n-1)) log2(1 + |8t/(n-1)|) / 3 (n: the pretrained window's extent when given); q_len = "
      "k_len = height*width. Parameters: fc1_weight [hidden, 2], fc1_bias [hidden], fc2_weight [num_heads, hidden] "
      "(Swin's cpb_mlp.0 and cpb_mlp.2, no second bias), N(0, init_std^2) weights and a zero bias (Swin's init).";
  c.settings = {
      size_setting("num_heads", "H"),
      size_setting("height", "the grid's rows"),
      size_setting("width", "the grid's columns"),
      integer_setting("hidden", 512, "Swin V2's cpb_mlp width", 1),
      // Checked by the kernel's validator: "must be 0 (the grid's) or >= 2".
      integer_setting("pretrained_height", 0, "the pretrained window's rows (0: the grid's), else >= 2", kAnyInteger),
      integer_setting("pretrained_width", 0, "the pretrained window's columns (0: the grid's), else >= 2",
                      kAnyInteger),
      real_setting("init_std", 0.02, "the weights' N(0, init_std^2) draws"),
  };
  c.state = {{"fc1_weight"}, {"fc1_bias"}, {"fc2_weight"}};
  c.check = [](const FamilySettings& s) {
    detail::translate_errors([&] {
      kernels::validate(kernels::CpbParams{s.integer("num_heads"), s.integer("hidden"), s.integer("height"),
                                           s.integer("width"), s.integer("pretrained_height"),
                                           s.integer("pretrained_width")},
                        kCpbModule);
    });
    const double init_std = s.real("init_std");
    TORCH_CHECK_VALUE(std::isfinite(init_std) && init_std >= 0, "[", kCpbModule, "] init_std must be finite and >= 0, got ",
                      init_std);
  };
  c.shapes = [](const FamilySettings& s) {
    const int64_t hd = s.integer("hidden");
    return std::vector<std::vector<int64_t>>{{hd, 2}, {hd}, {s.integer("num_heads"), hd}};
  };
  c.reset = [](const FamilySettings& s, FamilyState& t) {
    // Swin V2's _init_weights: trunc_normal_(std) (cut at +-2, i.e. +-100 std: never), zero bias.
    t[0].normal_(0.0, s.real("init_std"));
    t[1].zero_();
    t[2].normal_(0.0, s.real("init_std"));
  };
  c.dense = cpb_dense;
  c.terms = cpb_terms;
  // [H, 2*height-1, 2*width-1]: element (y_j - y_i + height - 1, x_j - x_i + width - 1).
  c.methods = {{"grid", {"dtype"}, [](const FamilySettings& s, const FamilyState& t, const MethodCall& call) {
                  return cpb_grid(s, t, call.dtype.value_or(t[0].scalar_type()));
                }}};
  c.shown = {"num_heads", "height", "width", "hidden", "pretrained_height", "pretrained_width"};
  return c;
}

const FamilyContractRegistration registered_dpb(dpb_contract());
const FamilyContractRegistration registered_cpb(cpb_contract());

}  // namespace

DynamicPositionBiasImpl::DynamicPositionBiasImpl(const DynamicPositionBiasOptions& o)
    : FamilyBiasImpl(kDpbModule, FamilySettings()
                               .set("num_heads", o.num_heads())
                               .set("hidden", o.hidden())
                               .set("depth", o.depth())
                               .set("log_distance", o.log_distance())
                               .set("norm", o.norm())
                               .set("causal", o.causal())),
      options_(o) {}

at::Tensor DynamicPositionBiasImpl::offset_rows(int64_t q_len, int64_t k_len, c10::optional<at::ScalarType> dtype) {
  return dpb_rows(settings(), state(), q_len, k_len, dtype.value_or(state()[kInWeight].scalar_type()));
}

ContinuousPositionBias2dImpl::ContinuousPositionBias2dImpl(const ContinuousPositionBias2dOptions& o)
    : FamilyBiasImpl(kCpbModule, FamilySettings()
                               .set("num_heads", o.num_heads())
                               .set("height", o.height())
                               .set("width", o.width())
                               .set("hidden", o.hidden())
                               .set("pretrained_height", o.pretrained_height())
                               .set("pretrained_width", o.pretrained_width())
                               .set("init_std", o.init_std())),
      options_(o) {}

at::Tensor ContinuousPositionBias2dImpl::grid(c10::optional<at::ScalarType> dtype) {
  return cpb_grid(settings(), state(), dtype.value_or(state()[0].scalar_type()));
}

}  // namespace posenc::nn

// The 1D family's descriptor: what `posenc encodings`, the registry and the report read.
namespace posenc::nn::families {
namespace {

void add_dpb(std::vector<EncodingFamily>& out) {
  EncodingFamily dpb;
  dpb.name = "dpb";
  dpb.point = EncodingPoint::kLogitBias;
  dpb.description =
      "learned MLP (1 -> dim/4 SiLU -> dim/4 SiLU -> heads) of the offset i - j, one bias per offset and head, "
      "causal in the decoder (x-transformers' DynamicPositionBias; Swin V2's continuous bias in 1D)";
  dpb.make_attention = [](const EncodingConfig& c, AttentionEncodings& slots) {
    // x-transformers sizes the MLP at the model dim // 4.
    slots.bias = DynamicPositionBias(
        DynamicPositionBiasOptions(c.num_heads, std::max<int64_t>(c.dim / 4, 1)).causal(c.causal));
  };
  dpb.module = kDpbModule;
  dpb.preset = [](const EncodingConfig& c) {
    // x-transformers sizes the MLP at the model dim // 4.
    FamilySettings s;
    return s.set("num_heads", c.num_heads).set("hidden", std::max<int64_t>(c.dim / 4, 1)).set("causal", c.causal);
  };
  out.push_back(std::move(dpb));
}

const Registration registered(80, add_dpb);

}  // namespace
}  // namespace posenc::nn::families
