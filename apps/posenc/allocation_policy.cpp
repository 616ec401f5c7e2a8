#include "allocation_policy.h"

#include <cstdlib>
#include <string_view>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace posenc::cli {

bool keep_freed_memory_for_reuse() {
#if defined(__GLIBC__)
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables != nullptr && std::string_view(tunables).find("glibc.malloc.") != std::string_view::npos) return false;
  // mmap'd blocks go back to the kernel on free whatever the threshold, and the
  // threshold is capped at 32 MB (a language model's logits are larger): take
  // every block from the heap, and never trim the heap, so a step's tensors
  // reuse the pages of the step before. Measured on one thread: masked LM
  // 40k -> 50k tokens/s, causal LM (V = 8000, dim 128) 5.3k -> 8.6k.
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, -1);  // glibc: -1 turns trimming off
  return true;
#else
  return false;
#endif
}

}  // namespace posenc::cli
