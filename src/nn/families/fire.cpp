// FIRE torch layer, all of it in one file (docs/families.md): its op, the
// contract its one holder works through, the typed C++ front end and the
// descriptor. Each part keeps its own notes below.
//
// Its op. The FIRE dense-bias op, all of it in one place: schema, CPU kernel call,
// autograd, the typed C++ API (posenc/nn/fire_bias.h), its
// tensors' checks, and the attention's tile kind "fire".
//   fire_bias           w1, b1, w2, b2, c, threshold -> [H, q_len, k_len]
//   fire_bias_backward  grad -> the six gradients
// The backward has no autograd kernel of its own: first derivatives only, as
// the fused attention's FIRE term.
//
// Its module. FIRE's contract (posenc/nn/family_contract.h): the authors' parameters (an
// MLP, c, and L as |L_multiplier * init_L|), handed to the attention as the
// per-tile term, or made dense through the fire_bias op. Then the typed C++
// front end and the family's descriptor (families/families.h).
#include "posenc/nn/fire_bias.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>
#include <tuple>
#include <vector>

#include "families/families.h"
#include "op_support.h"
#include "posenc/kernels/fire.h"
#include "posenc/nn/tile_kind.h"

namespace posenc::nn::detail {

// Every tensor given, floating, on the CPU, in w1's dtype; w1, b1 [hidden >= 1],
// w2 [H, hidden] (H = heads when given), b2 [H], c and threshold 0-d, both
// finite and > 0. Names carry `prefix` ("fire_" in attention):
// "[attention] fire_c must be > 0, got -1".
void check_fire(const char* op, const char* prefix, const FireTerm& t, std::optional<int64_t> heads = std::nullopt);

// The kernel's view of checked tensors, contiguous in T (kept alive by the caller).
template <class T>
kernels::FireParams<T> fire_params(const at::Tensor& w1, const at::Tensor& b1, const at::Tensor& w2,
                                   const at::Tensor& b2, double c, double threshold) {
  return {w2.size(0), w1.size(0), w1.data_ptr<T>(), b1.data_ptr<T>(), w2.data_ptr<T>(), b2.data_ptr<T>(),
          static_cast<T>(c), static_cast<T>(threshold)};
}

}  // namespace posenc::nn::detail

