// How the posenc process hands memory back to the system. Training frees and
// reallocates the same large tensors every step; glibc's defaults return them
// to the kernel (mmap for large blocks, trimming the heap top), so every step
// pays page faults and zeroing again: about a fifth of a small model's step.
#pragma once

namespace posenc::cli {

// Keep freed memory in the process for reuse (no mmap'd blocks, no heap
// trimming, one arena for every thread). A no-op when the user set
// GLIBC_TUNABLES glibc.malloc.* keys themselves, or on a C library other than
// glibc. True when it changed malloc's settings.
bool keep_freed_memory_for_reuse();

}  // namespace posenc::cli
