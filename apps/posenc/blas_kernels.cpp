#include "blas_kernels.h"

#include <dlfcn.h>
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

// OpenBLAS's DYNAMIC_ARCH builds choose their kernel table in gotoblas_dynamic_init, from
// OPENBLAS_CORETYPE when set; gotoblas_dynamic_quit forgets the choice. Before the first BLAS call
// (no buffers sized by the old table yet) that is all a fresh start would do, without loading
// libtorch a second time (about 0.6 s per command here).
bool choose_again_in_process() {
  using Step = void (*)();
  const auto quit = reinterpret_cast<Step>(::dlsym(RTLD_DEFAULT, "gotoblas_dynamic_quit"));
  const auto init = reinterpret_cast<Step>(::dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init"));
  if (quit == nullptr || init == nullptr) return false;
  quit();
  init();
  return !nn::blas_info().avx512_unused;
}
}  // namespace

void use_avx512_blas_kernels(char** argv) {
  if (std::getenv(kCoreVariable) != nullptr) return;
  const nn::BlasInfo blas = nn::blas_info();
  if (!blas.avx512_unused) return;
  ::setenv(kCoreVariable, kAvx512Core, 1);
  ::setenv(kChoseVariable, blas.core.c_str(), 1);
  if (choose_again_in_process()) return;
  ::execv("/proc/self/exe", argv);
  const int error = errno;
  ::unsetenv(kCoreVariable);
  ::unsetenv(kChoseVariable);
  const std::string now = nn::blas_info().core;
  std::cerr << "posenc: note: OpenBLAS chose its " << blas.core << " kernels (no AVX-512) on this AVX-512 CPU, and "
            << "switching to " << kCoreVariable << '=' << kAvx512Core << " failed (starting again: "
            << std::strerror(error) << "); running on the " << now << " kernels\n";
}

std::string blas_kernels_chosen_before_switch() {
  const char* chose = std::getenv(kChoseVariable);
  const char* core = std::getenv(kCoreVariable);
  // Both are inherited by the processes a sweep starts; a user who set OPENBLAS_CORETYPE to something
  // else since was not switched.
  if (chose == nullptr || core == nullptr || std::strcmp(core, kAvx512Core) != 0) return "";
  return chose;
}

}  // namespace posenc::cli
