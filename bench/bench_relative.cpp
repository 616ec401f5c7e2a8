// Relative position vectors and attention biases (issue 4, §3), through the
// torch ops users call (posenc::nn::ops), against the libtorch eager code
// users write, in the same run.
//
// relative_logits, B=1, H=8, Tq=Tk=2048, Dh=64, k=2047 (no clipping):
//   eager: R = table[clip(j-i)+k] is a (T, T, Dh) gather (2048*2048*64*4 B =
//   1 GiB written, then read by einsum('bhid,ijd->bhij')); ours: per block of
//   query rows, one small GEMM against the table rows its offsets reach
//   (2*B*H*T*T*Dh = 4.3 GFLOP) and an indexed copy into the (B,H,T,T) output
//   (128 MiB). relative_values: the same gather, then einsum('bhij,ijd->bhid').
// Biases, 32 heads x 4096 x 4096 float32 (2 GiB): ours writes each value once
//   (a shifted window of one per-head row); eager ALiBi builds |i-j| in int64
//   and multiplies by the slopes (MPT/BLOOM style), eager T5 computes the
//   buckets of 16M offsets with float32 logs and gathers the table
//   (Hugging Face compute_bias; its permuted view, no copy).
// Memory: peak resident memory above the baseline during one call (VmHWM after
//   resetting it through /proc/self/clear_refs), output included.
// Targets: relative_logits and relative_values >= 3x faster than eager, peak
//   within 2x of the output; ALiBi and T5 construction >= 3x faster than eager,
//   judged with the output written into a reused buffer on both sides: on this
//   VM the first touch of 2 GiB of fresh pages costs ~0.6 s of kernel time
//   (10x the construction itself) and swamps both sides; the new-tensor
//   ratios are printed too.
// Exit code: 1 if a result is wrong, 3 if a target is missed, 0 otherwise.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "bench_report.h"
#include "posenc/kernels/t5.h"
#include "posenc/nn/bias_ops.h"
#include "posenc/nn/relative_ops.h"

