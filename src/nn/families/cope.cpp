// CoPE torch layer, all of it in one file (docs/families.md): its op, the
// contract its one holder works through, the typed C++ front end and the
// descriptor. Each part keeps its own notes below.
//
// Its op. The CoPE dense op, all of it in one place: schema, CPU kernel call,
// autograd and the typed C++ API (posenc/nn/cope_bias.h), the table's checks,
// and the attention's tile kind "cope".
//   cope_bias           q, k, e, scale, key_padding_mask -> (B, H, Tq, Tk)
//   cope_bias_backward  grad -> (dq, dk, de)
// The backward has no autograd kernel of its own: first derivatives only, as
// the fused attention's CoPE term.
//
// Its module. CoPE's contract (posenc/nn/family_contract.h): the authors' table e, handed
// to the attention as a term it evaluates from q and k, or made dense through
// the cope_bias op. Then the typed C++ front end and the family's descriptor
// (families/families.h).
#include "posenc/nn/cope_bias.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>
#include <tuple>
#include <vector>

#include "families/families.h"
#include "op_support.h"
#include "ops/attention/cpu_inputs.h"
#include "posenc/kernels/cope.h"
#include "posenc/nn/tile_kind.h"

namespace posenc::nn::detail {

// e floating, on the CPU, 2-D [npos >= 1, Dh] with Dh = q's last size, finite:
// "[attention] cope_e must be [npos, Dh] with npos >= 1 and Dh = 8, got (16, 4)".
void check_cope(const char* op, const char* name, const at::Tensor& e, const at::Tensor& q);

}  // namespace posenc::nn::detail

