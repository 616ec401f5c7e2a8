#include "blas_kernels.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "posenc/nn/runtime_info.h"

namespace posenc::cli {

namespace {
constexpr const char* kCoreVariable = "OPENBLAS_CORETYPE";
constexpr const char* kChoseVariable = "POSENC_OPENBLAS_CHOSE";
constexpr const char* kAvx512Core = "SkylakeX";
}  // namespace

void use_avx512_blas_kernels(char** argv) {
  if (std::getenv(kCoreVariable) != nullptr) return;
  const nn::BlasInfo blas = nn::blas_info();
  if (!blas.avx512_unused) return;
  ::setenv(kCoreVariable, kAvx512Core, 1);
  ::setenv(kChoseVariable, blas.core.c_str(), 1);
  ::execv("/proc/self/exe", argv);
  const int error = errno;
  ::unsetenv(kCoreVariable);
  ::unsetenv(kChoseVariable);
  std::cerr << "posenc: note: OpenBLAS chose its " << blas.core << " kernels (no AVX-512) on this AVX-512 CPU, and "
            << "starting again with " << kCoreVariable << '=' << kAvx512Core << " failed (" << std::strerror(error)
            << "); running on the " << blas.core << " kernels\n";
}

std::string blas_kernels_chosen_before_restart() {
  const char* chose = std::getenv(kChoseVariable);
  const char* core = std::getenv(kCoreVariable);
  // Both are inherited by the processes a sweep starts; a user who set OPENBLAS_CORETYPE to something
  // else since is not restarted.
  if (chose == nullptr || core == nullptr || std::strcmp(core, kAvx512Core) != 0) return "";
  return chose;
}

}  // namespace posenc::cli
