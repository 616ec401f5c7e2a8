// The vocabulary head fused into its loss: posenc::nn::linear_cross_entropy
// (forward + backward, float32) against what a libtorch user writes,
// at::linear then at::cross_entropy_loss and backward, in the same run and
// thread count, the eager side on OpenBLAS.
//
// Shapes (N rows, D, V):
//   lm     2048, 128, 8000    the extrapolation suite's causal LM (16 x 128 tokens)
//   llama  4096, 512, 32000   a Llama-sized vocabulary
// Napkin math: 3 GEMMs of 2 N D V flops (logits, d hidden, d weight): 12.6
// and 403 GFLOP; eager also writes and reads the (N, V) logits, their
// log-softmax and its gradient (65 and 524 MB each). Targets: not slower
// than eager, and extra memory below a quarter of eager's.
//
// Both sides keep freed memory for reuse, as the posenc executable does.
//
// Correctness first: loss within 1e-5 relative and every gradient within 1e-5
// of its largest entry, against the eager side on the same inputs.
// Exit code: 1 if a check fails, 3 if a target is missed, 0 otherwise.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <omp.h>
#include <torch/autograd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "bench_report.h"
#include "posenc/nn/linear_cross_entropy.h"

namespace {

struct Shape {
  const char* name;
  int64_t rows, dim, vocab;
};
constexpr Shape kShapes[] = {{"lm", 2048, 128, 8000}, {"llama", 4096, 512, 32000}};
constexpr int kRounds = 5;

struct Inputs {
  at::Tensor hidden, weight, bias, targets;
};

Inputs make(const Shape& s) {
  at::manual_seed(0);
  Inputs in;
  in.hidden = at::randn({s.rows, s.dim}).requires_grad_(true);
  in.weight = (at::randn({s.vocab, s.dim}) * 0.02).requires_grad_(true);
  in.bias = at::zeros({s.vocab}).requires_grad_(true);
  in.targets = at::randint(0, s.vocab, {s.rows}, at::kLong);
  return in;
}

void clear_grads(const Inputs& in) {
  for (const at::Tensor* t : {&in.hidden, &in.weight, &in.bias}) t->mutable_grad() = at::Tensor();
}

at::Tensor eager_step(const Inputs& in) {
  clear_grads(in);
  at::Tensor loss = at::cross_entropy_loss(at::linear(in.hidden, in.weight, in.bias), in.targets);
  loss.backward();
  return loss;
}

at::Tensor ours_step(const Inputs& in) {
  clear_grads(in);
  at::Tensor loss = posenc::nn::linear_cross_entropy(in.hidden, in.weight, in.bias, in.targets).loss;
  loss.backward();
  return loss;
}

void BM_step(benchmark::State& state, const Shape* shape, bool ours) {
  const Inputs in = make(*shape);
  for (auto _ : state) benchmark::DoNotOptimize((ours ? ours_step(in) : eager_step(in)).item<float>());
  state.counters["GFLOP/s"] =
      benchmark::Counter(6.0 * shape->rows * shape->dim * shape->vocab * 1e-9 * state.iterations(),
                         benchmark::Counter::kIsRate);
}

// The gradients of both sides on the same inputs; false (with a line) when they differ.
bool same_results(const Shape& s) {
  const Inputs in = make(s);
  const at::Tensor want = eager_step(in);
  const std::vector<at::Tensor> want_grads{in.hidden.grad(), in.weight.grad(), in.bias.grad()};
  const at::Tensor got = ours_step(in);
  const double loss_diff = std::abs(got.item<double>() - want.item<double>()) / std::abs(want.item<double>());
  double grad_diff = 0;
  const at::Tensor* mine[] = {&in.hidden, &in.weight, &in.bias};
  for (int i = 0; i < 3; ++i) {
    const double scale = want_grads[i].abs().max().item<double>();
    grad_diff = std::max(grad_diff, (mine[i]->grad() - want_grads[i]).abs().max().item<double>() / scale);
  }
  std::printf("%-6s loss ours %.7f, eager %.7f, relative diff %.1e (tol 1e-05); max |grad diff| %.1e of the largest "
              "gradient (tol 1e-05)\n",
              s.name, got.item<double>(), want.item<double>(), loss_diff, grad_diff);
  return loss_diff <= 1e-5 && grad_diff <= 1e-5;
}

}  // namespace

int main(int argc, char** argv) try {
  at::set_num_threads(omp_get_max_threads());  // both sides: the same libtorch ops and GEMMs
  std::printf("threads: libtorch %d (both sides)\n", at::get_num_threads());
  if (const int refused = posenc::bench::check_baseline_blas(argv)) return refused;
  // Eager's (N, V) logits and their gradients would otherwise be fresh pages every call.
  posenc::bench::keep_freed_memory_for_both_sides();
  for (const Shape& s : kShapes) {
    if (!same_results(s)) {
      std::printf("FAIL: %s: ours differs from linear + cross_entropy\n", s.name);
      return 1;
    }
  }
  for (const Shape& s : kShapes) {
    for (const bool ours : {true, false}) {
      benchmark::RegisterBenchmark((std::string("lce/") + s.name + (ours ? "/ours" : "/eager")).c_str(), BM_step, &s,
                                   ours)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond)
          ->MinTime(1.0);
    }
  }
  std::fflush(stdout);
  const auto times = posenc::bench::run_benchmarks(argc, argv);
  std::printf("\nforward + backward, float32 (ours / eager: time ratio of this run's fastest | paired median of %d; "
              "extra memory):\n",
              kRounds);
  bool met = true;
  for (const Shape& s : kShapes) {
    const std::string prefix = std::string("lce/") + s.name;
    if (!posenc::bench::ran(times, prefix + "/ours") || !posenc::bench::ran(times, prefix + "/eager")) continue;
    const double fastest = posenc::bench::seconds_of(times, prefix + "/eager") /
                           posenc::bench::seconds_of(times, prefix + "/ours");
    const Inputs in = make(s);
    const double paired = posenc::bench::paired_ratio([&] { eager_step(in); }, [&] { ours_step(in); }, kRounds);
    const double ours_mb = posenc::bench::peak_extra_bytes([&] { ours_step(in); }) / 1048576.0;
    const double eager_mb = posenc::bench::peak_extra_bytes([&] { eager_step(in); }) / 1048576.0;
    std::printf("  %-6s N %lld, D %lld, V %lld: %.2fx | %.2fx faster; %.0f MiB ours, %.0f MiB eager\n", s.name,
                static_cast<long long>(s.rows), static_cast<long long>(s.dim), static_cast<long long>(s.vocab),
                fastest, paired, ours_mb, eager_mb);
    const bool fast = paired >= 1.0, small = ours_mb >= 0 && eager_mb >= 0 ? ours_mb * 4 <= eager_mb : true;
    if (!fast || !small) {
      std::printf("  BELOW TARGET (%s): %s\n", s.name, !fast ? "slower than eager" : "extra memory above a quarter of eager's");
      met = false;
    }
  }
  if (!met) return 3;
  std::printf("PASS\n");
  return 0;
} catch (const std::exception& e) {
  return posenc::bench::report_error(e);
}
