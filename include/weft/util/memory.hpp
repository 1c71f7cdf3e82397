#pragma once
// How the process's allocator treats freed memory.

#include <string>

namespace weft {

/// Keeps memory that training frees inside the process instead of handing it back to the
/// kernel. glibc by default serves blocks above 128 KiB (a 50×8×28×28 float state is 1.25 MiB)
/// with fresh mmap()s and trims the heap's free top, so every batch faults its states, graphs
/// and gradients in again page by page. On virtual machines where a page fault is expensive that
/// costs up to 3× a backward pass (docs/benchmarks.md). This serves blocks up to 32 MiB from the
/// heap and stops trimming it: the process's footprint stays at its peak (what the next batch
/// needs again anyway). Returns what was done in one line; does nothing (and says so) when the
/// environment already tunes glibc's allocator (MALLOC_*_ or GLIBC_TUNABLES with
/// glibc.malloc), when WEFT_KEEP_FREED_MEMORY=0, or on another C library.
/// Process-wide: the CLI calls it at start-up; a program embedding weft chooses for itself.
std::string keep_freed_memory();

}  // namespace weft
