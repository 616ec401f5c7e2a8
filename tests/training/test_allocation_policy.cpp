// The posenc executable's malloc policy (apps/posenc/allocation_policy.h): a
// thread started after it allocates from the main arena, whose freed pages the
// next training step reuses, not from an arena of its own (glibc unmaps such
// an arena's heaps once they are empty, and `--threads 2` runs its shards on
// threads whose blocks all die at the end of a step).
#include <gtest/gtest.h>
#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "allocation_policy.h"

namespace {

// glibc's own account: malloc_info writes one <heap nr="..."> per arena.
int arenas() {
  char* text = nullptr;
  size_t size = 0;
  FILE* out = open_memstream(&text, &size);
  malloc_info(0, out);
  std::fclose(out);
  const std::string xml(text, size);
  std::free(text);
  int count = 0;
  for (size_t at = xml.find("<heap nr="); at != std::string::npos; at = xml.find("<heap nr=", at + 1)) ++count;
  return count;
}

void* volatile kept = nullptr;  // the thread's block, so that its malloc is not optimized away

TEST(AllocationPolicy, ANewThreadAllocatesFromTheMainArena) {
  unsetenv("GLIBC_TUNABLES");  // a glibc.malloc.* key there would leave malloc as the user set it
  ASSERT_TRUE(posenc::cli::keep_freed_memory_for_reuse());
  const int before = arenas();
  std::thread([] {
    char* block = static_cast<char*>(std::malloc(1 << 20));
    std::memset(block, 1, 1 << 20);
    kept = block;
  }).join();
  EXPECT_EQ(arenas(), before);
  std::free(kept);
}

}  // namespace
