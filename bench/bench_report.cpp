#include "bench_report.h"

#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <omp.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <malloc.h>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "allocation_policy.h"
#include "posenc/nn/runtime_info.h"

namespace posenc::bench {
namespace {

int64_t status_kib(const std::string& key) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(key + ":", 0) == 0) return std::stoll(line.substr(key.size() + 1));
  }
  return -1;
}

class CapturingReporter : public benchmark::ConsoleReporter {
 public:
  std::map<std::string, double> times;

  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (run.run_type == Run::RT_Iteration && run.iterations > 0) {
        const double seconds = run.real_accumulated_time / static_cast<double>(run.iterations);
        // Over repetitions keep the fastest: on a shared machine the noise
        // only ever adds time, to either side of a ratio.
        auto [it, fresh] = times.emplace(run.benchmark_name(), seconds);
        if (!fresh && seconds < it->second) it->second = seconds;
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }
};

}  // namespace

std::map<std::string, double> run_benchmarks(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  CapturingReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return reporter.times;
}

double seconds_of(const std::map<std::string, double>& times, const std::string& prefix) {
  for (const auto& [name, seconds] : times) {
    if (name.rfind(prefix, 0) == 0) return seconds;
  }
  throw std::runtime_error("benchmark " + prefix + " did not run: its ratio needs both sides measured in the same "
                           "run; widen --benchmark_filter or leave it out");
}

bool ran(const std::map<std::string, double>& times, const std::string& prefix) {
  for (const auto& entry : times) {
    if (entry.first.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

int report_error(const std::exception& error) {
  std::fprintf(stderr, "error: %s\n", error.what());
  return 2;
}

double seconds_of_call(const std::function<void()>& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double paired_ratio_of(const std::function<double()>& base_seconds, const std::function<double()>& test_seconds,
                       int rounds) {
  base_seconds();
  test_seconds();
  std::vector<double> ratios;
  for (int r = 0; r < rounds; ++r) {
    double t_base, t_test;
    if (r % 2 == 0) {
      t_base = base_seconds();
      t_test = test_seconds();
    } else {
      t_test = test_seconds();
      t_base = base_seconds();
    }
    ratios.push_back(t_base / t_test);
  }
  std::nth_element(ratios.begin(), ratios.begin() + rounds / 2, ratios.end());
  return ratios[rounds / 2];
}

double paired_ratio(const std::function<void()>& base, const std::function<void()>& test, int rounds) {
  return paired_ratio_of([&] { return seconds_of_call(base); }, [&] { return seconds_of_call(test); }, rounds);
}

int64_t peak_extra_bytes(const std::function<void()>& f) {
  // Free heap pages go back to the OS first, so memory f reuses from earlier
  // calls is faulted in again and counted.
  malloc_trim(0);
  {
    std::ofstream reset("/proc/self/clear_refs");
    reset << "5";
    if (!reset.good()) return -1;
  }
  const int64_t before = status_kib("VmRSS");
  f();
  // The high-water mark can miss pages first touched by worker threads (the
  // kernel syncs their counters lazily); what f left resident is a floor.
  const int64_t peak = std::max(status_kib("VmHWM"), status_kib("VmRSS"));
  return before < 0 || peak < 0 ? -1 : (peak - before) * 1024;
}

namespace {
double measured_gemm_gflops = 0;
constexpr const char* kAvx512Core = "SkylakeX";
}  // namespace

double baseline_gemm_gflops() { return measured_gemm_gflops; }

int start_benchmark(char** argv) {
  at::set_num_threads(omp_get_max_threads());
  std::printf("threads: posenc %d, libtorch %d\n", omp_get_max_threads(), at::get_num_threads());
  return check_baseline_blas(argv);
}

int check_baseline_blas(char** argv) {
  const nn::BlasInfo blas = nn::blas_info();
  const char* pinned = std::getenv("OPENBLAS_CORETYPE");
  if (blas.avx512_unused && (pinned == nullptr || std::string_view(pinned) != kAvx512Core)) {
    // posenc's kernels use AVX-512 here, so the fair eager baseline does too; OpenBLAS reads its kernel
    // choice from the environment only when it loads, hence a fresh start of the same command.
    std::printf("baseline BLAS: OpenBLAS took its %s kernels (no AVX-512) on this AVX-512 CPU%s; starting again "
                "with OPENBLAS_CORETYPE=%s\n",
                blas.core.c_str(), pinned != nullptr ? (std::string(", as OPENBLAS_CORETYPE=") + pinned + " asked").c_str() : "",
                kAvx512Core);
    std::fflush(stdout);
    ::setenv("OPENBLAS_CORETYPE", kAvx512Core, 1);
    ::execv("/proc/self/exe", argv);
    std::printf("could not start again (%s): the ratios below are against OpenBLAS's %s kernels\n",
                std::strerror(errno), blas.core.c_str());
  }
  measured_gemm_gflops = nn::gemm_gflops(0.5);
  std::printf("baseline BLAS: %s%s (%s), float32 GEMM %.1f GFLOP/s (OpenBLAS threads: %d, 0 = not OpenBLAS)\n",
              blas.kind.c_str(), blas.core.empty() ? "" : (", " + blas.core + " kernels").c_str(),
              blas.library.empty() ? "not found" : blas.library.c_str(), measured_gemm_gflops, nn::blas_threads());
  if (!blas.reference) return 0;
  std::printf("NO RATIO: libtorch runs on netlib's reference BLAS; install OpenBLAS (bash scripts/setup.sh) so that "
              "the eager baseline is the one a user would run\n");
  return 3;
}

void keep_freed_memory_for_both_sides() {
  if (cli::keep_freed_memory_for_reuse()) {
    std::printf("malloc: freed memory kept for reuse by both sides, as posenc train does (mmap_max 0, no trim, "
                "one arena); a glibc.malloc.* key in GLIBC_TUNABLES keeps yours instead\n");
  } else {
    std::printf("malloc: as set in GLIBC_TUNABLES (or not glibc), for both sides\n");
  }
}

}  // namespace posenc::bench