namespace posenc::nn {

namespace detail {

void check_cope(const char* op, const char* name, const at::Tensor& e, const at::Tensor& q) {
  check_float_tensor(op, name, e);
  const int64_t head_dim = q.dim() == 4 ? q.size(3) : -1;
  TORCH_CHECK_VALUE(e.dim() == 2 && e.size(0) >= 1 && e.size(1) == head_dim, "[", op, "] ", name,
                    " must be [npos, Dh] with npos >= 1 and Dh = ", head_dim, ", got ", tuple_of(e.sizes()));
  if (e.numel() > 0) {
    TORCH_CHECK_VALUE(at::isfinite(e.detach()).all().item<bool>(), "[", op, "] ", name,
                      " must be finite, got a NaN or an infinity");
  }
}

}  // namespace detail

namespace {

constexpr const char* kOp = "cope_bias";

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct Inputs {
  at::ScalarType compute;
  at::Tensor q, k, e, padding;
};

Inputs checked(const at::Tensor& q, const at::Tensor& k, const at::Tensor& e, double scale,
               const c10::optional<at::Tensor>& key_padding_mask) {
  for (const auto& [name, t] : {std::pair{"q", &q}, std::pair{"k", &k}}) {
    detail::check_float_tensor(kOp, name, *t);
    TORCH_CHECK_VALUE(t->dim() == 4, "[", kOp, "] ", name, " must be 4-D (B, H, T, Dh), got ", t->dim(), "-D");
  }
  TORCH_CHECK_TYPE(k.scalar_type() == q.scalar_type() && e.scalar_type() == q.scalar_type(), "[", kOp,
                   "] q, k and e must have one dtype, got ", detail::dtype_name(q.scalar_type()), ", ",
                   detail::dtype_name(k.scalar_type()), " and ", detail::dtype_name(e.scalar_type()));
  TORCH_CHECK_VALUE(k.size(0) == q.size(0) && k.size(1) == q.size(1) && k.size(3) == q.size(3), "[", kOp,
                    "] k must be (B, H, Tk, Dh) = ", detail::tuple_of({q.size(0), q.size(1), -1, q.size(3)}),
                    " like q, got ", detail::tuple_of(k.sizes()));
  TORCH_CHECK_VALUE(q.size(2) <= k.size(2), "[", kOp, "] CoPE is causal and needs q_len <= k_len, got q_len ",
                    q.size(2), " and k_len ", k.size(2));
  detail::check_cope(kOp, "e", e, q);
  TORCH_CHECK_VALUE(std::isfinite(scale) && scale > 0, "[", kOp, "] scale must be finite and > 0, got ", scale);
  Inputs in;
  in.compute = detail::compute_dtype(q.scalar_type());
  in.q = detail::kernel_view(q, in.compute), in.k = detail::kernel_view(k, in.compute);
  in.e = e.to(in.compute).contiguous();
  if (detail::given(key_padding_mask)) {
    const at::Tensor& m = *key_padding_mask;
    TORCH_CHECK_VALUE(m.scalar_type() == at::kBool && m.dim() == 2 && m.size(0) == q.size(0) &&
                          m.size(1) == k.size(2),
                      "[", kOp, "] key_padding_mask must be bool (B, Tk) = ",
                      detail::tuple_of({q.size(0), k.size(2)}), ", got ", detail::dtype_name(m.scalar_type()), " ",
                      detail::tuple_of(m.sizes()));
    in.padding = m.to(at::kByte).contiguous();
  }
  return in;
}

template <class T>
kernels::CopeParams<T> params_of(const Inputs& in, double scale) {
  kernels::CopeParams<T> p;
  p.npos = in.e.size(0), p.head_dim = in.e.size(1), p.e = in.e.data_ptr<T>(), p.scale = scale;
  if (in.padding.defined()) p.key_padding = in.padding.data_ptr<uint8_t>(), p.key_padding_stride = in.padding.size(1);
  return p;
}

at::Tensor cope_bias_cpu(const at::Tensor& q, const at::Tensor& k, const at::Tensor& e, double scale,
                         const c10::optional<at::Tensor>& key_padding_mask) {
  const Inputs in = checked(q, k, e, scale, key_padding_mask);
  at::Tensor out = at::empty({q.size(0), q.size(1), q.size(2), k.size(2)}, q.options().dtype(in.compute));
  detail::translate_errors([&] {
    const auto run = [&](auto tag) {
      using T = decltype(tag);
      kernels::cope_bias(params_of<T>(in, scale), detail::matrix_of<const T>(in.q), detail::matrix_of<const T>(in.k),
                         out.data_ptr<T>(), kOp);
    };
    in.compute == at::kDouble ? run(double{}) : run(float{});
  });
  return out.to(q.scalar_type());
}

using Three = std::tuple<at::Tensor, at::Tensor, at::Tensor>;

Three cope_bias_backward_cpu(const at::Tensor& grad, const at::Tensor& q, const at::Tensor& k, const at::Tensor& e,
                             double scale, const c10::optional<at::Tensor>& key_padding_mask) {
  const Inputs in = checked(q, k, e, scale, key_padding_mask);
  detail::check_float_tensor(kOp, "grad", grad);
  const std::vector<int64_t> want{q.size(0), q.size(1), q.size(2), k.size(2)};
  TORCH_CHECK_VALUE(grad.sizes() == at::IntArrayRef(want), "[", kOp, "] grad must be (B, H, Tq, Tk) = ",
                    detail::tuple_of(want), ", got ", detail::tuple_of(grad.sizes()));
  const at::Tensor g = grad.to(in.compute).contiguous();
  const auto opts = q.options().dtype(in.compute);
  at::Tensor dq = at::empty(q.sizes(), opts), dk = at::empty(k.sizes(), opts), de = at::empty(e.sizes(), opts);
  detail::translate_errors([&] {
    const auto run = [&](auto tag) {
      using T = decltype(tag);
      kernels::cope_bias_backward(params_of<T>(in, scale), detail::matrix_of<const T>(in.q),
                                  detail::matrix_of<const T>(in.k), g.data_ptr<T>(), detail::matrix_of<T>(dq),
                                  detail::matrix_of<T>(dk), de.data_ptr<T>(), kOp);
    };
    in.compute == at::kDouble ? run(double{}) : run(float{});
  });
  return {dq.to(q.scalar_type()), dk.to(k.scalar_type()), de.to(e.scalar_type())};
}

template <class Signature>
c10::TypedOperatorHandle<Signature> find_op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Signature>();
}

at::Tensor call_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& e, double scale,
                        const c10::optional<at::Tensor>& key_padding_mask) {
  static const auto op = find_op<decltype(cope_bias_cpu)>("posenc::cope_bias");
  return op.call(q, k, e, scale, key_padding_mask);
}

Three call_backward(const at::Tensor& grad, const at::Tensor& q, const at::Tensor& k, const at::Tensor& e,
                    double scale, const c10::optional<at::Tensor>& key_padding_mask) {
  static const auto op = find_op<decltype(cope_bias_backward_cpu)>("posenc::cope_bias_backward");
  return op.call(grad, q, k, e, scale, key_padding_mask);
}

class CopeBiasFunction : public torch::autograd::Function<CopeBiasFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& e,
                            double scale, const c10::optional<at::Tensor>& key_padding_mask) {
    at::AutoDispatchBelowADInplaceOrView guard;
    at::Tensor out = call_forward(q, k, e, scale, key_padding_mask);  // validates
    ctx->save_for_backward({q, k, e, detail::value_of(key_padding_mask)});
    ctx->saved_data["scale"] = scale;
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list s = ctx->get_saved_variables();
    const c10::optional<at::Tensor> mask = s[3].defined() ? c10::optional<at::Tensor>(s[3]) : c10::nullopt;
    auto [dq, dk, de] = call_backward(grads[0], s[0], s[1], s[2], ctx->saved_data["scale"].toDouble(), mask);
    return {dq, dk, de, at::Tensor(), at::Tensor()};
  }
};

