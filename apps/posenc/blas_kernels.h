// Which OpenBLAS kernels the torch-backed commands run on. OpenBLAS picks its
// kernel set once, when it loads, from the CPU or from OPENBLAS_CORETYPE; an
// OpenBLAS that does not know the CPU (Debian's 0.3.21 on some virtualized
// Xeons) falls back to Prescott's SSE3 kernels, a quarter of the float32 GEMM
// rate of its AVX-512 ones. Every GEMM of training runs there, so posenc
// switches such a command to OPENBLAS_CORETYPE=SkylakeX. A value the user set
// is theirs to keep.
#pragma once

#include <string>

namespace posenc::cli {

// When OPENBLAS_CORETYPE is unset and OpenBLAS chose kernels without AVX-512
// on a CPU that has it: sets OPENBLAS_CORETYPE=SkylakeX (inherited by the
// processes a command starts) and POSENC_OPENBLAS_CHOSE to the kernels
// OpenBLAS chose, then has OpenBLAS choose again in this process (its
// exported gotoblas_dynamic_quit / gotoblas_dynamic_init, before any BLAS
// call), or else starts the process again (execv of /proc/self/exe with
// argv). If both fail the command runs on the kernels OpenBLAS chose, and a
// note on stderr says so.
void use_avx512_blas_kernels(char** argv);

// The kernel set OpenBLAS chose before posenc switched it (e.g. "Prescott"),
// or "" when posenc did not.
std::string blas_kernels_chosen_before_switch();

}  // namespace posenc::cli
