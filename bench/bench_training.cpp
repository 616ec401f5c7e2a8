// Training throughput (issue 5, §4): tokens/s of one training step (forward,
// backward, AdamW step) of posenc::nn::TransformerEncoder with a
// classification loss, for every registry name, against an eager libtorch
// encoder of the same shape written plainly below, in the same run.
//
// Configuration: dim 128, 2 layers, 4 heads (Dh 32), ffn 512, T 128, batch 16
// (2048 tokens per step), vocab 256, 2 classes, float32, AdamW lr 1e-4.
// Napkin math per step: ~0.39 M weights x 2048 tokens x 6 (forward + backward)
// = 4.8 GFLOP in the projections and FFN, plus attention 2 layers x 3
// (forward + backward) x 2 matmuls x 2*B*H*T^2*Dh = 0.8 GFLOP: ~5.6 GFLOP, all
// in libtorch's GEMMs on both sides (Debian's generic BLAS: a few GFLOP/s on
// 2 cores, so ~1 s per step). The encodings add O(H*T) biases or O(T*Dh)
// tables; in training the composed attention path forms (B, H, T, T)
// logits as eager does.
//
// Eager baseline: Embedding + a precomputed sinusoidal buffer added, pre-LN
// blocks with matmul / softmax attention, the same FFN (gelu), final LN, the
// first token to a linear head; parameters are plain tensors, at:: ops only.
// Correctness first: given our "sinusoidal" model's weights it must give the
// same loss (within 1e-5) and the same gradients.
// Exit code: 1 if a check fails, 0 otherwise (the issue sets no speed target).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <omp.h>
#include <torch/optim/adamw.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench_report.h"
#include "posenc/nn/encoding_registry.h"
#include "posenc/nn/models.h"

namespace {

using posenc::nn::TransformerEncoder;
using posenc::nn::TransformerOptions;

constexpr int64_t kDim = 128, kLayers = 2, kHeads = 4, kFfn = 512, kT = 128, kBatch = 16, kVocab = 256;
constexpr double kLr = 1e-4;
// A step takes ~1 s on the 2-core development machine (Debian's libtorch
// uses a generic BLAS, ~3 GFLOP/s per linear), so few repetitions.
constexpr int kRepetitions = 2;
constexpr int kIterations = 2;
constexpr int kRounds = 3;  // paired ratios

TransformerOptions options(const std::string& encoding) {
  return TransformerOptions(kVocab, encoding).dim(kDim).layers(kLayers).heads(kHeads).ffn_dim(kFfn).max_positions(kT);
}

struct Batch {
  at::Tensor tokens, labels;
};

const Batch& batch() {
  static const Batch b = [] {
    at::manual_seed(0);
    return Batch{at::randint(kVocab, {kBatch, kT}), at::randint(2, {kBatch})};
  }();
  return b;
}

// ---------------------------------------------------------------------------
// The eager encoder.

struct EagerBlock {
  at::Tensor ln1_w, ln1_b, wq, bq, wk, bk, wv, bv, wo, bo, ln2_w, ln2_b, w1, b1, w2, b2;
};

struct EagerEncoder {
  at::Tensor embed, pe;  // (V, D) parameter, (T, D) buffer
  std::vector<EagerBlock> blocks;
  at::Tensor lnf_w, lnf_b, cls_w, cls_b;
  std::vector<std::string> names;  // our model's names of parameters(), in order

  std::vector<at::Tensor> parameters() {
    std::vector<at::Tensor> p{embed};
    for (EagerBlock& b : blocks) {
      for (at::Tensor* t : {&b.ln1_w, &b.ln1_b, &b.wq, &b.bq, &b.wk, &b.bk, &b.wv, &b.bv, &b.wo, &b.bo, &b.ln2_w,
                            &b.ln2_b, &b.w1, &b.b1, &b.w2, &b.b2}) {
        p.push_back(*t);
      }
    }
    for (at::Tensor* t : {&lnf_w, &lnf_b, &cls_w, &cls_b}) p.push_back(*t);
    return p;
  }

