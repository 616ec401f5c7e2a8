// Chunked head + cross-entropy (posenc/training/linear_cross_entropy.h).
#include "posenc/training/linear_cross_entropy.h"

#include <torch/autograd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "posenc/error.h"

namespace posenc::nn {
namespace {

constexpr const char* kOp = "linear_cross_entropy";
constexpr int64_t kChunkElements = int64_t{1} << 20;  // 4 MB of float32 logits per chunk (L2/L3-sized)

std::string shape_text(const at::Tensor& t) {
  std::string out = "(";
  for (int64_t i = 0; i < t.dim(); ++i) out += (i ? ", " : "") + std::to_string(t.size(i));
  return out + ")";
}

const char* dtype_text(at::ScalarType t) {
  return t == at::kFloat ? "float32" : t == at::kDouble ? "float64" : t == at::kLong ? "int64" : "another dtype";
}

struct Pass {
  double loss_sum = 0;
  int64_t correct = 0;
  at::Tensor grad_hidden, grad_weight, grad_bias;  // the mean loss's, when asked for

  at::Tensor mean_loss(const at::Tensor& hidden) const {
    return at::scalar_tensor(loss_sum / static_cast<double>(hidden.size(0)), hidden.options());
  }
};

// One pass over the rows in chunks; the gradients only where want_* is set.
Pass run_chunks(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& bias, const at::Tensor& targets,
                int64_t chunk_rows, bool want_hidden, bool want_weight, bool want_bias) {
  at::NoGradGuard no_grad;
  const int64_t n = hidden.size(0), vocab = weight.size(0);
  const int64_t rows = chunk_rows > 0 ? chunk_rows : std::max<int64_t>(16, kChunkElements / vocab);
  const bool want_any = want_hidden || want_weight || want_bias;
  const double inv_n = 1.0 / static_cast<double>(n);
  Pass pass;
  if (want_hidden) pass.grad_hidden = at::empty_like(hidden);
  if (want_weight) pass.grad_weight = at::zeros_like(weight);
  if (want_bias) pass.grad_bias = at::zeros_like(bias);
  const at::Tensor weight_t = weight.t();
  at::Tensor loss_sum = at::zeros({}, hidden.options().dtype(at::kDouble));
  at::Tensor correct = at::zeros({}, targets.options());
  for (int64_t r0 = 0; r0 < n; r0 += rows) {
    const int64_t c = std::min(rows, n - r0);
    const at::Tensor h = hidden.narrow(0, r0, c);
    const at::Tensor t = targets.narrow(0, r0, c).unsqueeze(1);
    at::Tensor z = bias.defined() ? at::addmm(bias, h, weight_t) : at::mm(h, weight_t);
    correct += z.argmax(1).eq(t.squeeze(1)).sum();
    const at::Tensor picked = z.gather(1, t);
    // In place, one exp per logit: z - max, then e^(z - max), whose row sum gives logsumexp.
    const at::Tensor max = z.amax(1, /*keepdim=*/true);
    z.sub_(max).exp_();
    const at::Tensor sum = z.sum(1, /*keepdim=*/true);
    loss_sum += (max + sum.log() - picked).sum(at::kDouble);
    if (!want_any) continue;
    // z becomes dz = softmax - onehot(t); the 1 / N of the mean goes into the products.
    z.div_(sum).scatter_add_(1, t, at::full({c, 1}, -1.0, z.options()));
    if (want_hidden) {
      at::Tensor out = pass.grad_hidden.narrow(0, r0, c);
      at::addmm_out(out, out, z, weight, /*beta=*/0, /*alpha=*/inv_n);
    }
    if (want_weight) pass.grad_weight.addmm_(z.t(), h, /*beta=*/1, /*alpha=*/inv_n);
    if (want_bias) pass.grad_bias.add_(z.sum(0), inv_n);
  }
  pass.loss_sum = loss_sum.item<double>();
  pass.correct = correct.item<int64_t>();
  return pass;
}

struct LinearCrossEntropyFunction : public torch::autograd::Function<LinearCrossEntropyFunction> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const at::Tensor& hidden,
                                                const at::Tensor& weight, const at::Tensor& bias,
                                                const at::Tensor& targets, int64_t chunk_rows) {
    const bool has_bias = bias.defined();
    Pass pass = run_chunks(hidden, weight, bias, targets, chunk_rows, hidden.requires_grad(), weight.requires_grad(),
                           has_bias && bias.requires_grad());
    ctx->saved_data["grad_hidden"] = pass.grad_hidden;
    ctx->saved_data["grad_weight"] = pass.grad_weight;
    ctx->saved_data["grad_bias"] = pass.grad_bias;
    at::Tensor correct = at::scalar_tensor(pass.correct, targets.options());
    ctx->mark_non_differentiable({correct});
    return {pass.mean_loss(hidden), correct};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    // Grad mode is on in a backward only with create_graph: a second derivative would silently be 0.
    TORCH_CHECK(!at::GradMode::is_enabled(), "[", kOp,
                "] has no double backward (its gradient is computed with the loss)");
    const auto scaled = [&](const char* name) {
      const at::Tensor g = ctx->saved_data[name].toTensor();
      return g.defined() ? g * grads[0] : at::Tensor();
    };
    return {scaled("grad_hidden"), scaled("grad_weight"), scaled("grad_bias"), at::Tensor(), at::Tensor()};
  }
};

