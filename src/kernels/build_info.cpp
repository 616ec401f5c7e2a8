#include "posenc/kernels/build_info.h"

#include <sched.h>
#include <unistd.h>

namespace posenc::kernels {

KernelBuild kernel_build() noexcept {
  KernelBuild b;
#ifdef POSENC_NATIVE_BUILD
  b.native = true;
#endif
  // The macros of this translation unit are those of every kernel: one set of flags for the target.
  std::string isa;
#ifdef __AVX512F__
  isa += " AVX-512F";
#endif
#ifdef __AVX2__
  isa += " AVX2";
#endif
#ifdef __FMA__
  isa += " FMA";
#endif
#if !defined(__AVX2__) && defined(__AVX__)
  isa += " AVX";
#endif
  if (isa.empty()) isa = " SSE2";
  b.vector_isa = isa.substr(1);
  return b;
}

int64_t available_cores() noexcept {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    const int count = CPU_COUNT(&set);
    if (count >= 1) return count;
  }
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  return online >= 1 ? online : 1;
}

}  // namespace posenc::kernels
