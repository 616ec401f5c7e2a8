// Fused attention forward + backward (issue 14, §3-4): one training step of
// the attention op, out = attention(...); out.backward(g), through posenc's
// op (the fused forward and the FlashAttention-2 style backward) against the
// libtorch eager composition users write, on the families of
// attention_families.h (the original six, then the newer kerple, dpb, fire,
// cope, deberta), same inputs, same run, same thread count. Every input a
// family differentiates requires grad (q, k, v, ALiBi slopes, T5 table, Shaw
// tables, 2D tables; the newer families' module parameters).
//
// B=1, H=8, T=2048, Dh=64, float32 (2d-relative: a 45x45 grid, T=2025):
//   flops: forward 2 products, backward 5 (recomputed S, dP, dV, dK, dQ):
//   7 * 2*B*H*T*T*Dh = 15 GFLOP, plus the terms
//   eager saves the (B, H, T, T) probabilities and builds as many gradients
//   ours holds one tile per thread and O(T*Dh) per head: the gradients of
//   q, k, v are 4 MiB each
// Memory: peak resident memory above the baseline during one step (VmHWM).
// Then the torch 2 peer, SDPA's forward + backward (attention_peer.h, with its
// targets), where a torch 2 environment is at hand (make build-torch2).
// Targets: ours >= 2x faster than eager for each of the original six
// families, parity (>= 1x) for the newer ones; extra memory far below
// eager's (H*T^2 floats per buffer) for all.
// A --benchmark_filter that leaves out a family skips its report, not its check.
// Exit code: 1 if a gradient is wrong, 3 if a target is missed, 0 otherwise.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "attention_families.h"
#include "attention_peer.h"
#include "bench_report.h"

namespace {

using posenc::bench::AttentionFamily;
using posenc::bench::kB;
using posenc::bench::kDh;
using posenc::bench::kH;

constexpr int kRepetitions = 3;
constexpr double kSpeedTarget = 2.0;

const std::vector<AttentionFamily>& families() { return posenc::bench::attention_families(); }

// The gradient fed to out: fixed per output shape.
const at::Tensor& grad_for(const at::Tensor& out) {
  static std::map<int64_t, at::Tensor> grads;
  at::Tensor& g = grads[out.size(2)];
  if (!g.defined()) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(out.size(2));
    g = at::randn(out.sizes(), gen, out.options());
  }
  return g;
}

// One step: forward, backward, gradients cleared for the next.
void step(at::Tensor (*forward)()) {
  const at::Tensor out = forward();
  out.backward(grad_for(out));
  posenc::bench::require_grad(true);
}

// Correctness first: every gradient against eager's, relative to its largest
// entry (float32 sums of 2048 terms in different orders: a few 1e-6; a
// family's own tolerance where eager's float32 is measured to err more, with
// its reason).
bool check_gradients() {
  constexpr double kTol = 1e-4;
  bool ok = true;
  for (const AttentionFamily& f : families()) {
    const double tol = f.gradient_tol > 0 ? f.gradient_tol : kTol;
    std::vector<at::Tensor> got, want;
    for (auto [side, fn] : {std::pair{&got, f.ours}, std::pair{&want, f.eager}}) {
      const at::Tensor out = fn();
      out.backward(grad_for(out));
      for (const at::Tensor& g : posenc::bench::family_gradients(f)) side->push_back(g.clone());
      posenc::bench::require_grad(true);
    }
    double worst = 0;
    for (size_t n = 0; n < got.size(); ++n) {
      const double scale = std::max(want[n].abs().max().item<double>(), 1e-30);
      worst = std::max(worst, (got[n] - want[n]).abs().max().item<double>() / scale);
    }
    std::printf("max |ours - eager| / max |eager| over the %zu gradients %-12s %.2e (tol %.0e)\n", got.size(),
                f.name, worst, tol);
    ok = ok && worst <= tol;
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) try {
  if (const int refused = posenc::bench::start_benchmark(argv)) return refused;
  posenc::bench::require_grad(true);
  if (!check_gradients()) {
    std::printf("FAIL: a posenc gradient is outside its tolerance\n");
    return 1;
  }
  std::fflush(stdout);
  posenc::bench::register_family_benchmarks("step", step, kRepetitions);
  const auto times = posenc::bench::run_benchmarks(argc, argv);
  auto t = [&](const std::string& name) { return posenc::bench::seconds_of(times, "step/" + name); };

  // A --benchmark_filter that selects no family would otherwise print PASS for nothing measured.
  if (times.empty()) throw std::runtime_error("--benchmark_filter selected no family of this benchmark");
  constexpr int kRounds = 3;
  bool ok = true;
  std::printf("\nfused attention forward + backward, B=%lld H=%lld Dh=%lld float32; fastest | paired median:\n",
              (long long)kB, (long long)kH, (long long)kDh);
  for (const AttentionFamily& f : families()) {
    const std::string name = f.name;
    if (!posenc::bench::ran(times, "step/ours_" + name) && !posenc::bench::ran(times, "step/eager_" + name)) continue;
    posenc::bench::FamilyTiming timing;
    timing.ours_seconds = t("ours_" + name), timing.eager_seconds = t("eager_" + name);
    timing.paired = posenc::bench::paired_ratio([&] { step(f.eager); }, [&] { step(f.ours); }, kRounds);
    timing.ours_bytes = posenc::bench::peak_extra_bytes([&] { step(f.ours); });
    timing.eager_bytes = posenc::bench::peak_extra_bytes([&] { step(f.eager); });
    timing.gflop = 7 * 2.0 * kB * kH * double(f.length) * double(f.length) * kDh / 1e9;
    ok = posenc::bench::report_family(f, timing, f.parity ? posenc::bench::kParityTarget : kSpeedTarget) && ok;
  }
  posenc::bench::PeerComparison peer;
  peer.backward = true;
  peer.ours_outputs = [](const AttentionFamily& f) {
    const at::Tensor out = f.ours();
    out.backward(grad_for(out));
    const std::vector<at::Tensor> g = posenc::bench::family_gradients(f);
    std::vector<at::Tensor> r{out.detach(), g[0].clone(), g[1].clone(), g[2].clone()};
    posenc::bench::require_grad(true);
    return r;
  };
  peer.ours_call = [](const AttentionFamily& f) { step(f.ours); };
  peer.grad = [](const AttentionFamily& f) { return grad_for(f.ours().detach()); };
  peer.selected = [&](const AttentionFamily& f) {
    return posenc::bench::ran(times, "step/ours_" + std::string(f.name)) ||
           posenc::bench::ran(times, "step/eager_" + std::string(f.name));
  };
  const int against_torch2 = posenc::bench::compare_with_torch2(peer);
  if (against_torch2 == 1) {
    std::printf("FAIL: a posenc gradient differs from SDPA's\n");
    return 1;
  }
  if (!ok || against_torch2 != 0) return 3;
  std::printf("PASS\n");
  return 0;
} catch (const std::exception& e) {
  return posenc::bench::report_error(e);
}
