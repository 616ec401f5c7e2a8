// What libtorch runs on in this process, for `posenc doctor` and the
// benchmarks: a speed figure means little until one knows which BLAS ran.
//
// Debian's libtorch calls whatever libblas.so.3 resolves to through the
// alternatives system: netlib's reference BLAS (about 2 GFLOP/s) when only
// libblas3 is installed, OpenBLAS (20-50x faster) when it is.
#pragma once

#include <string>

namespace posenc::nn {

struct BlasInfo {
  std::string library;  // the resolved file, e.g. /usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3
  std::string kind;     // "OpenBLAS (pthread)", "OpenBLAS (OpenMP)", "reference BLAS (netlib)", "unknown"
  bool reference = false;  // netlib's reference implementation: no speed ratio against it is meaningful
  // OpenBLAS's kernel set (openblas_get_corename(), e.g. "Haswell", "SkylakeX"); "" for another BLAS.
  std::string core;
  // OpenBLAS runs kernels without AVX-512 on a CPU that has it (OPENBLAS_CORETYPE=Haswell in the
  // environment, or an OpenBLAS that does not know the CPU): its float32 GEMM then runs at about half the
  // rate of its AVX-512 kernels, which OPENBLAS_CORETYPE=SkylakeX selects when set before the process starts.
  bool avx512_unused = false;

  // "OpenBLAS (OpenMP), SkylakeX kernels", or the kind alone: what results' last bits depend on.
  std::string summary() const { return core.empty() ? kind : kind + ", " + core + " kernels"; }
};

// The BLAS that provides sgemm_ to libtorch in this process.
BlasInfo blas_info();

// float32 GEMM rate of libtorch (at::mm of 1024 x 1024 matrices, 2 n^3 flops
// each) over about `seconds` of wall time, in GFLOP/s, at the current torch
// thread count. Throws std::invalid_argument unless 0 < seconds <= 60.
double gemm_gflops(double seconds);

// The threads OpenBLAS uses for a call (openblas_get_num_threads), which
// need not be libtorch's count; 0 when the BLAS is not OpenBLAS.
int blas_threads();

// "1.13.0"
std::string torch_version();

}  // namespace posenc::nn