at::Tensor cope_bias_autograd(const at::Tensor& q, const at::Tensor& k, const at::Tensor& e, double scale,
                              const c10::optional<at::Tensor>& key_padding_mask) {
  return CopeBiasFunction::apply(q, k, e, scale, key_padding_mask);
}

// The attention's tile kind "cope": CoPE's table e, its term computed per query row from q and k by
// kernels::CopeTileBias on the fused path, densely by cope_bias on the composed one.
class CopeTileKind final : public TileKind {
 public:
  std::string name() const override { return "cope"; }
  std::string display_name() const override { return "CoPE"; }
  std::vector<std::string> tensor_names() const override { return {"cope_e"}; }
  bool needs_causal() const override { return true; }
  void check(const std::vector<at::Tensor>& t, const at::Tensor& q) const override {
    detail::check_cope("attention", "cope_e", t[0], q);
  }
  std::shared_ptr<const kernels::TileBias<float>> fused_float(const TileInputs& in) const override {
    return fused<float>(in);
  }
  std::shared_ptr<const kernels::TileBias<double>> fused_double(const TileInputs& in) const override {
    return fused<double>(in);
  }
  // The kernel's buffer is de in e's layout.
  std::vector<at::Tensor> gradients(const at::Tensor& buffer, const std::vector<at::Tensor>& tensors,
                                    const std::vector<bool>& needs, at::ScalarType compute) const override {
    return {needs[0] ? buffer.view(tensors[0].sizes()).to(compute) : at::Tensor()};
  }
  at::Tensor dense(const std::vector<at::Tensor>& t, const at::Tensor& q, const at::Tensor& k, double scale,
                   const std::optional<at::Tensor>& key_padding_mask) const override {
    return ops::cope_bias(q, k, t[0], scale, key_padding_mask);
  }

 private:
  template <class T>
  static std::shared_ptr<const kernels::TileBias<T>> fused(const TileInputs& in) {
    const at::Tensor& e = in.tensors[0];
    kernels::CopeParams<T> p;
    p.npos = e.size(0), p.head_dim = e.size(1), p.e = e.data_ptr<T>();
    p.scale = in.scale;
    p.key_padding = in.key_padding, p.key_padding_stride = in.key_padding_stride;
    return std::make_shared<const kernels::CopeTileBias<T>>(p, detail::matrix_of<const T>(in.q),
                                                            detail::matrix_of<const T>(in.k), "attention");
  }
};

const TileKindRegistration kCopeTile{std::make_unique<CopeTileKind>()};

}  // namespace

namespace ops {

at::Tensor cope_bias(const at::Tensor& q, const at::Tensor& k, const at::Tensor& e, double scale,
                     const std::optional<at::Tensor>& key_padding_mask) {
  return call_forward(q, k, e, scale, key_padding_mask ? c10::optional<at::Tensor>(*key_padding_mask) : c10::nullopt);
}

}  // namespace ops

// CoPE (posenc/kernels/cope.h): q, k (B, H, T, Dh), e [npos, Dh] -> (B, H, Tq, Tk), 0 where j > i'.
TORCH_LIBRARY_FRAGMENT(posenc, m) {
  m.def("cope_bias(Tensor q, Tensor k, Tensor e, float scale, Tensor? key_padding_mask=None) -> Tensor");
  m.def("cope_bias_backward(Tensor grad, Tensor q, Tensor k, Tensor e, float scale, "
        "Tensor? key_padding_mask=None) -> (Tensor, Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(posenc, CPU, m) {
  m.impl("cope_bias", cope_bias_cpu);
  m.impl("cope_bias_backward", cope_bias_backward_cpu);
}

TORCH_LIBRARY_IMPL(posenc, Autograd, m) { m.impl("cope_bias", cope_bias_autograd); }

}  // namespace posenc::nn