namespace posenc::nn {

namespace detail {

void check_fire(const char* op, const char* prefix, const FireTerm& t, std::optional<int64_t> heads) {
  const std::string p(prefix);
  const std::pair<const char*, const at::Tensor*> all[] = {{"w1", &t.w1}, {"b1", &t.b1}, {"w2", &t.w2},
                                                           {"b2", &t.b2}, {"c", &t.c},   {"threshold", &t.threshold}};
  for (const auto& [name, tensor] : all) {
    TORCH_CHECK_VALUE(tensor->defined(), "[", op, "] the FIRE term needs ", p, "w1, ", p, "b1, ", p, "w2, ", p,
                      "b2, ", p, "c and ", p, "threshold, got no ", p, name);
    check_float_tensor(op, p + name, *tensor);
    TORCH_CHECK_TYPE(tensor->scalar_type() == t.w1.scalar_type(), "[", op, "] ", p, name, " must have ", p,
                     "w1's dtype (", dtype_name(t.w1.scalar_type()), "), got ", dtype_name(tensor->scalar_type()));
  }
  TORCH_CHECK_VALUE(t.w1.dim() == 1 && t.w1.size(0) >= 1, "[", op, "] ", p,
                    "w1 must be 1-D [hidden] with hidden >= 1, got ", tuple_of(t.w1.sizes()));
  const int64_t hidden = t.w1.size(0);
  TORCH_CHECK_VALUE(t.b1.sizes() == t.w1.sizes(), "[", op, "] ", p, "b1 must be [hidden] = [", hidden, "], got ",
                    tuple_of(t.b1.sizes()));
  const int64_t h = heads.value_or(t.w2.dim() == 2 ? t.w2.size(0) : -1);
  TORCH_CHECK_VALUE(t.w2.dim() == 2 && t.w2.size(0) == h && t.w2.size(1) == hidden && h >= 1, "[", op, "] ", p,
                    "w2 must be [H, hidden] = [", heads ? std::to_string(*heads) : std::string("H"), ", ", hidden,
                    "], got ", tuple_of(t.w2.sizes()));
  TORCH_CHECK_VALUE(t.b2.dim() == 1 && t.b2.size(0) == h, "[", op, "] ", p, "b2 must be [H] = [", h, "], got ",
                    tuple_of(t.b2.sizes()));
  for (const auto& [name, tensor] : {std::pair{"c", &t.c}, std::pair{"threshold", &t.threshold}}) {
    TORCH_CHECK_VALUE(tensor->dim() == 0, "[", op, "] ", p, name, " must be a 0-d tensor, got ",
                      tuple_of(tensor->sizes()));
    const double value = tensor->item<double>();
    // Written so that NaN fails too.
    TORCH_CHECK_VALUE(value > 0 && std::isfinite(value), "[", op, "] ", p, name, " must be > 0, got ", value);
  }
}

}  // namespace detail

namespace {

constexpr const char* kOp = "fire_bias";

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The six as contiguous compute-dtype tensors, and c, L as doubles.
struct Inputs {
  at::ScalarType compute;
  at::Tensor w1, b1, w2, b2;
  double c, threshold;
};

Inputs checked(const at::Tensor& w1, const at::Tensor& b1, const at::Tensor& w2, const at::Tensor& b2,
               const at::Tensor& c, const at::Tensor& threshold, int64_t q_len, int64_t k_len) {
  detail::check_fire(kOp, "", FireTerm{w1, b1, w2, b2, c, threshold});
  TORCH_CHECK_VALUE(q_len >= 0 && k_len >= 0, "[", kOp, "] q_len and k_len must be >= 0, got ", q_len, " and ",
                    k_len);
  const at::ScalarType compute = detail::compute_dtype(w1.scalar_type());
  const auto in = [&](const at::Tensor& t) { return t.to(compute).contiguous(); };
  return {compute, in(w1), in(b1), in(w2), in(b2), c.item<double>(), threshold.item<double>()};
}

at::Tensor fire_bias_cpu(const at::Tensor& w1, const at::Tensor& b1, const at::Tensor& w2, const at::Tensor& b2,
                         const at::Tensor& c, const at::Tensor& threshold, int64_t q_len, int64_t k_len) {
  const Inputs in = checked(w1, b1, w2, b2, c, threshold, q_len, k_len);
  at::Tensor out = at::zeros({in.w2.size(0), q_len, k_len}, at::TensorOptions().dtype(in.compute));
  detail::translate_errors([&] {
    const auto run = [&](auto tag) {
      using T = decltype(tag);
      kernels::fire_bias(detail::fire_params<T>(in.w1, in.b1, in.w2, in.b2, in.c, in.threshold), q_len, k_len,
                         out.data_ptr<T>(), kOp);
    };
    in.compute == at::kDouble ? run(double{}) : run(float{});
  });
  return out.to(w1.scalar_type());
}

using Six = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

Six fire_bias_backward_cpu(const at::Tensor& grad, const at::Tensor& w1, const at::Tensor& b1, const at::Tensor& w2,
                           const at::Tensor& b2, const at::Tensor& c, const at::Tensor& threshold, int64_t q_len,
                           int64_t k_len) {
  const Inputs in = checked(w1, b1, w2, b2, c, threshold, q_len, k_len);
  detail::check_float_tensor(kOp, "grad", grad);
  const int64_t heads = in.w2.size(0), hidden = in.w1.size(0);
  TORCH_CHECK_VALUE(grad.dim() == 3 && grad.size(0) == heads && grad.size(1) == q_len && grad.size(2) == k_len, "[",
                    kOp, "] grad must be [H, q_len, k_len] = ", detail::tuple_of({heads, q_len, k_len}), ", got ",
                    detail::tuple_of(grad.sizes()));
  const at::Tensor g = grad.to(in.compute).contiguous();
  const auto opts = at::TensorOptions().dtype(in.compute);
  at::Tensor buffer = at::empty({kernels::fire_gradient_size(heads, hidden)}, opts);
  detail::translate_errors([&] {
    const auto run = [&](auto tag) {
      using T = decltype(tag);
      kernels::fire_bias_backward(detail::fire_params<T>(in.w1, in.b1, in.w2, in.b2, in.c, in.threshold), q_len,
                                  k_len, g.data_ptr<T>(), kernels::fire_gradients(buffer.data_ptr<T>(), heads, hidden),
                                  kOp);
    };
    in.compute == at::kDouble ? run(double{}) : run(float{});
  });
  // The fire_gradients layout: w1, b1, w2, b2, c, threshold.
  const auto part = [&](int64_t at, int64_t n, const at::Tensor& like) {
    return buffer.narrow(0, at, n).view(like.sizes()).to(like.scalar_type());
  };
  const int64_t w2_at = 2 * hidden, b2_at = w2_at + heads * hidden, c_at = b2_at + heads;
  return {part(0, hidden, w1), part(hidden, hidden, b1), part(w2_at, heads * hidden, w2), part(b2_at, heads, b2),
          part(c_at, 1, c), part(c_at + 1, 1, threshold)};
}

template <class Signature>
c10::TypedOperatorHandle<Signature> find_op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Signature>();
}

at::Tensor call_forward(const at::Tensor& w1, const at::Tensor& b1, const at::Tensor& w2, const at::Tensor& b2,
                        const at::Tensor& c, const at::Tensor& threshold, int64_t q_len, int64_t k_len) {
  static const auto op = find_op<decltype(fire_bias_cpu)>("posenc::fire_bias");
  return op.call(w1, b1, w2, b2, c, threshold, q_len, k_len);
}

Six call_backward(const at::Tensor& grad, const at::Tensor& w1, const at::Tensor& b1, const at::Tensor& w2,
                  const at::Tensor& b2, const at::Tensor& c, const at::Tensor& threshold, int64_t q_len,
                  int64_t k_len) {
  static const auto op = find_op<decltype(fire_bias_backward_cpu)>("posenc::fire_bias_backward");
  return op.call(grad, w1, b1, w2, b2, c, threshold, q_len, k_len);
}

class FireBiasFunction : public torch::autograd::Function<FireBiasFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& w1, const at::Tensor& b1, const at::Tensor& w2,
                            const at::Tensor& b2, const at::Tensor& c, const at::Tensor& threshold, int64_t q_len,
                            int64_t k_len) {
    at::AutoDispatchBelowADInplaceOrView guard;
    at::Tensor out = call_forward(w1, b1, w2, b2, c, threshold, q_len, k_len);  // validates
    ctx->save_for_backward({w1, b1, w2, b2, c, threshold});
    ctx->saved_data["q_len"] = q_len;
    ctx->saved_data["k_len"] = k_len;
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list s = ctx->get_saved_variables();
    auto [g1, gb1, g2, gb2, gc, gl] = call_backward(grads[0], s[0], s[1], s[2], s[3], s[4], s[5],
                                                    ctx->saved_data["q_len"].toInt(), ctx->saved_data["k_len"].toInt());
    return {g1, gb1, g2, gb2, gc, gl, at::Tensor(), at::Tensor()};
  }
};

