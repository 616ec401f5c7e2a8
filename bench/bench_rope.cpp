// RoPE (issue 3, §3): rotation in place and the cos/sin cache build.
//
// Napkin math: x is (1, 32, 4096, 128) float32 = 64 MiB; rotating it in place
// is 1 read + 1 write per element (128 MiB of traffic); cos/sin for 4096
// positions x 64 frequencies (2 MiB) are computed once and stay in cache
// across the 32 heads. The roofline is the same in-place read-modify-write
// traffic with no math (x *= a). The Hugging Face-style libtorch baseline
// (cat(freqs, freqs), cos, sin, rotate_half by cat, two multiplies, an add)
// makes ~6 passes and allocates 4 temporaries of x's size.
// Targets: in-place float32 >= 5x faster than the baseline and >= 60% of the
// roofline; bfloat16 >= 1.5x faster than float32; the exact 128k x 64 cache
// build at least as fast as libtorch's float32 outer + cos + sin.
// Exit code: 1 if a result is wrong, 3 if a target is missed, 0 otherwise.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <type_traits>
#include <vector>

#include "bench_report.h"
#include "posenc/nn/ops.h"
#include "posenc/kernels/half_types.h"
#include "posenc/kernels/rope.h"
#include "posenc/kernels/rope_scaling.h"