void check_arguments(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& bias,
                     const at::Tensor& targets, int64_t chunk_rows) {
  require(hidden.defined() && hidden.dim() == 2 && hidden.size(0) >= 1, kOp, "hidden must be (N, D) with N >= 1, got ",
          hidden.defined() ? shape_text(hidden) : "undefined");
  const at::ScalarType dtype = hidden.scalar_type();
  require(dtype == at::kFloat || dtype == at::kDouble, kOp, "hidden must be float32 or float64, got ",
          dtype_text(dtype));
  require(weight.defined() && weight.dim() == 2 && weight.size(1) == hidden.size(1) && weight.size(0) >= 1, kOp,
          "weight must be (V, D) = (V, ", hidden.size(1), "), got ",
          weight.defined() ? shape_text(weight) : "undefined");
  require(weight.scalar_type() == dtype, kOp, "weight must have hidden's dtype ", dtype_text(dtype), ", got ",
          dtype_text(weight.scalar_type()));
  if (bias.defined()) {
    require(bias.dim() == 1 && bias.size(0) == weight.size(0), kOp, "bias must be (V) = (", weight.size(0), "), got ",
            shape_text(bias));
    require(bias.scalar_type() == dtype, kOp, "bias must have hidden's dtype ", dtype_text(dtype), ", got ",
            dtype_text(bias.scalar_type()));
  }
  require(targets.defined() && targets.scalar_type() == at::kLong && targets.dim() == 1 &&
              targets.size(0) == hidden.size(0),
          kOp, "targets must be int64 (N) = (", hidden.size(0), "), got ",
          targets.defined() ? std::string(dtype_text(targets.scalar_type())) + " " + shape_text(targets)
                            : std::string("undefined"));
  const int64_t lo = targets.min().item<int64_t>(), hi = targets.max().item<int64_t>();
  require(lo >= 0 && hi < weight.size(0), kOp, "targets must be in [0, ", weight.size(0), "), got ", lo < 0 ? lo : hi);
  require(chunk_rows >= 0, kOp, "chunk_rows must be >= 0 (0: about 4 MB of float32 logits per chunk), got ",
          chunk_rows);
}

}  // namespace

LinearCrossEntropy linear_cross_entropy(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& bias,
                                        const at::Tensor& targets, int64_t chunk_rows) {
  check_arguments(hidden, weight, bias, targets, chunk_rows);
  const bool wants_grad = at::GradMode::is_enabled() && (hidden.requires_grad() || weight.requires_grad() ||
                                                         (bias.defined() && bias.requires_grad()));
  const at::Tensor h = hidden.contiguous(), w = weight.contiguous();
  LinearCrossEntropy out;
  if (!wants_grad) {
    const Pass pass = run_chunks(h, w, bias.defined() ? bias.contiguous() : bias, targets, chunk_rows, false, false,
                                 false);
    out.loss = pass.mean_loss(hidden);
    out.correct = pass.correct;
    return out;
  }
  // An autograd Function takes no undefined input: no bias is a zero one that wants no gradient (adding 0 is exact).
  const at::Tensor b = bias.defined() ? bias.contiguous() : at::zeros({weight.size(0)}, weight.options());
  const torch::autograd::variable_list r = LinearCrossEntropyFunction::apply(h, w, b, targets, chunk_rows);
  out.loss = r[0];
  out.correct = r[1].item<int64_t>();
  return out;
}

}  // namespace posenc::nn
