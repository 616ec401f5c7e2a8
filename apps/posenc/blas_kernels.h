// Which OpenBLAS kernels the torch-backed commands run on. OpenBLAS picks its
// kernel set once, when it loads, from the CPU or from OPENBLAS_CORETYPE; an
// OpenBLAS that does not know the CPU (Debian's 0.3.21 on some virtualized
// Xeons) falls back to Prescott's SSE3 kernels, a quarter of the float32 GEMM
// rate of its AVX-512 ones. Every GEMM of training runs there, so posenc
// starts such a command again with OPENBLAS_CORETYPE=SkylakeX. A value the
// user set is theirs to keep.
#pragma once

#include <string>

namespace posenc::cli {

// When OPENBLAS_CORETYPE is unset and OpenBLAS chose kernels without AVX-512
// on a CPU that has it, starts this process again (execv of /proc/self/exe
// with argv) with OPENBLAS_CORETYPE=SkylakeX and POSENC_OPENBLAS_CHOSE set to
// the kernels OpenBLAS chose. Returns otherwise, and when execv fails (the
// command then runs on the kernels OpenBLAS chose; a note on stderr says so).
void use_avx512_blas_kernels(char** argv);

// The kernel set OpenBLAS chose before posenc started the process again
// (e.g. "Prescott"), or "" when it did not.
std::string blas_kernels_chosen_before_restart();

}  // namespace posenc::cli