namespace {

using namespace posenc::kernels;

constexpr int64_t kHeads = 32;
constexpr int64_t kSeq = 4096;
constexpr int64_t kDim = 128;
constexpr int64_t kHalf = kDim / 2;
constexpr int64_t kElems = kHeads * kSeq * kDim;
constexpr int64_t kCachePositions = 131072;
constexpr int64_t kCacheFreqs = 64;
constexpr double kBase = 10000.0;

// Each benchmark is repeated and its fastest repetition kept (bench_report.h).
constexpr int kRepetitions = 5;

constexpr double kSpeedupTarget = 5.0;
constexpr double kRooflineTarget = 0.60;
constexpr double kBf16Target = 1.5;
constexpr double kCacheTarget = 1.0;

const RopeApplyParams kApply{kDim, kDim, RopeLayout::kHalf, false};

std::vector<double> frequencies(int64_t dim) { return rope_frequencies(dim, kBase, RopeScaling{}).inv_freq; }

template <class T>
RopeView<T> view_of(T* data) {
  return RopeView<T>{data, 1, kHeads, kSeq, kElems, kSeq * kDim, kDim};
}

// apply_rope as the op does it: cos/sin for the positions, then one rotation pass.
template <class T>
void posenc_rope(T* x, const std::vector<int64_t>& positions, const std::vector<double>& omega,
                 std::vector<float>& cos, std::vector<float>& sin) {
  RopeTableSpec spec;
  spec.omega = omega;
  rope_cos_sin<float>(spec, positions.data(), nullptr, kSeq, cos.data(), sin.data());
  rope_apply<T, float>(kApply, view_of<const T>(x), view_of<T>(x), cos.data(), sin.data(), 1);
}

// What a user writes with libtorch, after Hugging Face's Llama.
at::Tensor rotate_half(const at::Tensor& x) {
  const at::Tensor x1 = x.slice(-1, 0, kHalf);
  const at::Tensor x2 = x.slice(-1, kHalf);
  return at::cat({-x2, x1}, -1);
}
at::Tensor torch_hf_rope(const at::Tensor& x, const at::Tensor& positions) {
  const at::Tensor inv_freq = 1.0 / at::pow(kBase, at::arange(0, kDim, 2, at::kLong).to(at::kFloat) / kDim);
  const at::Tensor freqs = at::outer(positions.to(at::kFloat), inv_freq);
  const at::Tensor emb = at::cat({freqs, freqs}, -1);
  const at::Tensor cos = emb.cos().unsqueeze(0);
  const at::Tensor sin = emb.sin().unsqueeze(0);
  return x * cos + rotate_half(x) * sin;
}

std::vector<float> random_x() {
  at::manual_seed(0);
  const at::Tensor t = at::randn({kElems}, at::kFloat);
  return std::vector<float>(t.data_ptr<float>(), t.data_ptr<float>() + kElems);
}

std::vector<int64_t> arange_positions() {
  std::vector<int64_t> p(kSeq);
  for (int64_t t = 0; t < kSeq; ++t) p[t] = t;
  return p;
}

template <class T>
std::vector<T> random_x_as() {
  const std::vector<float> xf = random_x();
  std::vector<T> x(kElems);
  for (int64_t k = 0; k < kElems; ++k) {
    if constexpr (std::is_same_v<T, bfloat16>) {
      x[k] = to_bfloat16(xf[k]);
    } else {
      x[k] = xf[k];
    }
  }
  return x;
}

template <class T>
void BM_posenc_inplace(benchmark::State& state) {
  std::vector<T> x = random_x_as<T>();
  const std::vector<int64_t> positions = arange_positions();
  const std::vector<double> omega = frequencies(kDim);
  std::vector<float> cos(kSeq * kHalf), sin(kSeq * kHalf);
  for (auto _ : state) {
    posenc_rope(x.data(), positions, omega, cos, sin);
    benchmark::DoNotOptimize(x.data());
  }
  state.SetBytesProcessed(state.iterations() * kElems * static_cast<int64_t>(sizeof(T)) * 2);
}

void BM_torch_hf_eager(benchmark::State& state) {
  at::manual_seed(0);
  const at::Tensor x = at::randn({1, kHeads, kSeq, kDim}, at::kFloat);
  const at::Tensor positions = at::arange(kSeq, at::kLong);
  for (auto _ : state) {
    at::Tensor y = torch_hf_rope(x, positions);
    benchmark::DoNotOptimize(y.data_ptr());
  }
  state.SetBytesProcessed(state.iterations() * kElems * 4 * 2);
}

// The same through the torch op (posenc::nn::ops::rope_, torch.ops.posenc):
// what a C++ or Python user calls, with argument checks and table allocation.
void BM_op_inplace(benchmark::State& state, at::ScalarType dtype) {
  at::manual_seed(0);
  at::Tensor x = at::randn({1, kHeads, kSeq, kDim}, at::kFloat).to(dtype);
  const at::Tensor positions = at::arange(kSeq, at::kLong);
  for (auto _ : state) {
    posenc::nn::ops::rope_(x, positions);
    benchmark::DoNotOptimize(x.data_ptr());
  }
  state.SetBytesProcessed(state.iterations() * kElems * static_cast<int64_t>(x.element_size()) * 2);
}

// The roofline's work: the same read-modify-write traffic as the rotation, no math.
void scale_in_place(float* data) {
#pragma omp parallel for simd schedule(static)
  for (int64_t k = 0; k < kElems; ++k) data[k] *= 1.0000001f;
}

// Roofline: the same in-place read-modify-write traffic with no math.
void BM_inplace_scale_roofline(benchmark::State& state) {
  std::vector<float> x = random_x();
  for (auto _ : state) {
    scale_in_place(x.data());
    benchmark::DoNotOptimize(x.data());
  }
  state.SetBytesProcessed(state.iterations() * kElems * 4 * 2);
}

void BM_posenc_cache_exact(benchmark::State& state) {
  const std::vector<double> omega = frequencies(2 * kCacheFreqs);
  RopeTableSpec spec;
  spec.omega = omega;
  std::vector<float> cos(kCachePositions * kCacheFreqs), sin(kCachePositions * kCacheFreqs);
  for (auto _ : state) {
    rope_cos_sin_range<float>(spec, 0, kCachePositions, cos.data(), sin.data());
    benchmark::DoNotOptimize(cos.data());
    benchmark::DoNotOptimize(sin.data());
  }
  state.SetBytesProcessed(state.iterations() * kCachePositions * kCacheFreqs * 4 * 2);
}

void BM_torch_cache_fp32(benchmark::State& state) {
  const at::Tensor inv_freq =
      1.0 / at::pow(kBase, at::arange(0, 2 * kCacheFreqs, 2, at::kLong).to(at::kFloat) / (2 * kCacheFreqs));
  for (auto _ : state) {
    const at::Tensor freqs = at::outer(at::arange(kCachePositions, at::kFloat), inv_freq);
    at::Tensor cos = freqs.cos();
    at::Tensor sin = freqs.sin();
    benchmark::DoNotOptimize(cos.data_ptr());
    benchmark::DoNotOptimize(sin.data_ptr());
  }
  state.SetBytesProcessed(state.iterations() * kCachePositions * kCacheFreqs * 4 * 2);
}

BENCHMARK_TEMPLATE(BM_posenc_inplace, float)->UseRealTime()->Unit(benchmark::kMillisecond)->Repetitions(kRepetitions);
BENCHMARK_TEMPLATE(BM_posenc_inplace, bfloat16)->UseRealTime()->Unit(benchmark::kMillisecond)->Repetitions(kRepetitions);
BENCHMARK_CAPTURE(BM_op_inplace, f32, at::kFloat)->UseRealTime()->Unit(benchmark::kMillisecond)->Repetitions(kRepetitions);
BENCHMARK_CAPTURE(BM_op_inplace, bf16, at::kBFloat16)->UseRealTime()->Unit(benchmark::kMillisecond)->Repetitions(kRepetitions);
BENCHMARK(BM_torch_hf_eager)->UseRealTime()->Unit(benchmark::kMillisecond)->Repetitions(kRepetitions);
BENCHMARK(BM_inplace_scale_roofline)->UseRealTime()->Unit(benchmark::kMillisecond)->Repetitions(kRepetitions);
BENCHMARK(BM_posenc_cache_exact)->UseRealTime()->Unit(benchmark::kMillisecond)->Repetitions(kRepetitions);
BENCHMARK(BM_torch_cache_fp32)->UseRealTime()->Unit(benchmark::kMillisecond)->Repetitions(kRepetitions);

// ---------------------------------------------------------------------------
// Correctness, before any timing: long double references on a sample of rows.

long double exact_angle(int64_t p, const std::vector<double>& omega, int64_t j) {
  return static_cast<long double>(p) * static_cast<long double>(omega[j]);
}

// Worst error of rotated x (heads h, every position) against the reference,
// relative to max(1, |reference|).
template <class Get>
double rotation_error(const std::vector<float>& x0, Get rotated, const std::vector<double>& omega) {
  double worst = 0.0;
  for (int64_t h : {int64_t{0}, kHeads / 2, kHeads - 1}) {
    for (int64_t t = 0; t < kSeq; ++t) {
      const int64_t row = (h * kSeq + t) * kDim;
      for (int64_t j = 0; j < kHalf; ++j) {
        const long double a = x0[row + j], b = x0[row + j + kHalf];
        const long double c = std::cos(exact_angle(t, omega, j)), s = std::sin(exact_angle(t, omega, j));
        const long double ya = a * c - b * s, yb = b * c + a * s;
        worst = std::max(worst, static_cast<double>(std::abs(rotated(row + j) - ya) / std::max(1.0L, std::abs(ya))));
        worst = std::max(worst, static_cast<double>(std::abs(rotated(row + j + kHalf) - yb) /
                                                    std::max(1.0L, std::abs(yb))));
      }
    }
  }
  return worst;
}

bool check_results() {
  const std::vector<double> omega = frequencies(kDim);
  const std::vector<int64_t> positions = arange_positions();
  std::vector<float> cos(kSeq * kHalf), sin(kSeq * kHalf);

  const std::vector<float> x0 = random_x();
  std::vector<float> x = x0;
  posenc_rope(x.data(), positions, omega, cos, sin);
  const double err_f32 = rotation_error(x0, [&](int64_t k) { return static_cast<long double>(x[k]); }, omega);

  // bfloat16: the reference rotates the bfloat16-rounded input.
  std::vector<bfloat16> xb(kElems);
  std::vector<float> xb0(kElems);
  for (int64_t k = 0; k < kElems; ++k) {
    xb[k] = to_bfloat16(x0[k]);
    xb0[k] = to_float(xb[k]);
  }
  posenc_rope(xb.data(), positions, omega, cos, sin);
  const double err_bf16 =
      rotation_error(xb0, [&](int64_t k) { return static_cast<long double>(to_float(xb[k])); }, omega);

  const at::Tensor xt = at::from_blob(const_cast<float*>(x0.data()), {1, kHeads, kSeq, kDim}, at::kFloat);
  const at::Tensor yt = torch_hf_rope(xt, at::arange(kSeq, at::kLong)).contiguous();
  const float* y = yt.data_ptr<float>();
  const double err_torch = rotation_error(x0, [&](int64_t k) { return static_cast<long double>(y[k]); }, omega);

  // The torch op on the same input.
  at::Tensor xo = xt.clone();
  posenc::nn::ops::rope_(xo, at::arange(kSeq, at::kLong));
  const float* yo = xo.data_ptr<float>();
  const double err_op = rotation_error(x0, [&](int64_t k) { return static_cast<long double>(yo[k]); }, omega);

  // The cache at a sample of positions across the 128k range.
  const std::vector<double> cache_omega = frequencies(2 * kCacheFreqs);
  RopeTableSpec spec;
  spec.omega = cache_omega;
  std::vector<float> ccos(kCachePositions * kCacheFreqs), csin(kCachePositions * kCacheFreqs);
  rope_cos_sin_range<float>(spec, 0, kCachePositions, ccos.data(), csin.data());
  double err_cache = 0.0;
  for (int64_t p = 0; p < kCachePositions; p += 127) {
    for (int64_t j = 0; j < kCacheFreqs; ++j) {
      const long double angle = exact_angle(p, cache_omega, j);
      err_cache = std::max(err_cache, static_cast<double>(std::abs(ccos[p * kCacheFreqs + j] - std::cos(angle))));
      err_cache = std::max(err_cache, static_cast<double>(std::abs(csin[p * kCacheFreqs + j] - std::sin(angle))));
    }
  }

  // Tolerances, relative to max(1, |y|): float32 rotation of exact cos/sin is
  // a few float32 ulps (8 * 2^-24 = 5e-7); bfloat16 output is rounded once
  // (half an ulp, 2^-8 = 3.9e-3, plus the float32 math); the cache holds
  // rounded cos/sin (half a float32 ulp of 1 plus the recurrence, < 2e-7).
  constexpr double kTolF32 = 5e-7, kTolBf16 = 4e-3, kTolCache = 2e-7;
  std::printf("max relative error vs long double: posenc f32 %.2e, op f32 %.2e (tol %.0e), posenc bf16 %.2e "
              "(tol %.0e), torch HF eager %.2e; posenc cache max |error| %.2e (tol %.0e)\n",
              err_f32, err_op, kTolF32, err_bf16, kTolBf16, err_torch, err_cache, kTolCache);
  return err_f32 <= kTolF32 && err_op <= kTolF32 && err_bf16 <= kTolBf16 && err_cache <= kTolCache;
}

// ---------------------------------------------------------------------------
// Paired timings: each ratio is the median of back-to-back pairs.

struct Paired {
  double op_vs_torch, kernel_of_roofline, op_of_roofline, kernel_bf16_gain, op_bf16_gain, cache_gain;
};

Paired measure_paired() {
  using posenc::bench::paired_ratio;
  constexpr int kFastRounds = 21;  // ~2 ms each
  constexpr int kSlowRounds = 7;   // the libtorch sides, ~100 ms each
  const std::vector<int64_t> positions = arange_positions();
  const std::vector<double> omega = frequencies(kDim);
  std::vector<float> cos(kSeq * kHalf), sin(kSeq * kHalf);
  std::vector<float> x = random_x_as<float>();
  std::vector<bfloat16> xb = random_x_as<bfloat16>();
  at::manual_seed(0);
  at::Tensor xt = at::randn({1, kHeads, kSeq, kDim}, at::kFloat);
  at::Tensor xtb = xt.to(at::kBFloat16);
  const at::Tensor pt = at::arange(kSeq, at::kLong);

  auto kernel_f32 = [&] { posenc_rope(x.data(), positions, omega, cos, sin); };
  auto kernel_bf16 = [&] { posenc_rope(xb.data(), positions, omega, cos, sin); };
  auto op_f32 = [&] { posenc::nn::ops::rope_(xt, pt); };
  auto op_bf16 = [&] { posenc::nn::ops::rope_(xtb, pt); };
  auto roofline = [&] { scale_in_place(x.data()); };
  auto roofline_op = [&] { scale_in_place(xt.data_ptr<float>()); };
  auto torch_eager = [&] { benchmark::DoNotOptimize(torch_hf_rope(xt, pt).data_ptr()); };

  const std::vector<double> cache_omega = frequencies(2 * kCacheFreqs);
  RopeTableSpec spec;
  spec.omega = cache_omega;
  std::vector<float> ccos(kCachePositions * kCacheFreqs), csin(kCachePositions * kCacheFreqs);
  const at::Tensor inv_freq =
      1.0 / at::pow(kBase, at::arange(0, 2 * kCacheFreqs, 2, at::kLong).to(at::kFloat) / (2 * kCacheFreqs));
  auto cache = [&] { rope_cos_sin_range<float>(spec, 0, kCachePositions, ccos.data(), csin.data()); };
  auto torch_cache = [&] {
    const at::Tensor freqs = at::outer(at::arange(kCachePositions, at::kFloat), inv_freq);
    benchmark::DoNotOptimize(freqs.cos().data_ptr());
    benchmark::DoNotOptimize(freqs.sin().data_ptr());
  };

  Paired p{};
  p.op_vs_torch = paired_ratio(torch_eager, op_f32, kSlowRounds);
  p.kernel_of_roofline = paired_ratio(roofline, kernel_f32, kFastRounds);
  p.op_of_roofline = paired_ratio(roofline_op, op_f32, kFastRounds);
  p.kernel_bf16_gain = paired_ratio(kernel_f32, kernel_bf16, kFastRounds);
  p.op_bf16_gain = paired_ratio(op_f32, op_bf16, kFastRounds);
  p.cache_gain = paired_ratio(torch_cache, cache, kSlowRounds);
  return p;
}

}  // namespace

