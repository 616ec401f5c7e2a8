// Fused attention forward (issue 5, §4) through the op users call
// (posenc::nn::ops::attention_fused), against the libtorch eager composition
// users write (matmul, bias or relative terms, softmax, matmul), same inputs,
// same run, same thread count; the families in attention_families.h (the
// original six, the causal mask, then the newer kerple, dpb, fire, cope, deberta).
//
// B=1, H=8, T=2048, Dh=64, float32 (2d-relative: a 45x45 grid, T=2025):
//   flops: q.k^T and p.v, 2 * 2*B*H*T*T*Dh = 4.3 GFLOP, plus the terms
//   eager holds the (B, H, T, T) logits and probabilities: 128 MiB each
//   ours holds one tile per thread and O(T*Dh) of tables: the output is 4 MiB
// Memory: peak resident memory above the baseline during one call (VmHWM).
// Then the torch 2 peer, SDPA (attention_peer.h, with its targets), where a
// torch 2 environment is at hand (make build-torch2 makes it).
// Targets: ours >= 3x faster than eager for each of the original six families,
// and at >= 75% of the float32 GEMM rate OpenBLAS reaches in the same run
// (napkin flops); the newer families: parity (>= 1x), their GEMM share printed
// untargeted (their terms add work the napkin flops do not count).
// A --benchmark_filter that leaves out a family skips its report, not its check.
// Exit code: 1 if a result is wrong, 3 if a target is missed, 0 otherwise.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>

#include <cstdio>
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
using posenc::bench::kGrid;
using posenc::bench::kH;
using posenc::bench::kT;

constexpr int kRepetitions = 3;
constexpr double kSpeedTarget = 3.0;
// GFLOP/s (napkin flops 4*B*H*T^2*Dh) against OpenBLAS's float32 GEMM measured in the same run.
constexpr double kGemmShareTarget = 0.75;

const std::vector<AttentionFamily>& families() { return posenc::bench::attention_families(); }

// Correctness first: every family against the eager float32 composition. Both
// sum 2048 float32 products per output with different orders and softmax
// rescalings: differences of a few 1e-6 on outputs of size ~1 (a family's own
// tolerance where eager's float32 is measured to err more, with its reason).
bool check_results() {
  constexpr double kTol = 2e-5;
  bool ok = true;
  for (const AttentionFamily& f : families()) {
    const double tol = f.forward_tol > 0 ? f.forward_tol : kTol;
    const double err = (f.ours() - f.eager()).abs().max().item<double>();
    std::printf("max |ours - eager| %-12s %.2e (tol %.0e)\n", f.name, err, tol);
    ok = ok && err <= tol;
  }
  return ok;
}

// One forward, its output touched so that nothing is optimized away.
void forward(at::Tensor (*fn)()) { benchmark::DoNotOptimize(fn().data_ptr()); }

}  // namespace

int main(int argc, char** argv) try {
  if (const int refused = posenc::bench::start_benchmark(argv)) return refused;
  if (!check_results()) {
    std::printf("FAIL: a posenc result is outside its tolerance\n");
    return 1;
  }
  std::fflush(stdout);
  posenc::bench::register_family_benchmarks("run", forward, kRepetitions);
  const auto times = posenc::bench::run_benchmarks(argc, argv);
  auto t = [&](const std::string& name) { return posenc::bench::seconds_of(times, "run/" + name); };

  // A --benchmark_filter that selects no family would otherwise print PASS for nothing measured.
  if (times.empty()) throw std::runtime_error("--benchmark_filter selected no family of this benchmark");
  constexpr int kRounds = 3;
  bool ok = true;
  std::printf("\nfused attention forward, B=%lld H=%lld T=%lld Dh=%lld float32 (2d-relative: %lldx%lld = %lld); "
              "fastest | paired median:\n",
              (long long)kB, (long long)kH, (long long)kT, (long long)kDh, (long long)kGrid, (long long)kGrid,
              (long long)(kGrid * kGrid));
  auto measured = [&](const AttentionFamily& f) {
    return posenc::bench::ran(times, "run/ours_" + std::string(f.name)) ||
           posenc::bench::ran(times, "run/eager_" + std::string(f.name));
  };
  std::vector<double> ratios;
  for (const AttentionFamily& f : families()) {
    if (measured(f)) t("ours_" + std::string(f.name)), t("eager_" + std::string(f.name));  // both sides, or stop here
    ratios.push_back(measured(f) ? posenc::bench::paired_ratio([&] { f.eager(); }, [&] { f.ours(); }, kRounds) : 0);
  }
  for (size_t n = 0; n < families().size(); ++n) {
    const AttentionFamily& f = families()[n];
    const std::string name = f.name;
    if (!measured(f)) continue;
    posenc::bench::FamilyTiming timing;
    timing.ours_seconds = t("ours_" + name), timing.eager_seconds = t("eager_" + name);
    timing.paired = ratios[n];
    at::Tensor kept;  // the output stays resident while measured, then goes
    timing.ours_bytes = posenc::bench::peak_extra_bytes([&] { kept = f.ours(); });
    kept.reset();
    timing.eager_bytes = posenc::bench::peak_extra_bytes([&] { kept = f.eager(); });
    kept.reset();
    timing.gflop = 4.0 * kB * kH * double(f.length) * double(f.length) * kDh / 1e9;
    ok = posenc::bench::report_family(f, timing, f.parity ? posenc::bench::kParityTarget : kSpeedTarget) && ok;
    const double gemm_share = timing.gflop / timing.ours_seconds / posenc::bench::baseline_gemm_gflops();
    if (f.parity) {
      std::printf("  %-12s at %.0f%% of the baseline's float32 GEMM rate (no target)\n", f.name,
                  100 * gemm_share);
      continue;
    }
    std::printf("  %-12s at %.0f%% of the baseline's float32 GEMM rate (target >= %.0f%%)\n", f.name,
                100 * gemm_share, 100 * kGemmShareTarget);
    if (gemm_share < kGemmShareTarget) {
      std::printf("BELOW TARGET: %s GFLOP/s vs the baseline's GEMM\n", f.name);
      ok = false;
    }
  }
  posenc::bench::PeerComparison peer;
  peer.ours_outputs = [](const AttentionFamily& f) { return std::vector<at::Tensor>{f.ours()}; };
  peer.ours_call = [](const AttentionFamily& f) { forward(f.ours); };
  peer.selected = measured;
  const int against_torch2 = posenc::bench::compare_with_torch2(peer);
  if (against_torch2 == 1) {
    std::printf("FAIL: a posenc result differs from SDPA's\n");
    return 1;
  }
  if (!ok || against_torch2 != 0) return 3;
  std::printf("PASS\n");
  return 0;
} catch (const std::exception& e) {
  return posenc::bench::report_error(e);
}
