// The fused head + cross-entropy op, all of it in one place: schema, CPU
// kernel, autograd and the typed C++ API (posenc/nn/linear_cross_entropy.h).
//   linear_cross_entropy(hidden, weight, bias?, targets, ignore_index, reduction, chunk_rows) -> (loss, correct)
// The gradients are formed in the forward pass, chunk by chunk, while the
// logits are in cache; the backward scales them. So there is no backward op
// and no double backward.
#include "posenc/nn/linear_cross_entropy.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <algorithm>
#include <string>
#include <tuple>

#include "op_support.h"
#include "posenc/kernels/softmax_cross_entropy.h"

namespace posenc::nn {
namespace {

constexpr const char* kOp = "linear_cross_entropy";
// Rows per chunk: max(kMinChunkRows, kChunkElements / V). 4 MB of float32
// logits stay in L2/L3; but each chunk also reads and writes all of the
// (V, D) weight gradient, and below about 256 rows that GEMM is bound by
// memory (measured: N 4096, D 512, V 32000 took 4.2 s at 32 rows per chunk,
// 2.2 s at 256, one thread; eager linear + cross_entropy 2.9 s).
constexpr int64_t kChunkElements = int64_t{1} << 20;
constexpr int64_t kMinChunkRows = 256;

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Validated arguments, the rows flattened to (N, D) and the ignored ones dropped.
struct Checked {
  at::Tensor hidden, targets;  // (n, D), (n): the rows that count
  at::Tensor kept_rows;        // their indices among the N rows; undefined when none is ignored
  at::Tensor weight, bias;     // (V, D), (V) or undefined; contiguous
  int64_t rows = 0;            // N
  LossReduction reduction = LossReduction::kMean;
  int64_t chunk_rows = 0;
};

LossReduction parse_reduction(c10::string_view reduction) {
  if (reduction == "mean") return LossReduction::kMean;
  if (reduction == "sum") return LossReduction::kSum;
  C10_THROW_ERROR(ValueError, std::string("[") + kOp +
                                  "] reduction must be \"mean\" or \"sum\" (the gradient is formed with the loss; "
                                  "per-row losses need the logits: cross_entropy(linear(...))), got \"" +
                                  std::string(detail::to_std(reduction)) + "\"");
}

void check_dtype(const char* name, const at::Tensor& t, at::ScalarType want) {
  TORCH_CHECK_TYPE(t.scalar_type() == want, "[", kOp, "] ", name, " must have hidden's dtype ",
                   detail::dtype_name(want), ", got ", detail::dtype_name(t.scalar_type()));
  TORCH_CHECK_VALUE(t.device().is_cpu(), "[", kOp, "] ", name, " must be on the CPU, got ", t.device());
}

Checked check(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& bias, const at::Tensor& targets,
              int64_t ignore_index, c10::string_view reduction, int64_t chunk_rows) {
  TORCH_CHECK_VALUE(hidden.defined() && hidden.dim() >= 1, "[", kOp, "] hidden must be (..., D), got ",
                    hidden.defined() ? "a 0-d tensor" : "None");
  const at::ScalarType dtype = hidden.scalar_type();
  TORCH_CHECK_TYPE(dtype == at::kFloat || dtype == at::kDouble, "[", kOp, "] hidden must be float32 or float64, got ",
                   detail::dtype_name(dtype));
  TORCH_CHECK_VALUE(hidden.device().is_cpu(), "[", kOp, "] hidden must be on the CPU, got ", hidden.device());
  const int64_t dim = hidden.size(-1);
  TORCH_CHECK_VALUE(weight.defined() && weight.dim() == 2 && weight.size(1) == dim && weight.size(0) >= 1, "[", kOp,
                    "] weight must be (V, D) = (V, ", dim, ") with V >= 1, got ",
                    weight.defined() ? detail::tuple_of(weight.sizes()) : "None");
  check_dtype("weight", weight, dtype);
  const int64_t vocab = weight.size(0);
  if (bias.defined()) {
    TORCH_CHECK_VALUE(bias.dim() == 1 && bias.size(0) == vocab, "[", kOp, "] bias must be (V) = (", vocab, "), got ",
                      detail::tuple_of(bias.sizes()));
    check_dtype("bias", bias, dtype);
  }
  const at::IntArrayRef leading = hidden.sizes().slice(0, hidden.dim() - 1);
  TORCH_CHECK_VALUE(targets.defined(), "[", kOp, "] targets must be a tensor, got None");
  TORCH_CHECK_TYPE(targets.scalar_type() == at::kLong, "[", kOp, "] targets must be int64, got ",
                   detail::dtype_name(targets.scalar_type()));
  TORCH_CHECK_VALUE(targets.sizes() == leading && targets.device().is_cpu(), "[", kOp,
                    "] targets must be on the CPU with hidden's leading shape ", detail::tuple_of(leading), ", got ",
                    detail::tuple_of(targets.sizes()), " on ", targets.device());
  TORCH_CHECK_VALUE(chunk_rows >= 0, "[", kOp,
                    "] chunk_rows must be >= 0 (0: max(256, 2^20 / V) rows), got ", chunk_rows);
  Checked c;
  c.reduction = parse_reduction(reduction);
  c.chunk_rows = chunk_rows;
  c.hidden = hidden.reshape({-1, dim}).contiguous();
  c.targets = targets.reshape({-1}).contiguous();
  c.rows = c.hidden.size(0);
  c.weight = weight.contiguous();
  if (bias.defined()) c.bias = bias.contiguous();
  const at::Tensor keep = c.targets.ne(ignore_index);
  const at::Tensor counted = c.targets.masked_select(keep);
  if (counted.numel() > 0) {
    const int64_t lo = counted.min().item<int64_t>(), hi = counted.max().item<int64_t>();
    TORCH_CHECK_VALUE(lo >= 0 && hi < vocab, "[", kOp, "] targets must be in [0, ", vocab, ") or ignore_index (",
                      ignore_index, "), got ", lo < 0 ? lo : hi);
  }
  if (counted.numel() < c.rows) {
    c.kept_rows = keep.nonzero().squeeze(1);
    c.hidden = c.hidden.index_select(0, c.kept_rows);
    c.targets = counted;
  }
  return c;
}

struct Pass {
  at::Tensor loss;  // scalar, hidden's dtype
  int64_t correct = 0;
  at::Tensor grad_hidden, grad_weight, grad_bias;  // of the reduced loss, where asked for; grad_hidden (N, D)
};

// One pass over the counted rows in chunks; the gradients only where want_* is set.
Pass run_chunks(const Checked& a, bool want_hidden, bool want_weight, bool want_bias) {
  at::NoGradGuard no_grad;
  const at::Tensor& hidden = a.hidden;
  const int64_t n = hidden.size(0), vocab = a.weight.size(0);
  const int64_t rows = a.chunk_rows > 0 ? a.chunk_rows : std::max(kMinChunkRows, kChunkElements / vocab);
  const bool want_any = want_hidden || want_weight || want_bias;
  // The mean's 1/n goes into dz (with n = 0 there is none).
  const double scale = a.reduction == LossReduction::kMean && n > 0 ? 1.0 / static_cast<double>(n) : 1.0;
  Pass pass;
  if (want_hidden) pass.grad_hidden = at::empty_like(hidden);
  if (want_weight) pass.grad_weight = at::zeros_like(a.weight);
  if (want_bias) pass.grad_bias = at::zeros_like(a.bias);
  const at::Tensor weight_t = a.weight.t();
  double loss_sum = 0;
  for (int64_t r0 = 0; r0 < n; r0 += rows) {
    const int64_t c = std::min(rows, n - r0);
    const at::Tensor h = hidden.narrow(0, r0, c);
    at::Tensor z = a.bias.defined() ? at::addmm(a.bias, h, weight_t) : at::mm(h, weight_t);
    // The loss, and with a gradient z becomes dz = scale (softmax - onehot(t)), in three passes per row.
    const int64_t* t = a.targets.data_ptr<int64_t>() + r0;
    const kernels::CrossEntropyRows r = detail::translate_errors([&] {  // e.g. V above 2^24
      return z.scalar_type() == at::kDouble
                 ? kernels::softmax_cross_entropy_rows<double>(z.data_ptr<double>(), c, vocab, t, want_any, scale, kOp)
                 : kernels::softmax_cross_entropy_rows<float>(z.data_ptr<float>(), c, vocab, t, want_any,
                                                              static_cast<float>(scale), kOp);
    });
    loss_sum += r.loss_sum;
    pass.correct += r.correct;
    if (!want_any) continue;
    if (want_hidden) {
      at::Tensor out = pass.grad_hidden.narrow(0, r0, c);
      at::mm_out(out, z, a.weight);
    }
    if (want_weight) pass.grad_weight.addmm_(z.t(), h);
    if (want_bias) pass.grad_bias.add_(z.sum(0));
  }
  // The mean over no rows is 0 / 0 = NaN, as torch's cross_entropy gives; their sum is 0.
  pass.loss = at::scalar_tensor(a.reduction == LossReduction::kMean ? loss_sum / static_cast<double>(n) : loss_sum,
                                hidden.options());
  if (want_hidden && a.kept_rows.defined()) {
    pass.grad_hidden =
        at::zeros({a.rows, hidden.size(1)}, hidden.options()).index_copy_(0, a.kept_rows, pass.grad_hidden);
  }
  return pass;
}

std::tuple<at::Tensor, at::Tensor> linear_cross_entropy_cpu(const at::Tensor& hidden, const at::Tensor& weight,
                                                            const c10::optional<at::Tensor>& bias,
                                                            const at::Tensor& targets, int64_t ignore_index,
                                                            c10::string_view reduction, int64_t chunk_rows) {
  const Checked a = check(hidden, weight, detail::value_of(bias), targets, ignore_index, reduction, chunk_rows);
  const Pass pass = run_chunks(a, false, false, false);
  return {pass.loss, at::scalar_tensor(pass.correct, at::kLong)};
}

class LinearCrossEntropyFunction : public torch::autograd::Function<LinearCrossEntropyFunction> {
 public:
  // bias is an empty tensor when there is none (an autograd Function takes no undefined input).
  static variable_list forward(AutogradContext* ctx, const at::Tensor& hidden, const at::Tensor& weight,
                               const at::Tensor& bias, const at::Tensor& targets, bool has_bias, int64_t ignore_index,
                               c10::string_view reduction, int64_t chunk_rows) {
    at::AutoDispatchBelowADInplaceOrView guard;
    const Checked a =
        check(hidden, weight, has_bias ? bias : at::Tensor(), targets, ignore_index, reduction, chunk_rows);
    Pass pass = run_chunks(a, hidden.requires_grad(), weight.requires_grad(), has_bias && bias.requires_grad());
    ctx->saved_data["grad_hidden"] =
        pass.grad_hidden.defined() ? pass.grad_hidden.view(hidden.sizes()) : pass.grad_hidden;
    ctx->saved_data["grad_weight"] = pass.grad_weight;
    ctx->saved_data["grad_bias"] = pass.grad_bias;
    at::Tensor correct = at::scalar_tensor(pass.correct, at::kLong);
    ctx->mark_non_differentiable({correct});
    return {pass.loss, correct};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    // Grad mode is on in a backward only with create_graph: a second derivative would silently be 0.
    TORCH_CHECK(!at::GradMode::is_enabled(), "[", kOp,
                "] has no double backward (its gradient is computed with the loss)");
    const auto scaled = [&](const char* name) {
      const at::Tensor g = ctx->saved_data[name].toTensor();
      return g.defined() ? g * grads[0] : at::Tensor();
    };
    return {scaled("grad_hidden"), scaled("grad_weight"), scaled("grad_bias"), at::Tensor(), at::Tensor(),
            at::Tensor(),          at::Tensor(),          at::Tensor()};
  }
};

std::tuple<at::Tensor, at::Tensor> linear_cross_entropy_autograd(const at::Tensor& hidden, const at::Tensor& weight,
                                                                 const c10::optional<at::Tensor>& bias,
                                                                 const at::Tensor& targets, int64_t ignore_index,
                                                                 c10::string_view reduction, int64_t chunk_rows) {
  const bool has_bias = detail::given(bias);
  const auto wants = [](const at::Tensor& t) { return t.defined() && t.requires_grad(); };
  if (!at::GradMode::is_enabled() || !(wants(hidden) || wants(weight) || (has_bias && wants(*bias)))) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return linear_cross_entropy_cpu(hidden, weight, bias, targets, ignore_index, reduction, chunk_rows);
  }
  const at::Tensor b = has_bias ? *bias : at::empty({0}, weight.options());
  const variable_list r = LinearCrossEntropyFunction::apply(hidden, weight, b, targets, has_bias, ignore_index,
                                                            reduction, chunk_rows);
  return {r[0], r[1]};
}

const char* reduction_name(LossReduction r) noexcept { return r == LossReduction::kSum ? "sum" : "mean"; }

}  // namespace

LinearCrossEntropy linear_cross_entropy(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& bias,
                                        const at::Tensor& targets, const LinearCrossEntropyOptions& options) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("posenc::linear_cross_entropy", "")
                             .typed<decltype(linear_cross_entropy_cpu)>();
  const auto [loss, correct] =
      op.call(hidden, weight, bias.defined() ? c10::optional<at::Tensor>(bias) : c10::nullopt, targets,
              options.ignore_index, reduction_name(options.reduction), options.chunk_rows);
  return {loss, correct.item<int64_t>()};
}

TORCH_LIBRARY_FRAGMENT(posenc, m) {
  m.def("linear_cross_entropy(Tensor hidden, Tensor weight, Tensor? bias, Tensor targets, int ignore_index=-100, "
        "str reduction=\"mean\", int chunk_rows=0) -> (Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(posenc, CPU, m) { m.impl("linear_cross_entropy", linear_cross_entropy_cpu); }

TORCH_LIBRARY_IMPL(posenc, Autograd, m) { m.impl("linear_cross_entropy", linear_cross_entropy_autograd); }

}  // namespace posenc::nn
