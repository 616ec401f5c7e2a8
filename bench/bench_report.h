// Runs the registered benchmarks and keeps each one's time per iteration, so
// that a benchmark binary can print ratios measured within the same run.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <string>

namespace posenc::bench {

// Seconds per iteration (real time), keyed by benchmark name; the fastest
// repetition when a benchmark is repeated.
std::map<std::string, double> run_benchmarks(int argc, char** argv);

// Time of the benchmark whose name starts with `prefix`; throws if absent
// (a --benchmark_filter left out one side of a ratio).
double seconds_of(const std::map<std::string, double>& times, const std::string& prefix);
// Whether a benchmark whose name starts with `prefix` ran.
bool ran(const std::map<std::string, double>& times, const std::string& prefix);

// main's catch: prints "error: <what>" on stderr and returns 2 (bad usage),
// so that a benchmark asked for something it cannot do never aborts.
int report_error(const std::exception& error);

// Median over `rounds` of seconds(base) / seconds(test), the two timed back
// to back in alternating order: on a shared machine whose bandwidth drifts
// between runs, a ratio of paired timings is far steadier than a ratio of
// two separately measured times. Each side runs once untimed first.
double paired_ratio(const std::function<void()>& base, const std::function<void()>& test, int rounds);
// The same for sides that report their own seconds (a peer process times its
// call itself, so the pipe is not in its time).
double paired_ratio_of(const std::function<double()>& base_seconds, const std::function<double()>& test_seconds,
                       int rounds);
// Seconds (steady clock) of one call of f.
double seconds_of_call(const std::function<void()>& f);

// Peak resident memory above the baseline while f runs, in bytes (VmHWM after
// resetting it through /proc/self/clear_refs, or VmRSS after f when larger:
// let f keep its result alive to count it); -1 when that reset is refused.
int64_t peak_extra_bytes(const std::function<void()>& f);

// Prints which BLAS libtorch resolved and its float32 GEMM rate, measured now.
// When OpenBLAS runs kernels without AVX-512 on a CPU that has it (its own
// choice, or OPENBLAS_CORETYPE in the environment), first starts the benchmark
// again (execv of /proc/self/exe with argv) with OPENBLAS_CORETYPE=SkylakeX:
// posenc's kernels use AVX-512 there, so the eager baseline must too.
// Returns 3 (the "below target" exit code) with the reason printed when it is
// netlib's reference BLAS: a ratio against a baseline 20-50x slower than what
// any user runs would mean nothing. Returns 0 otherwise.
int check_baseline_blas(char** argv);
// The float32 GEMM rate check_baseline_blas measured (GFLOP/s; 0 before it ran).
double baseline_gemm_gflops();

// What every benchmark's main does first: libtorch set to posenc's OpenMP
// thread count (the comparison is of code, not cores), both printed, then
// check_baseline_blas. Returns its exit code: 0 to go on.
int start_benchmark(char** argv);

// Has glibc keep freed memory in the process, as the posenc executable does
// for itself (apps/posenc/allocation_policy.h), for both sides of a benchmark
// whose eager side allocates large buffers per call: under glibc's defaults
// those come back as fresh pages every call, a cost a user avoids with one
// environment variable (or jemalloc). Prints which allocator runs.
void keep_freed_memory_for_both_sides();

}  // namespace posenc::bench