int main(int argc, char** argv) try {
  if (const int refused = posenc::bench::start_benchmark(argv)) return refused;
  if (!check_results()) {
    std::printf("FAIL: a posenc result is outside its tolerance\n");
    return 1;
  }

  std::fflush(stdout);
  const auto times = posenc::bench::run_benchmarks(argc, argv);
  using posenc::bench::seconds_of;
  const double f32 = seconds_of(times, "BM_posenc_inplace<float>");
  const double bf16 = seconds_of(times, "BM_posenc_inplace<bfloat16>");
  const double op = seconds_of(times, "BM_op_inplace/f32");
  const double op_bf16 = seconds_of(times, "BM_op_inplace/bf16");
  const double torch = seconds_of(times, "BM_torch_hf_eager");
  const double roof = seconds_of(times, "BM_inplace_scale_roofline");
  const double cache = seconds_of(times, "BM_posenc_cache_exact");
  const double torch_cache = seconds_of(times, "BM_torch_cache_fp32");

  // The same comparisons timed pairwise, back to back (bench_report.h): the
  // machine's memory bandwidth drifts between runs, so the targets are
  // judged on these medians.
  const Paired paired = measure_paired();

  const double bytes = static_cast<double>(kElems) * 4 * 2;
  std::printf("\nrope (1, %lld, %lld, %lld), same run; fastest repetitions | paired medians:\n",
              static_cast<long long>(kHeads), static_cast<long long>(kSeq), static_cast<long long>(kDim));
  std::printf("  float32 in place vs libtorch HF eager: kernel %.1fx, torch op %.1fx | op %.1fx (target >= %.0fx)\n",
              torch / f32, torch / op, paired.op_vs_torch, kSpeedupTarget);
  std::printf("  bandwidth: kernel %.1f GB/s, torch op %.1f GB/s, in-place scale roofline %.1f GB/s\n",
              bytes / f32 / 1e9, bytes / op / 1e9, bytes / roof / 1e9);
  std::printf("  fraction of the roofline: kernel %.0f%%, op %.0f%% | kernel %.0f%%, op %.0f%% (target >= %.0f%%)\n",
              100.0 * roof / f32, 100.0 * roof / op, 100.0 * paired.kernel_of_roofline, 100.0 * paired.op_of_roofline,
              100.0 * kRooflineTarget);
  std::printf("  bfloat16 in place vs float32: kernel %.2fx, op %.2fx | kernel %.2fx, op %.2fx (target >= %.1fx)\n",
              f32 / bf16, op / op_bf16, paired.kernel_bf16_gain, paired.op_bf16_gain, kBf16Target);
  std::printf("  cache %lld x %lld, exact vs libtorch float32 outer+cos+sin: %.2fx | %.2fx (target >= %.1fx)\n",
              static_cast<long long>(kCachePositions), static_cast<long long>(kCacheFreqs), torch_cache / cache,
              paired.cache_gain, kCacheTarget);
  bool ok = true;
  auto check = [&](bool pass, const char* what) {
    if (!pass) {
      std::printf("BELOW TARGET: %s\n", what);
      ok = false;
    }
  };
  check(paired.op_vs_torch >= kSpeedupTarget, "float32 speed-up vs libtorch");
  check(std::min(paired.kernel_of_roofline, paired.op_of_roofline) >= kRooflineTarget,
        "fraction of the in-place roofline");
  check(std::min(paired.kernel_bf16_gain, paired.op_bf16_gain) >= kBf16Target, "bfloat16 vs float32");
  check(paired.cache_gain >= kCacheTarget, "cache build vs libtorch");
  if (!ok) return 3;
  std::printf("PASS\n");
  return 0;
} catch (const std::exception& e) {
  return posenc::bench::report_error(e);
}
