// KERPLE torch layer, all of it in one file (docs/families.md): its op, the
// contract its one holder works through, the typed C++ front end and the
// descriptor. Each part keeps its own notes below.
//
// Its op. The KERPLE offset-rows op, all of it in one place: schema, CPU kernel call,
// autograd and the typed C++ API (posenc/nn/kerple_bias.h).
//   kerple_offset_bias           r1, r2 [H] -> rows [H, q_len + k_len - 1]
//   kerple_offset_bias_backward  grad rows -> (grad_r1, grad_r2) [H]
// The backward has no autograd kernel of its own: first derivatives only, as
// the fused attention that consumes the rows.
//
// Its module. KERPLE's contract (posenc/nn/family_contract.h): two parameters per head,
// kept in range by the authors' projection, and per call the offset rows of
// the kerple_offset_bias op, whose autograd carries their gradients. Then the
// typed C++ front end and the family's descriptor (families/families.h).
#include "posenc/nn/kerple_bias.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <cmath>
#include <limits>
#include <string>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>
#include <tuple>
#include <vector>

#include "families/families.h"
#include "op_support.h"
#include "posenc/kernels/kerple.h"

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

namespace posenc::nn {
namespace {

constexpr const char* kModule = "KerpleBias";

kernels::KerpleKind kind_of(const FamilySettings& s) { return kernels::parse_kerple_kind(s.word("kind"), kModule); }

void check(const FamilySettings& s) {
  const double eps = s.real("eps");
  TORCH_CHECK_VALUE(eps > 0 && eps <= 1, "[", kModule, "] eps must be in (0, 1], got ", eps);
  if (const auto r1 = s.optional_real("r1")) {
    TORCH_CHECK_VALUE(*r1 > 0 && std::isfinite(*r1), "[", kModule, "] r1 must be > 0, got ", *r1);
  }
  if (const auto r2 = s.optional_real("r2")) {
    if (kind_of(s) == kernels::KerpleKind::kPower) {
      TORCH_CHECK_VALUE(*r2 > 0 && *r2 <= 2, "[", kModule, "] r2 must be in (0, 2], got ", *r2);
    }
    TORCH_CHECK_VALUE(*r2 > 0 && std::isfinite(*r2), "[", kModule, "] r2 must be > 0, got ", *r2);
  }
}

// In place, outside autograd; NaN compares false everywhere, so a NaN parameter is left for the op to refuse.
at::Tensor project(const FamilySettings& s, const FamilyState& state) {
  at::NoGradGuard no_grad;
  const double eps = s.real("eps");
  const double r2_max = kind_of(s) == kernels::KerpleKind::kPower ? 2.0 : std::numeric_limits<double>::infinity();
  at::Tensor r1 = state[0], r2 = state[1];
  // Traced, the clamps are recorded as they are (a no-op on values in range).
  const bool traced = !detail::holds_data(r1) || !detail::holds_data(r2);
  if (traced || (r1 < eps).any().item<bool>()) r1.clamp_min_(eps);
  if (traced || (r2 < eps).any().item<bool>() || (r2 > r2_max).any().item<bool>()) r2.clamp_(eps, r2_max);
  return {};
}

void reset(const FamilySettings& s, FamilyState& state) {
  // The authors' draws: r1 = 2 U(0, 1), r2 = U(0, 1).
  if (const auto r1 = s.optional_real("r1")) state[0].fill_(*r1); else state[0].uniform_(0.0, 2.0);
  if (const auto r2 = s.optional_real("r2")) state[1].fill_(*r2); else state[1].uniform_(0.0, 1.0);
  project(s, state);
}

// [H, q_len, k_len]: the offset rows read at j - i' + k_len - 1 = j - i + q_len - 1.
at::Tensor dense(const FamilySettings& s, const FamilyState& state, int64_t q_len, int64_t k_len) {
  const bool causal = s.flag("causal");
  const int64_t heads = s.integer("num_heads");
  if (causal) families::check_causal_lengths(kModule, q_len, k_len);
  if (q_len == 0 || k_len == 0) return at::zeros({heads, q_len, k_len}, state[0].options());
  project(s, state);
  const at::Tensor rows = ops::kerple_offset_bias(state[0], state[1], q_len, k_len, kind_of(s));
  return families::spread_offset_rows(rows, q_len, k_len, causal);
}

void terms(const FamilySettings& s, const FamilyState& state, AttentionTerms& out, int64_t q_len, int64_t k_len,
           at::ScalarType compute) {
  if (s.flag("causal")) out.causal = true;
  if (q_len == 0 || k_len == 0) return;  // no pair, no row
  project(s, state);
  const at::Tensor rows =
      ops::kerple_offset_bias(state[0].to(compute), state[1].to(compute), q_len, k_len, kind_of(s));
  families::accumulate(out.offset_bias, rows);
}

FamilyContract contract() {
  FamilyContract c;
  c.module = kModule;
  c.summary =
      "KERPLE (Chi et al. 2022): bias[h, i, j] = -r1_h log(1 + r2_h |i' - j|) (kind \"log\") or -r1_h |i' - j|^r2_h "
      "(kind \"power\", r2 <= 2), -inf where j > i' when causal. Parameters r1, r2 [num_heads]: the authors' draws "
      "U(0, 2) and U(0, 1) unless r1 / r2 give every head's initial value, projected before each use onto [eps, inf) "
      "(power: r2 onto [eps, 2]) in place, as the authors' code does.";
  c.settings = {
      size_setting("num_heads", "H"),
      word_setting("kind", {"log", "power"}, "the kernel: -r1 log(1 + r2 |d|) or -r1 |d|^r2"),
      flag_setting("causal", false, "-inf on keys after the query (a decoder)"),
      real_setting("r1", std::nullopt, "every head's initial r1 (None: the authors' U(0, 2))"),
      real_setting("r2", std::nullopt, "every head's initial r2 (None: the authors' U(0, 1))"),
      real_setting("eps", 0.01, "the projection's floor, in (0, 1]"),
  };
  c.state = {{"r1"}, {"r2"}};
  c.check = check;
  c.shapes = [](const FamilySettings& s) {
    const int64_t h = s.integer("num_heads");
    return std::vector<std::vector<int64_t>>{{h}, {h}};
  };
  c.reset = reset;
  c.dense = dense;
  c.terms = terms;
  c.methods = {{"project", {}, [](const FamilySettings& s, const FamilyState& t, const MethodCall&) {
                  return project(s, t);
                }},
               // [H, q_len + k_len - 1]: the bias of offset d = j - i' at column d + k_len - 1, projected first.
               {"offset_rows", {"q_len", "k_len", "dtype"},
                [](const FamilySettings& s, const FamilyState& t, const MethodCall& call) {
                  project(s, t);
                  const at::ScalarType dtype = call.dtype.value_or(t[0].scalar_type());
                  return ops::kerple_offset_bias(t[0].to(dtype), t[1].to(dtype), call.q_len, call.k_len, kind_of(s));
                }}};
  c.shown = {"num_heads", "kind", "causal"};
  return c;
}

const FamilyContractRegistration registered_contract(contract());

FamilySettings settings_of(const KerpleBiasOptions& o) {
  FamilySettings s;
  s.set("num_heads", o.num_heads()).set("kind", std::string(kernels::kerple_kind_name(o.kind())));
  s.set("causal", o.causal()).set("eps", o.eps());
  if (o.r1()) s.set("r1", *o.r1());
  if (o.r2()) s.set("r2", *o.r2());
  return s;
}

}  // namespace

KerpleBiasImpl::KerpleBiasImpl(const KerpleBiasOptions& options)
    : FamilyBiasImpl(kModule, settings_of(options)), options_(options) {}

}  // namespace posenc::nn