namespace {

constexpr int64_t kB = 1, kH = 8, kT = 2048, kDh = 64, kK = 2047;
constexpr int64_t kBiasHeads = 32, kBiasLen = 4096;
constexpr int kRepetitions = 3;
constexpr double kSpeedTarget = 3.0;
constexpr double kMemoryTarget = 2.0;  // peak / output size

// ---------------------------------------------------------------------------
// The eager libtorch formulations.

at::Tensor offset_rows(int64_t q_len, int64_t k_len, int64_t k) {
  const at::Tensor rel = at::arange(k_len, at::kLong).unsqueeze(0) - at::arange(q_len, at::kLong).unsqueeze(1);
  return rel.clamp(-k, k) + k;
}

at::Tensor eager_relative_logits(const at::Tensor& q, const at::Tensor& table) {
  const at::Tensor gathered = table.index({offset_rows(q.size(2), q.size(2), kK)});  // (T, T, Dh)
  return at::einsum("bhid,ijd->bhij", {q, gathered});
}

at::Tensor eager_relative_values(const at::Tensor& probs, const at::Tensor& table) {
  const at::Tensor gathered = table.index({offset_rows(probs.size(2), probs.size(3), kK)});
  return at::einsum("bhij,ijd->bhid", {probs, gathered});
}

// MPT / BLOOM style: |i - j| in int64, times -slope per head.
at::Tensor eager_alibi(const at::Tensor& slopes) {
  const at::Tensor rel = at::arange(kBiasLen, at::kLong).unsqueeze(0) - at::arange(kBiasLen, at::kLong).unsqueeze(1);
  return rel.abs().neg() * slopes.view({kBiasHeads, 1, 1});
}

// Hugging Face T5 _relative_position_bucket (bidirectional, 32 buckets, 128) of key - query.
at::Tensor eager_t5_buckets() {
  at::Tensor rel = at::arange(kBiasLen, at::kLong).unsqueeze(0) - at::arange(kBiasLen, at::kLong).unsqueeze(1);
  const int64_t half = 16, max_exact = 8;
  at::Tensor buckets = (rel > 0).to(at::kLong) * half;
  rel = rel.abs();
  const at::Tensor is_small = rel < max_exact;
  at::Tensor large = max_exact + (at::log(rel.to(at::kFloat) / max_exact) / std::log(128.0 / max_exact) *
                                  (half - max_exact))
                                     .to(at::kLong);
  large = at::minimum(large, at::full_like(large, half - 1));
  return buckets + at::where(is_small, rel, large);
}

// compute_bias: the buckets, then the table lookup; HF returns the permuted view.
at::Tensor eager_t5(const at::Tensor& table) { return at::embedding(table, eager_t5_buckets()).permute({2, 0, 1}); }

// ---------------------------------------------------------------------------
// Inputs, built once.

struct Inputs {
  at::Tensor q, table, probs, slopes, t5_table;
  at::Tensor bias_out;  // a reused [32, 4096, 4096] buffer, already touched
};

Inputs& inputs() {
  static Inputs in = [] {
    at::manual_seed(0);
    Inputs r;
    r.q = at::randn({kB, kH, kT, kDh}, at::kFloat);
    r.table = at::randn({2 * kK + 1, kDh}, at::kFloat);
    r.probs = at::softmax(at::randn({kB, kH, kT, kT}, at::kFloat), -1);
    r.slopes = posenc::nn::ops::alibi_slopes(kBiasHeads);
    r.t5_table = at::randn({32, kBiasHeads}, at::kFloat);
    r.bias_out = at::zeros({kBiasHeads, kBiasLen, kBiasLen}, at::kFloat);
    return r;
  }();
  return in;
}

const posenc::kernels::RelativeParams kParams{kK, 0};

// ---------------------------------------------------------------------------
// Correctness first: long double references on a sample of rows, and the
// eager results against ours.

double sample_logits_error(const at::Tensor& out) {
  const Inputs& in = inputs();
  const float* q = in.q.data_ptr<float>();
  const float* table = in.table.data_ptr<float>();
  const float* o = out.data_ptr<float>();
  double worst = 0.0;
  for (int64_t h : {int64_t{0}, kH - 1}) {
    for (int64_t i : {int64_t{0}, int64_t{1}, kT / 2 + 3, kT - 1}) {
      for (int64_t j = 0; j < kT; ++j) {
        const int64_t r = std::clamp<int64_t>(j - i, -kK, kK) + kK;
        long double ref = 0.0L;
        for (int64_t d = 0; d < kDh; ++d) ref += (long double)q[(h * kT + i) * kDh + d] * table[r * kDh + d];
        worst = std::max(worst, (double)(std::abs(o[(h * kT + i) * kT + j] - ref) / std::max(1.0L, std::abs(ref))));
      }
    }
  }
  return worst;
}

double sample_values_error(const at::Tensor& out) {
  const Inputs& in = inputs();
  const float* p = in.probs.data_ptr<float>();
  const float* table = in.table.data_ptr<float>();
  const float* o = out.data_ptr<float>();
  double worst = 0.0;
  for (int64_t h : {int64_t{0}, kH - 1}) {
    for (int64_t i : {int64_t{0}, kT / 2 + 3, kT - 1}) {
      for (int64_t d = 0; d < kDh; ++d) {
        long double ref = 0.0L;
        for (int64_t j = 0; j < kT; ++j) {
          const int64_t r = std::clamp<int64_t>(j - i, -kK, kK) + kK;
          ref += (long double)p[(h * kT + i) * kT + j] * table[r * kDh + d];
        }
        worst = std::max(worst, (double)(std::abs(o[(h * kT + i) * kDh + d] - ref) / std::max(1.0L, std::abs(ref))));
      }
    }
  }
  return worst;
}

bool check_results() {
  using namespace posenc::nn;
  const Inputs& in = inputs();
  const at::Tensor logits = ops::relative_logits(in.q, in.table, kParams);
  const at::Tensor values = ops::relative_values(in.probs, in.table, kParams);
  const double err_logits = sample_logits_error(logits);
  const double err_values = sample_values_error(values);
  const double eager_logits = (eager_relative_logits(in.q, in.table) - logits).abs().max().item<double>();
  const double eager_values = (eager_relative_values(in.probs, in.table) - values).abs().max().item<double>();

  // ALiBi: -m|i-j| formed in double and rounded once; the eager float32
  // product of the same rounded slope agrees within an ulp of 2^-23 relative.
  const at::Tensor alibi = ops::alibi_bias(kBiasHeads, kBiasLen, kBiasLen);
  const at::Tensor alibi_eager = eager_alibi(in.slopes);
  const double err_alibi =
      ((alibi - alibi_eager).abs() / alibi_eager.abs().clamp_min(1.0)).max().item<double>();
  // T5: both copy table entries, so they must agree exactly.
  const at::Tensor t5 = ops::t5_bias(in.t5_table, kBiasLen, kBiasLen);
  const bool t5_equal = at::equal(t5, eager_t5(in.t5_table).contiguous());

  // Tolerances: a float32 dot product of 64 (logits) or 2048 (values)
  // products of O(1) terms, accumulated in float32: a few 1e-6 relative.
  constexpr double kTolLogits = 1e-5, kTolValues = 1e-5, kTolAlibi = 2.4e-7;
  std::printf("max relative error vs long double: relative_logits %.2e (tol %.0e), relative_values %.2e (tol %.0e)\n",
              err_logits, kTolLogits, err_values, kTolValues);
  std::printf("max |ours - eager|: relative_logits %.2e, relative_values %.2e; alibi relative %.2e (tol %.1e); "
              "t5 %s\n",
              eager_logits, eager_values, err_alibi, kTolAlibi, t5_equal ? "identical" : "DIFFERENT");
  return err_logits <= kTolLogits && err_values <= kTolValues && eager_logits <= 1e-3 && eager_values <= 1e-3 &&
         err_alibi <= kTolAlibi && t5_equal;
}

// ---------------------------------------------------------------------------
// The timed calls.

void posenc_logits() { benchmark::DoNotOptimize(posenc::nn::ops::relative_logits(inputs().q, inputs().table, kParams).data_ptr()); }
void torch_logits() { benchmark::DoNotOptimize(eager_relative_logits(inputs().q, inputs().table).data_ptr()); }
void posenc_values() { benchmark::DoNotOptimize(posenc::nn::ops::relative_values(inputs().probs, inputs().table, kParams).data_ptr()); }
void torch_values() { benchmark::DoNotOptimize(eager_relative_values(inputs().probs, inputs().table).data_ptr()); }
void posenc_alibi() { benchmark::DoNotOptimize(posenc::nn::ops::alibi_bias(kBiasHeads, kBiasLen, kBiasLen).data_ptr()); }
void torch_alibi() { benchmark::DoNotOptimize(eager_alibi(inputs().slopes).data_ptr()); }
void posenc_t5() { benchmark::DoNotOptimize(posenc::nn::ops::t5_bias(inputs().t5_table, kBiasLen, kBiasLen).data_ptr()); }
void torch_t5() { benchmark::DoNotOptimize(eager_t5(inputs().t5_table).data_ptr()); }

// Into a reused, already-touched buffer: the construction without the
// operating system's first touch of 2 GiB of fresh pages.
void posenc_alibi_out() { posenc::nn::ops::alibi_bias_out(inputs().bias_out, kBiasHeads, kBiasLen, kBiasLen); }
void torch_alibi_out() {
  const at::Tensor rel = at::arange(kBiasLen, at::kLong).unsqueeze(0) - at::arange(kBiasLen, at::kLong).unsqueeze(1);
  at::mul_out(inputs().bias_out, rel.abs().neg(), inputs().slopes.view({kBiasHeads, 1, 1}));
}
// T5 has no out= op (it is differentiable); the kernel the op calls, into the buffer.
void posenc_t5_out() {
  posenc::kernels::t5_bias<float>({}, {kBiasHeads, kBiasLen, kBiasLen, 0}, inputs().t5_table.data_ptr<float>(),
                                  inputs().bias_out.data_ptr<float>());
}
// HF's lookup written into the buffer ((q*k, H) rows, viewed as [H, q, k] as HF does).
void torch_t5_out() {
  at::Tensor rows = inputs().bias_out.view({kBiasLen * kBiasLen, kBiasHeads});
  at::index_select_out(rows, inputs().t5_table, 0, eager_t5_buckets().view({-1}));
}

void run(benchmark::State& state, void (*f)()) {
  for (auto _ : state) f();
}

#define POSENC_BENCH(name)                                                                  \
  BENCHMARK_CAPTURE(run, name, name)->UseRealTime()->Unit(benchmark::kMillisecond)->Iterations(1) \
      ->Repetitions(kRepetitions)

POSENC_BENCH(posenc_logits);
POSENC_BENCH(torch_logits);
POSENC_BENCH(posenc_values);
POSENC_BENCH(torch_values);
POSENC_BENCH(posenc_alibi);
POSENC_BENCH(torch_alibi);
POSENC_BENCH(posenc_alibi_out);
POSENC_BENCH(torch_alibi_out);
POSENC_BENCH(posenc_t5);
POSENC_BENCH(torch_t5);
POSENC_BENCH(posenc_t5_out);
POSENC_BENCH(torch_t5_out);

}  // namespace

