#include "doctor_command.h"

#include <ATen/Parallel.h>
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "blas_kernels.h"
#include "posenc/kernels/build_info.h"
#include "posenc/nn/runtime_info.h"

#ifndef POSENC_VERSION
#define POSENC_VERSION "unknown"
#endif

namespace posenc::cli {

DoctorCommand::DoctorCommand(CLI::App& parent) {
  app_ = parent.add_subcommand("doctor", "Say what speed figures depend on here: build, threads, cores, BLAS, GEMM rate");
  app_->add_option("--seconds", seconds_, "How long to time libtorch's float32 GEMM")->capture_default_str();
}

void DoctorCommand::run() const {
  const kernels::KernelBuild build = kernels::kernel_build();
  const nn::BlasInfo blas = nn::blas_info();
  const double gflops = nn::gemm_gflops(seconds_);  // validates --seconds before anything is printed
  const int blas_threads = nn::blas_threads();       // the team OpenBLAS used for that rate
  const int64_t cores = kernels::available_cores();
  const int torch_threads = at::get_num_threads();
  char rate[64];
  std::snprintf(rate, sizeof rate, "%.1f GFLOP/s", gflops);
  std::cout << "posenc      " << POSENC_VERSION << ", kernels " << (build.native ? "native" : "portable")
            << " (-march=" << (build.native ? "native" : "x86-64") << "): " << build.vector_isa << '\n'
            << "torch       " << nn::torch_version() << ", " << torch_threads << " threads; posenc kernels "
            << omp_get_max_threads() << " OpenMP threads\n"
            << "cores       " << cores << " available to this process (CPU affinity)\n"
            << "BLAS        " << blas.summary()
            << (blas.library.empty() ? "" : ": " + blas.library) << '\n'
            << "GEMM        " << rate << " (float32, 1024 x 1024 x 1024, " << seconds_ << " s; libtorch "
            << torch_threads << " threads"
            << (blas_threads > 0 ? ", OpenBLAS " + std::to_string(blas_threads) + " threads" : "")
            << ")\n";
  if (torch_threads < cores) {
    // libtorch's default is the physical cores it counts (cpuinfo), which on some virtual machines is fewer
    // than the process may use; posenc's kernels run on the same OpenMP team, so both are slower than they need be.
    std::cout.flush();
    std::cerr << "posenc: note: libtorch runs " << torch_threads << " thread" << (torch_threads == 1 ? "" : "s")
              << " on the " << cores << " cores available to this process (its default: the physical cores it "
              << "detects), and posenc's kernels with it; torch.set_num_threads(" << cores << "), at::set_num_threads("
              << cores << ") or OMP_NUM_THREADS=" << cores << " uses them all (posenc train and experiment take "
              << "--threads, default " << cores << ").\n";
  }
  if (blas.reference) {
    std::cout.flush();
    std::cerr << "posenc: warning: libtorch runs on netlib's reference BLAS, 20-50x slower than OpenBLAS: no speed "
                 "figure measured here compares with anything; install it (apt-get install libopenblas0-openmp, "
                 "or bash scripts/setup.sh)\n";
  }
  const std::string chose = blas_kernels_chosen_before_switch();
  if (!chose.empty()) {
    std::cout.flush();
    std::cerr << "posenc: note: OpenBLAS chose its " << chose << " kernels (no AVX-512) on this AVX-512 CPU; posenc "
              << "switched to its " << blas.core << " kernels (OPENBLAS_CORETYPE=SkylakeX), as train, eval and "
                 "experiment do (set OPENBLAS_CORETYPE to keep another choice).\n";
  }
  if (blas.avx512_unused) {
    const char* pinned = std::getenv("OPENBLAS_CORETYPE");
    std::cout.flush();
    std::cerr << "posenc: note: OpenBLAS runs its " << blas.core << " kernels (no AVX-512) on this AVX-512 CPU"
              << (pinned != nullptr ? std::string(", as OPENBLAS_CORETYPE=") + pinned + " in the environment asks" : "")
              << "; OPENBLAS_CORETYPE=SkylakeX selects its AVX-512 kernels (compare: OPENBLAS_CORETYPE=SkylakeX "
                 "posenc doctor; results differ in the last bits). The benchmarks run their eager baselines on "
                 "them.\n";
  }
}

}  // namespace posenc::cli