// The family's descriptor: what `posenc encodings`, the registry and the report read.
namespace posenc::nn::families {
namespace {

void add_kerple(std::vector<EncodingFamily>& out) {
  for (const auto kind : {kernels::KerpleKind::kLog, kernels::KerpleKind::kPower}) {
    const bool log = kind == kernels::KerpleKind::kLog;
    EncodingFamily f;
    f.name = log ? "kerple" : "kerple-power";
    f.point = EncodingPoint::kLogitBias;
    f.description = log ? "learned logarithmic kernel -r1_h log(1 + r2_h |i - j|), r1, r2 > 0 per head from U(0, 2), "
                          "U(0, 1) and kept >= 0.01 (the authors' code), causal in the decoder (Chi et al. 2022, "
                          "KERPLE)"
                        : "learned power kernel -r1_h |i - j|^r2_h per head, r1 from U(0, 2) kept >= 0.01, r2 from "
                          "U(0, 1) kept in [0.01, 2], causal in the decoder (Chi et al. 2022, KERPLE)";
    f.make_attention = [kind](const EncodingConfig& c, AttentionEncodings& slots) {
      slots.bias = KerpleBias(KerpleBiasOptions(c.num_heads).kind(kind).causal(c.causal));
    };
    f.module = kModule;
    f.preset = [log](const EncodingConfig& c) {
      FamilySettings s;
      return s.set("num_heads", c.num_heads).set("kind", std::string(log ? "log" : "power")).set("causal", c.causal);
    };
    out.push_back(std::move(f));
  }
}

const Registration registered(50, add_kerple);

}  // namespace
}  // namespace posenc::nn::families