at::Tensor fire_bias_autograd(const at::Tensor& w1, const at::Tensor& b1, const at::Tensor& w2, const at::Tensor& b2,
                              const at::Tensor& c, const at::Tensor& threshold, int64_t q_len, int64_t k_len) {
  return FireBiasFunction::apply(w1, b1, w2, b2, c, threshold, q_len, k_len);
}

// The attention's tile kind "fire": FIRE's six tensors, computed per tile by
// kernels::FireTileBias on the fused path, densely by fire_bias on the composed one.
class FireTileKind final : public TileKind {
 public:
  std::string name() const override { return "fire"; }
  std::string display_name() const override { return "FIRE"; }
  std::vector<std::string> tensor_names() const override {
    return {"fire_w1", "fire_b1", "fire_w2", "fire_b2", "fire_c", "fire_threshold"};
  }
  bool needs_causal() const override { return true; }
  void check(const std::vector<at::Tensor>& t, const at::Tensor& q) const override {
    detail::check_fire("attention", "fire_", term_of(t), q.size(1));
  }
  std::shared_ptr<const kernels::TileBias<float>> fused_float(const TileInputs& in) const override {
    return fused<float>(in.tensors);
  }
  std::shared_ptr<const kernels::TileBias<double>> fused_double(const TileInputs& in) const override {
    return fused<double>(in.tensors);
  }
  // The kernel's buffer holds the six in order (kernels/fire.h's fire_gradients layout).
  std::vector<at::Tensor> gradients(const at::Tensor& buffer, const std::vector<at::Tensor>& tensors,
                                    const std::vector<bool>& needs, at::ScalarType compute) const override {
    std::vector<at::Tensor> grads(tensors.size());
    int64_t at = 0;
    for (size_t i = 0; i < tensors.size(); ++i) {
      const int64_t n = tensors[i].numel();
      if (needs[i]) grads[i] = buffer.narrow(0, at, n).view(tensors[i].sizes()).to(compute);
      at += n;
    }
    return grads;
  }
  at::Tensor dense(const std::vector<at::Tensor>& t, const at::Tensor& q, const at::Tensor& k, double /*scale*/,
                   const std::optional<at::Tensor>& /*key_padding_mask*/) const override {
    return ops::fire_bias(t[0], t[1], t[2], t[3], t[4], t[5], q.size(2), k.size(2));
  }