int main(int argc, char** argv) try {
  if (const int refused = posenc::bench::start_benchmark(argv)) return refused;
  if (!check_results()) {
    std::printf("FAIL: a posenc result is outside its tolerance\n");
    return 1;
  }
  std::fflush(stdout);
  const auto times = posenc::bench::run_benchmarks(argc, argv);
  auto t = [&](const char* name) { return posenc::bench::seconds_of(times, std::string("run/") + name); };
  // Every ratio below needs both of its sides: a --benchmark_filter that left one out stops here, before the
  // paired rounds (minutes of 2 GiB biases) run for nothing.
  for (const char* name : {"posenc_logits", "torch_logits", "posenc_values", "torch_values", "posenc_alibi",
                           "torch_alibi", "posenc_alibi_out", "torch_alibi_out", "posenc_t5", "torch_t5",
                           "posenc_t5_out", "torch_t5_out"}) {
    t(name);
  }

  // Targets are judged on medians of back-to-back pairs (bench_report.h).
  using posenc::bench::paired_ratio;
  constexpr int kRounds = 5;
  const double logits_ratio = paired_ratio(torch_logits, posenc_logits, kRounds);
  const double values_ratio = paired_ratio(torch_values, posenc_values, kRounds);
  const double alibi_ratio = paired_ratio(torch_alibi, posenc_alibi, kRounds);
  const double alibi_out_ratio = paired_ratio(torch_alibi_out, posenc_alibi_out, kRounds);
  const double t5_ratio = paired_ratio(torch_t5, posenc_t5, kRounds);
  const double t5_out_ratio = paired_ratio(torch_t5_out, posenc_t5_out, kRounds);

  const double logits_bytes = 4.0 * kB * kH * kT * kT, values_bytes = 4.0 * kB * kH * kT * kDh;
  const int64_t mem_logits = posenc::bench::peak_extra_bytes(posenc_logits), mem_logits_eager = posenc::bench::peak_extra_bytes(torch_logits);
  const int64_t mem_values = posenc::bench::peak_extra_bytes(posenc_values), mem_values_eager = posenc::bench::peak_extra_bytes(torch_values);
  const double gflop = 2.0 * kB * kH * kT * kT * kDh / 1e9;

  std::printf("\nrelative_logits (%lld, %lld, %lld, %lld), k = %lld, same run; fastest | paired median:\n",
              (long long)kB, (long long)kH, (long long)kT, (long long)kDh, (long long)kK);
  std::printf("  ours %.1f ms (%.1f GFLOP/s), eager gather+einsum %.1f ms: %.1fx | %.1fx (target >= %.0fx)\n",
              1e3 * t("posenc_logits"), gflop / t("posenc_logits"), 1e3 * t("torch_logits"),
              t("torch_logits") / t("posenc_logits"), logits_ratio, kSpeedTarget);
  std::printf("  peak memory above baseline: ours %.0f MiB = %.2fx the output (target <= %.0fx), eager %.0f MiB\n",
              mem_logits / 1048576.0, mem_logits / logits_bytes, kMemoryTarget, mem_logits_eager / 1048576.0);
  std::printf("relative_values, same shapes:\n");
  std::printf("  ours %.1f ms (%.1f GFLOP/s), eager gather+einsum %.1f ms: %.1fx | %.1fx (target >= %.0fx)\n",
              1e3 * t("posenc_values"), gflop / t("posenc_values"), 1e3 * t("torch_values"),
              t("torch_values") / t("posenc_values"), values_ratio, kSpeedTarget);
  std::printf("  peak memory above baseline: ours %.1f MiB = %.2fx the output of %.0f MiB (target <= %.0fx), eager %.0f MiB\n",
              mem_values / 1048576.0, mem_values / values_bytes, values_bytes / 1048576.0, kMemoryTarget,
              mem_values_eager / 1048576.0);
  std::printf("biases %lld x %lld x %lld float32 (2 GiB):\n", (long long)kBiasHeads, (long long)kBiasLen,
              (long long)kBiasLen);
  const double gib2 = 2.0 * 1073741824.0;
  std::printf("  construction into a reused buffer (the target):\n");
  std::printf("    ALiBi: ours %.0f ms (%.1f GB/s), eager |i-j| * slopes by mul_out %.0f ms: %.1fx | %.1fx "
              "(target >= %.0fx)\n",
              1e3 * t("posenc_alibi_out"), gib2 / t("posenc_alibi_out") / 1e9, 1e3 * t("torch_alibi_out"),
              t("torch_alibi_out") / t("posenc_alibi_out"), alibi_out_ratio, kSpeedTarget);
  std::printf("    T5: ours %.0f ms (%.1f GB/s), eager HF buckets + index_select_out %.0f ms: %.1fx | %.1fx "
              "(target >= %.0fx)\n",
              1e3 * t("posenc_t5_out"), gib2 / t("posenc_t5_out") / 1e9, 1e3 * t("torch_t5_out"),
              t("torch_t5_out") / t("posenc_t5_out"), t5_out_ratio, kSpeedTarget);
  std::printf("  as a new tensor (both sides first-touch 2 GiB of fresh pages, which the OS zero-fills):\n");
  std::printf("    ALiBi: ours %.0f ms, eager %.0f ms: %.1fx | %.1fx\n", 1e3 * t("posenc_alibi"),
              1e3 * t("torch_alibi"), t("torch_alibi") / t("posenc_alibi"), alibi_ratio);
  std::printf("    T5: ours %.0f ms, eager HF compute_bias %.0f ms: %.1fx | %.1fx\n", 1e3 * t("posenc_t5"),
              1e3 * t("torch_t5"), t("torch_t5") / t("posenc_t5"), t5_ratio);

  bool ok = true;
  auto check = [&](bool pass, const char* what) {
    if (!pass) {
      std::printf("BELOW TARGET: %s\n", what);
      ok = false;
    }
  };
  check(logits_ratio >= kSpeedTarget, "relative_logits vs eager");
  check(values_ratio >= kSpeedTarget, "relative_values vs eager");
  check(mem_logits < 0 || mem_logits <= kMemoryTarget * logits_bytes, "relative_logits peak memory");
  check(mem_values < 0 || mem_values <= kMemoryTarget * values_bytes, "relative_values peak memory");
  check(alibi_out_ratio >= kSpeedTarget, "ALiBi construction vs eager");
  check(t5_out_ratio >= kSpeedTarget, "T5 construction vs eager");
  if (!ok) return 3;
  std::printf("PASS\n");
  return 0;
} catch (const std::exception& e) {
  return posenc::bench::report_error(e);
}