namespace posenc::nn {
namespace {

constexpr const char* kModule = "CopeBias";

void check(const FamilySettings& s) {
  TORCH_CHECK_VALUE(s.flag("causal"), "[", kModule,
                    "] causal must be true: CoPE is defined for decoders (causal attention), got false");
}

at::Tensor dense_of_lengths(const FamilySettings&, const FamilyState&, int64_t, int64_t) {
  throw std::runtime_error("[CopeBias] the CoPE term depends on q and k, not on the lengths alone: use bias(q, k, "
                           "scale) or let the attention compute it (add_terms)");
}

at::Tensor dense(const FamilySettings&, const FamilyState& t, const at::Tensor& q, const at::Tensor& k, double scale,
                 const std::optional<at::Tensor>& key_padding_mask) {
  const at::Tensor out = ops::cope_bias(q, k, t[0].to(q.scalar_type()), scale, key_padding_mask);
  const int64_t q_len = q.size(2), k_len = k.size(2);
  const at::Tensor i = at::arange(q_len, at::kLong).unsqueeze(1), j = at::arange(k_len, at::kLong).unsqueeze(0);
  return out.masked_fill(j - i > k_len - q_len, -std::numeric_limits<double>::infinity());
}

void terms(const FamilySettings&, const FamilyState& t, AttentionTerms& out, int64_t q_len, int64_t k_len,
           at::ScalarType compute) {
  families::check_causal_lengths(kModule, q_len, k_len);
  out.causal = true;
  if (q_len == 0 || k_len == 0) return;  // no pair
  for (const TileTerm& tile : out.tiles) {
    TORCH_CHECK_VALUE(tile.kind != "cope", "[", kModule, "] the attention terms already hold a CoPE term");
  }
  out.tiles.push_back(cope_tile(t[0].to(compute)));
}

FamilyContract contract() {
  FamilyContract c;
  c.module = kModule;
  c.summary =
      "CoPE (Golovneva et al. 2024, arXiv 2405.18719): positions counted by the content. For query i at key position "
      "i' and keys j <= i', g[i, j] = sigmoid(scale q_i . k_j) (a padded key counts 0), p[i, j] = sum_{t=j}^{i'} "
      "g[i, t], P = min(p, npos_max - 1), w = P - floor(P), and term[i, j] = (1 - w) q_i . e[floor P] + w q_i . "
      "e[ceil P] added to the scaled logits, as the authors' code: one table e [npos_max, head_dim] shared by the "
      "heads, zero at the start; the gates use the attention's scale. The fused attention computes the term per "
      "query row (the tile kind \"cope\"); forward(q, k) gives it dense. CoPE is defined for decoders: causal must "
      "be True.";
  c.settings = {
      size_setting("num_heads", "H"),
      size_setting("head_dim", "Dh"),
      integer_setting("npos_max", 64, "table rows; contextual positions clamp at npos_max - 1", 1),
      flag_setting("causal", true, "must be True: CoPE is defined for causal attention"),
  };
  c.state = {{"e"}};
  c.check = check;
  c.shapes = [](const FamilySettings& s) {
    return std::vector<std::vector<int64_t>>{{s.integer("npos_max"), s.integer("head_dim")}};
  };
  c.reset = [](const FamilySettings&, FamilyState& t) { t[0].zero_(); };  // the authors' torch.zeros
  c.dense = dense_of_lengths;
  c.dense_qk = dense;
  c.terms = terms;
  c.shown = {"num_heads", "head_dim", "npos_max"};
  return c;
}

const FamilyContractRegistration registered_contract(contract());

FamilySettings settings_of(const CopeBiasOptions& o) {
  FamilySettings s;
  s.set("num_heads", o.num_heads()).set("head_dim", o.head_dim()).set("npos_max", o.npos_max());
  return s.set("causal", o.causal());
}

}  // namespace

CopeBiasImpl::CopeBiasImpl(const CopeBiasOptions& options)
    : FamilyBiasImpl(kModule, settings_of(options)), options_(options) {}

}  // namespace posenc::nn

// The family's descriptor: what `posenc encodings`, the registry and the report read.
namespace posenc::nn::families {
namespace {

void add_cope(std::vector<EncodingFamily>& out) {
  EncodingFamily cope;
  cope.name = "cope";
  cope.point = EncodingPoint::kLogitBias;
  cope.description =
      "contextual positions p_ij = sum_{t=j..i} sigmoid(q_i.k_t / sqrt(Dh)), clamped at cope_npos - 1, and a "
      "learned table e [cope_npos, head_dim] shared by the heads, q_i.e interpolated at p_ij added to the logits; computed "
      "per query row in the fused attention (Golovneva et al. 2024, CoPE); decoders only";
  cope.parameters = {integer("cope_npos", 64,
                             "table rows; contextual positions clamp at cope_npos - 1", 1)};
  cope.needs.causal = true;
  cope.needs.causal_hint = "CoPE is defined for causal attention (gates over the keys up to the query); use "
                           "kerple, t5 or dpb in an encoder";
  cope.make_attention = [](const EncodingConfig& c, AttentionEncodings& slots) {
    slots.bias = CopeBias(CopeBiasOptions(c.num_heads, c.dim / c.num_heads).npos_max(c.integer("cope_npos")).causal(true));
  };
  cope.module = kModule;
  cope.preset = [](const EncodingConfig& c) {
    FamilySettings s;
    s.set("num_heads", c.num_heads).set("head_dim", c.dim / c.num_heads).set("npos_max", c.integer("cope_npos"));
    return s.set("causal", true);
  };
  out.push_back(std::move(cope));
}

const Registration registered(70, add_cope);

}  // namespace
}  // namespace posenc::nn::families