 private:
  static FireTerm term_of(const std::vector<at::Tensor>& t) { return {t[0], t[1], t[2], t[3], t[4], t[5]}; }
  template <class T>
  static std::shared_ptr<const kernels::TileBias<T>> fused(const std::vector<at::Tensor>& t) {
    const double c = t[4].item<double>(), threshold = t[5].item<double>();
    return std::make_shared<const kernels::FireTileBias<T>>(detail::fire_params<T>(t[0], t[1], t[2], t[3], c,
                                                                                   threshold),
                                                            "attention");
  }
};

const TileKindRegistration kFireTile{std::make_unique<FireTileKind>()};

}  // namespace

namespace ops {

at::Tensor fire_bias(const at::Tensor& w1, const at::Tensor& b1, const at::Tensor& w2, const at::Tensor& b2,
                     const at::Tensor& c, const at::Tensor& threshold, int64_t q_len, int64_t k_len) {
  return call_forward(w1, b1, w2, b2, c, threshold, q_len, k_len);
}

}  // namespace ops

// FIRE (posenc/kernels/fire.h): f(psi(i' - j) / psi(max(L, i'))), psi(t) = log(1 + c t), 0 where j > i'.
TORCH_LIBRARY_FRAGMENT(posenc, m) {
  m.def("fire_bias(Tensor w1, Tensor b1, Tensor w2, Tensor b2, Tensor c, Tensor threshold, int q_len, int k_len) "
        "-> Tensor");
  m.def("fire_bias_backward(Tensor grad, Tensor w1, Tensor b1, Tensor w2, Tensor b2, Tensor c, Tensor threshold, "
        "int q_len, int k_len) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(posenc, CPU, m) {
  m.impl("fire_bias", fire_bias_cpu);
  m.impl("fire_bias_backward", fire_bias_backward_cpu);
}

TORCH_LIBRARY_IMPL(posenc, Autograd, m) { m.impl("fire_bias", fire_bias_autograd); }

}  // namespace posenc::nn