  // tokens (B, T) -> logits (B, classes)
  at::Tensor classify(const at::Tensor& tokens) const {
    const int64_t b = tokens.size(0), t = tokens.size(1), dh = kDim / kHeads;
    at::Tensor x = at::embedding(embed, tokens) + pe.narrow(0, 0, t);  // (B, T, D)
    for (const EagerBlock& k : blocks) {
      const at::Tensor h = at::layer_norm(x, {kDim}, k.ln1_w, k.ln1_b);
      auto heads = [&](const at::Tensor& w, const at::Tensor& bias) {
        return at::linear(h, w, bias).view({b, t, kHeads, dh}).transpose(1, 2);  // (B, H, T, Dh)
      };
      const at::Tensor q = heads(k.wq, k.bq), kk = heads(k.wk, k.bk), v = heads(k.wv, k.bv);
      const at::Tensor p = at::softmax(at::matmul(q, kk.transpose(2, 3)) / std::sqrt(double(dh)), -1);
      const at::Tensor o = at::matmul(p, v).transpose(1, 2).reshape({b, t, kDim});
      x = x + at::linear(o, k.wo, k.bo);
      x = x + at::linear(at::gelu(at::linear(at::layer_norm(x, {kDim}, k.ln2_w, k.ln2_b), k.w1, k.b1)), k.w2, k.b2);
    }
    return at::linear(at::layer_norm(x, {kDim}, lnf_w, lnf_b).select(1, 0), cls_w, cls_b);
  }
};

// Vaswani et al. interleaved (sin, cos), formed in double as a careful user
// would for a buffer built once.
at::Tensor sinusoid_buffer(int64_t t, int64_t dim) {
  const at::Tensor pos = at::arange(t, at::kDouble).unsqueeze(1);
  const at::Tensor omega = at::pow(10000.0, -at::arange(0, dim, 2, at::kDouble) / dim);
  const at::Tensor angle = pos * omega;
  return at::stack({angle.sin(), angle.cos()}, 2).view({t, dim}).to(at::kFloat);
}

// A copy of our model's weights as plain leaf tensors.
EagerEncoder eager_from(TransformerEncoder& ours) {
  auto p = ours->named_parameters();
  EagerEncoder e;
  auto leaf = [&](const std::string& name) {
    e.names.push_back(name);
    return p[name].detach().clone().requires_grad_(true);
  };
  e.embed = leaf("embed.weight");
  e.pe = sinusoid_buffer(kT, kDim);
  for (int64_t l = 0; l < kLayers; ++l) {
    const std::string b = "blocks." + std::to_string(l) + ".";
    const std::string a = b + "attention.";
    e.blocks.push_back({leaf(b + "norm1.weight"), leaf(b + "norm1.bias"), leaf(a + "q_proj.weight"),
                        leaf(a + "q_proj.bias"), leaf(a + "k_proj.weight"), leaf(a + "k_proj.bias"),
                        leaf(a + "v_proj.weight"), leaf(a + "v_proj.bias"), leaf(a + "out_proj.weight"),
                        leaf(a + "out_proj.bias"), leaf(b + "norm2.weight"), leaf(b + "norm2.bias"),
                        leaf(b + "ffn1.weight"), leaf(b + "ffn1.bias"), leaf(b + "ffn2.weight"),
                        leaf(b + "ffn2.bias")});
  }
  e.lnf_w = leaf("final_norm.weight");
  e.lnf_b = leaf("final_norm.bias");
  e.cls_w = leaf("cls_head.weight");
  e.cls_b = leaf("cls_head.bias");
  return e;
}

// ---------------------------------------------------------------------------
// The trainees: ours per encoding, and the eager one.

struct Trainee {
  std::string name;
  std::function<at::Tensor()> loss;
  std::vector<at::Tensor> parameters;
  std::unique_ptr<torch::optim::AdamW> optimizer;

