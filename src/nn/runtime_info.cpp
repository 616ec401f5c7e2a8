#include "posenc/nn/runtime_info.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <dlfcn.h>
#include <link.h>
#include <torch/version.h>

#include <chrono>
#include <cctype>
#include <climits>
#include <cstdlib>
#include <string>

#include "posenc/error.h"

namespace posenc::nn {
namespace {

// The loaded object that defines `symbol`, as a real path ("" if none does).
std::string library_of(const char* symbol) {
  void* address = ::dlsym(RTLD_DEFAULT, symbol);
  Dl_info info{};
  if (address == nullptr || ::dladdr(address, &info) == 0 || info.dli_fname == nullptr) return "";
  char resolved[PATH_MAX];
  return ::realpath(info.dli_fname, resolved) != nullptr ? std::string(resolved) : std::string(info.dli_fname);
}

// libtorch loaded RTLD_LOCAL (as Python does) hides its BLAS from RTLD_DEFAULT: look through the loaded objects.
std::string loaded_blas() {
  std::string found;
  ::dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        const std::string name = info->dlpi_name != nullptr ? info->dlpi_name : "";
        if (name.find("libblas.so") != std::string::npos || name.find("libopenblas") != std::string::npos) {
          *static_cast<std::string*>(out) = name;
          return 1;
        }
        return 0;
      },
      &found);
  if (found.empty()) return found;
  char resolved[PATH_MAX];
  return ::realpath(found.c_str(), resolved) != nullptr ? std::string(resolved) : found;
}

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// A function of the BLAS library at `library` (the one providing sgemm_), looked up in that library itself:
// another BLAS can be loaded beside it (LAPACK's), and RTLD_LOCAL hides both from RTLD_DEFAULT. Null if none.
void* blas_symbol(const std::string& library, const char* name) {
  void* handle = library.empty() ? nullptr : ::dlopen(library.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  return handle != nullptr ? ::dlsym(handle, name) : nullptr;
}

// OpenBLAS's kernel sets with AVX-512 (Kernel/x86_64 targets SKYLAKEX, COOPERLAKE, SAPPHIRERAPIDS).
bool avx512_core(std::string core) {
  for (char& c : core) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return contains(core, "skylakex") || contains(core, "cooperlake") || contains(core, "sapphirerapids");
}

}  // namespace

BlasInfo blas_info() {
  BlasInfo b;
  b.library = library_of("sgemm_");
  if (b.library.empty() || contains(b.library, "libtorch")) b.library = loaded_blas();
  const std::string& l = b.library;
  if (contains(l, "openblas")) {
    b.kind = contains(l, "pthread") ? "OpenBLAS (pthread)"
             : contains(l, "openmp") ? "OpenBLAS (OpenMP)"
             : contains(l, "serial") ? "OpenBLAS (serial)"
                                     : "OpenBLAS";
  } else if (contains(l, "/blas/libblas") || contains(l, "libblas.so.3.")) {
    b.kind = "reference BLAS (netlib)";
    b.reference = true;
  } else if (contains(l, "blis")) {
    b.kind = "BLIS";
  } else if (contains(l, "mkl")) {
    b.kind = "Intel MKL";
  } else if (contains(l, "atlas")) {
    b.kind = "ATLAS";
  } else {
    b.kind = "unknown";
  }
  using CoreName = char* (*)();
  auto* corename = reinterpret_cast<CoreName>(blas_symbol(b.library, "openblas_get_corename"));
  if (contains(b.kind, "OpenBLAS") && corename != nullptr) {
    const char* name = corename();
    b.core = name != nullptr ? name : "";
    b.avx512_unused = !b.core.empty() && !avx512_core(b.core) && __builtin_cpu_supports("avx512f");
  }
  return b;
}

double gemm_gflops(double seconds) {
  require(seconds > 0 && seconds <= 60, "doctor", "seconds must be in (0, 60], got ", seconds);
  using Clock = std::chrono::steady_clock;
  constexpr int64_t kN = 1024;
  at::NoGradGuard no_grad;
  const at::Tensor a = at::rand({kN, kN}), b = at::rand({kN, kN});
  at::Tensor c = at::mm(a, b);  // warm-up: thread pool, page faults
  int64_t calls = 0;
  const Clock::time_point start = Clock::now();
  double elapsed = 0;
  do {
    at::mm_out(c, a, b);
    ++calls;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed < seconds);
  return 2.0 * kN * kN * kN * static_cast<double>(calls) / elapsed / 1e9;
}

int blas_threads() {
  using Getter = int (*)();
  auto* get = reinterpret_cast<Getter>(blas_symbol(blas_info().library, "openblas_get_num_threads"));
  return get != nullptr ? get() : 0;
}

std::string torch_version() { return TORCH_VERSION; }

}  // namespace posenc::nn

// The libtorch this library was compiled against, as text in the file itself: the Python package reads it
// before loading the library, so that one built against another torch is refused in one line naming both
// versions instead of failing on an undefined symbol (python/posenc/_library.py).
extern "C" __attribute__((used, visibility("default"))) const char posenc_built_against_torch[] =
    "posenc-built-against-torch " TORCH_VERSION "\n";
