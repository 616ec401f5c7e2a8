// What a speed figure depends on, as this build and this process see it: the
// vector instructions the kernels were compiled for (with POSENC_NATIVE they
// follow the build machine, -march=native; without, plain x86-64) and the
// cores the process may run on (its CPU affinity mask, which a container or
// `taskset` narrows; not the machine's core count).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace posenc::kernels {

struct KernelBuild {
  bool native = false;      // compiled with -march=native
  std::string vector_isa;   // "AVX-512F AVX2 FMA", "AVX2 FMA", "SSE2", ...
};

KernelBuild kernel_build() noexcept;

// Cores in this process's affinity mask (>= 1).
int64_t available_cores() noexcept;

// The commit the build came from, 12 hex digits, "-dirty" with uncommitted
// changes to tracked files, "unknown" outside a git checkout (refreshed at every build).
std::string_view git_revision() noexcept;

}  // namespace posenc::kernels