  // One training step: forward, backward, AdamW.
  void step() {
    optimizer->zero_grad();
    const at::Tensor l = loss();
    l.backward();
    optimizer->step();
  }
};

std::vector<std::unique_ptr<Trainee>>& trainees() {
  static std::vector<std::unique_ptr<Trainee>> all;
  return all;
}

std::unique_ptr<Trainee> make_trainee(std::string name, std::function<at::Tensor()> loss,
                                      std::vector<at::Tensor> parameters) {
  auto t = std::make_unique<Trainee>();
  t->name = std::move(name);
  t->loss = std::move(loss);
  t->parameters = std::move(parameters);
  t->optimizer = std::make_unique<torch::optim::AdamW>(t->parameters, torch::optim::AdamWOptions(kLr));
  return t;
}

std::unique_ptr<Trainee> ours(const std::string& encoding) {
  at::manual_seed(1);
  TransformerEncoder model(options(encoding));
  model->train();
  return make_trainee(
      encoding,
      [model]() mutable { return at::cross_entropy_loss(model->classify(batch().tokens), batch().labels); },
      model->parameters());
}

std::unique_ptr<Trainee> eager(EagerEncoder e) {
  auto shared = std::make_shared<EagerEncoder>(std::move(e));
  return make_trainee(
      "eager", [shared] { return at::cross_entropy_loss(shared->classify(batch().tokens), batch().labels); },
      shared->parameters());
}

// ---------------------------------------------------------------------------
// Correctness first: the same weights give the same loss and gradients.

bool check_against_eager() {
  at::manual_seed(1);
  TransformerEncoder model(options("sinusoidal"));
  EagerEncoder e = eager_from(model);
  const at::Tensor ours_loss = at::cross_entropy_loss(model->classify(batch().tokens), batch().labels);
  const at::Tensor eager_loss = at::cross_entropy_loss(e.classify(batch().tokens), batch().labels);
  ours_loss.backward();
  eager_loss.backward();
  // Gradients, parameter by parameter (span_head takes no part in the loss).
  const auto mine = model->named_parameters();
  const std::vector<at::Tensor> theirs = e.parameters();
  double worst = 0.0, scale = 0.0;
  for (size_t i = 0; i < theirs.size(); ++i) {
    worst = std::max(worst, (mine[e.names[i]].grad() - theirs[i].grad()).abs().max().item<double>());
    scale = std::max(scale, theirs[i].grad().abs().max().item<double>());
  }
  // Every parameter of ours but the span head has its eager twin.
  const bool same_count = mine.size() == theirs.size() + 2;
  const double loss_diff = std::abs(ours_loss.item<double>() - eager_loss.item<double>());
  // float32 through 2 layers of 2048 tokens: sums of a few hundred O(1)
  // terms, ~1e-6 relative each; the loss is O(1).
  constexpr double kTolLoss = 1e-5, kTolGrad = 1e-3;
  std::printf("sinusoidal, same weights: loss ours %.7f, eager %.7f, |diff| %.2e (tol %.0e); "
              "max |grad diff| %.2e = %.2e of the largest gradient (tol %.0e)\n",
              ours_loss.item<double>(), eager_loss.item<double>(), loss_diff, kTolLoss, worst,
              scale > 0 ? worst / scale : 0.0, kTolGrad);
  if (!same_count) std::printf("parameter counts differ: ours %zu (span head included), eager %zu\n", mine.size(), theirs.size());
  return same_count && loss_diff <= kTolLoss && worst <= kTolGrad * scale;
}

// Every trainee takes a step (warm-up: allocations, AdamW state) and keeps a finite loss.
bool check_finite() {
  bool ok = true;
  for (auto& t : trainees()) {
    t->step();
    const double l = t->loss().item<double>();
    if (!std::isfinite(l)) {
      std::printf("%s: loss %g after a step\n", t->name.c_str(), l);
      ok = false;
    }
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  // Same thread count for both sides: the comparison is of code, not cores.
  at::set_num_threads(omp_get_max_threads());
  std::printf("threads: posenc %d, libtorch %d\n", omp_get_max_threads(), at::get_num_threads());
  if (const int refused = posenc::bench::check_baseline_blas()) return refused;
  if (!check_against_eager()) {
    std::printf("FAIL: our encoder and the eager one disagree\n");
    return 1;
  }

  for (const auto& info : posenc::nn::encoding_catalog()) trainees().push_back(ours(info.name));
  {
    at::manual_seed(1);
    TransformerEncoder model(options("sinusoidal"));
    trainees().push_back(eager(eager_from(model)));
  }
  if (!check_finite()) {
    std::printf("FAIL: a loss is not finite\n");
    return 1;
  }
  std::fflush(stdout);

  for (auto& t : trainees()) {
    Trainee* trainee = t.get();
    benchmark::RegisterBenchmark(("train/" + t->name).c_str(),
                                 [trainee](benchmark::State& state) {
                                   for (auto _ : state) trainee->step();
                                 })
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond)
        ->Iterations(kIterations)
        ->Repetitions(kRepetitions);
  }
  const auto times = posenc::bench::run_benchmarks(argc, argv);
  // "/" ends the name: "train/rope/" must not match "train/rope-xpos/...".
  auto seconds = [&](const std::string& name) { return posenc::bench::seconds_of(times, "train/" + name + "/"); };

  Trainee& baseline = *trainees().back();
  const double eager_s = seconds("eager");
  const double tokens = static_cast<double>(kBatch * kT);
  std::printf("\ntraining step (forward + backward + AdamW), TransformerEncoder dim %lld, %lld layers, %lld heads, "
              "T %lld, batch %lld, float32; fastest of %d x %d | paired median of %d:\n",
              (long long)kDim, (long long)kLayers, (long long)kHeads, (long long)kT, (long long)kBatch, kRepetitions,
              kIterations, kRounds);
  std::printf("  %-26s %9s %12s %16s\n", "encoding", "ms/step", "tokens/s", "vs eager");
  std::printf("  %-26s %9.1f %12.0f %16s\n", "eager libtorch (sinusoidal)", 1e3 * eager_s, tokens / eager_s, "1.00x");
  for (size_t i = 0; i + 1 < trainees().size(); ++i) {
    Trainee& t = *trainees()[i];
    const double s = seconds(t.name);
    const double paired = posenc::bench::paired_ratio([&] { baseline.step(); }, [&] { t.step(); }, kRounds);
    std::printf("  %-26s %9.1f %12.0f %7.2fx | %.2fx\n", t.name.c_str(), 1e3 * s, tokens / s, eager_s / s, paired);
  }
  std::printf("(ratios > 1: posenc trains faster than the eager model)\n");
  return 0;
}