namespace posenc::nn {
namespace {

constexpr const char* kModule = "FireBias";

enum Slot { kW1, kB1, kW2, kB2, kC, kMultiplier };  // the state's order

void check(const FamilySettings& s) {
  TORCH_CHECK_VALUE(s.flag("causal"), "[", kModule,
                    "] causal must be true: FIRE is defined for decoders (causal attention), got false");
  const double init_c = s.real("init_c"), init_l = s.real("init_L");
  TORCH_CHECK_VALUE(init_c > 0 && std::isfinite(init_c), "[", kModule, "] init_c must be > 0, got ", init_c);
  TORCH_CHECK_VALUE(init_l > 0 && std::isfinite(init_l), "[", kModule, "] init_L must be > 0, got ", init_l);
}

void reset(const FamilySettings& s, FamilyState& t) {
  // torch.nn.Linear's defaults: weight and bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)); fan_in 1, then hidden.
  t[kW1].uniform_(-1.0, 1.0);
  t[kB1].uniform_(-1.0, 1.0);
  const double bound = 1.0 / std::sqrt(static_cast<double>(s.integer("hidden")));
  t[kW2].uniform_(-bound, bound);
  t[kB2].uniform_(-bound, bound);
  t[kC].fill_(s.real("init_c"));
  t[kMultiplier].fill_(1.0);
}

at::Tensor effective_c(const FamilySettings&, const FamilyState& t) { return t[kC].abs(); }

at::Tensor threshold(const FamilySettings& s, const FamilyState& t) {
  return (t[kMultiplier] * s.real("init_L")).abs();
}

// The tile term's tensors in `compute` (differentiable wrt every parameter).
FireTerm term(const FamilySettings& s, const FamilyState& t, at::ScalarType compute) {
  return {t[kW1].to(compute), t[kB1].to(compute), t[kW2].to(compute), t[kB2].to(compute),
          effective_c(s, t).to(compute), threshold(s, t).to(compute)};
}

// [H, q_len, k_len]: the op's bias (0 after the query), -inf after the query.
at::Tensor dense(const FamilySettings& s, const FamilyState& t, int64_t q_len, int64_t k_len) {
  families::check_causal_lengths(kModule, q_len, k_len);
  if (q_len == 0 || k_len == 0) return at::zeros({s.integer("num_heads"), q_len, k_len}, t[kW1].options());
  const at::Tensor out = ops::fire_bias(term(s, t, t[kW1].scalar_type()), q_len, k_len);
  const at::Tensor i = at::arange(q_len, at::kLong).unsqueeze(1), j = at::arange(k_len, at::kLong).unsqueeze(0);
  return out.masked_fill(j - i > k_len - q_len, -std::numeric_limits<double>::infinity());
}

void terms(const FamilySettings& s, const FamilyState& t, AttentionTerms& out, int64_t q_len, int64_t k_len,
           at::ScalarType compute) {
  families::check_causal_lengths(kModule, q_len, k_len);
  out.causal = true;
  if (q_len == 0 || k_len == 0) return;  // no pair
  for (const TileTerm& tile : out.tiles) {
    TORCH_CHECK_VALUE(tile.kind != "fire", "[", kModule, "] the attention terms already hold a FIRE term");
  }
  out.tiles.push_back(fire_tile(term(s, t, compute)));
}

FamilyContract contract() {
  FamilyContract c;
  c.module = kModule;
  c.summary =
      "FIRE (Li et al. 2023, arXiv 2310.04418): a causal logit bias, a learned MLP of the progressively interpolated "
      "offset, bias[h, i, j] = f(log(1 + c (i' - j)) / log(1 + c max(L, i')))_h for j <= i' (-inf after the query), "
      "f: Linear(1, hidden), ReLU, Linear(hidden, num_heads), with c = |c| and L = |L_multiplier * init_L| learned "
      "(the authors' parameterisation; torch.nn.Linear's default draws for f). Parameters w1, b1 [hidden], "
      "w2 [H, hidden], b2 [H], c and L_multiplier (0-d). The fused attention evaluates the bias per tile (the tile "
      "kind \"fire\", whose six tensors terms() gives); FIRE is defined for decoders: causal must be True.";
  c.settings = {
      size_setting("num_heads", "H"),
      integer_setting("hidden", 32, "the MLP's width (the paper: 32)", 1),
      flag_setting("causal", true, "must be True: FIRE is defined for causal attention"),
      real_setting("init_c", 0.1, "the initial c, > 0"),
      real_setting("init_L", 512.0, "the fixed scale of the learned threshold L, > 0"),
  };
  c.state = {{"w1"}, {"b1"}, {"w2"}, {"b2"}, {"c"}, {"L_multiplier"}};
  c.check = check;
  c.shapes = [](const FamilySettings& s) {
    const int64_t h = s.integer("num_heads"), hidden = s.integer("hidden");
    return std::vector<std::vector<int64_t>>{{hidden}, {hidden}, {h, hidden}, {h}, {}, {}};
  };
  c.reset = reset;
  c.dense = dense;
  c.terms = terms;
  c.methods = {{"effective_c", {}, [](const FamilySettings& s, const FamilyState& t, const MethodCall&) {
                  return effective_c(s, t);
                }},
               {"threshold", {}, [](const FamilySettings& s, const FamilyState& t, const MethodCall&) {
                  return threshold(s, t);
                }}};
  c.shown = {"num_heads", "hidden", "init_c", "init_L"};
  return c;
}

const FamilyContractRegistration registered_contract(contract());

FamilySettings settings_of(const FireBiasOptions& o) {
  FamilySettings s;
  s.set("num_heads", o.num_heads()).set("hidden", o.hidden()).set("causal", o.causal());
  return s.set("init_c", o.init_c()).set("init_L", o.init_L());
}

}  // namespace

FireBiasImpl::FireBiasImpl(const FireBiasOptions& options)
    : FamilyBiasImpl(kModule, settings_of(options)), options_(options) {}

}  // namespace posenc::nn

// The family's descriptor: what `posenc encodings`, the registry and the report read.
namespace posenc::nn::families {
namespace {

void add_fire(std::vector<EncodingFamily>& out) {
  EncodingFamily fire;
  fire.name = "fire";
  fire.point = EncodingPoint::kLogitBias;
  fire.description =
      "learned MLP (1 -> 32 ReLU -> heads) of the progressively interpolated offset psi(i - j) / psi(max(L, i)), "
      "psi(x) = log(c x + 1), c = 0.1 and L = 512 learned, computed per tile in the fused attention (Li et al. "
      "2023, FIRE); decoders only";
  fire.needs.causal = true;
  fire.needs.causal_hint = "FIRE is defined for causal attention; use kerple, t5 or dpb in an encoder";
  fire.make_attention = [](const EncodingConfig& c, AttentionEncodings& slots) {
    slots.bias = FireBias(FireBiasOptions(c.num_heads).causal(true));
  };
  fire.module = kModule;
  fire.preset = [](const EncodingConfig& c) {
    FamilySettings s;
    return s.set("num_heads", c.num_heads).set("causal", true);
  };
  out.push_back(std::move(fire));
}

const Registration registered(60, add_fire);

}  // namespace
}  // namespace posenc::nn::families
