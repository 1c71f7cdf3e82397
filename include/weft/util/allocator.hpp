#pragma once
// Process-wide memory allocator settings for training processes.

namespace weft {

/// Makes glibc's malloc keep freed blocks for reuse instead of returning them to the system.
/// By default a block above the mmap threshold (128 KiB, raised adaptively up to 32 MiB) comes
/// fresh from the kernel, and freed heap tops are trimmed: every new activation, gradient or
/// MGRIT state then pays page faults on first touch (a 1.25 MB state: ~300 of them). With the
/// threshold at its maximum and trimming off, a batch reuses the previous batch's memory; the
/// process keeps its peak footprint. Measured: the stages network's MGRIT backward 16 % faster,
/// plain LibTorch's backward 14 % (docs/benchmarks.md). Called by the weft tool and the
/// benchmarks, not by the library (it changes the whole process). Returns false where the
/// allocator is not glibc's or refused a setting.
bool keep_freed_memory();

}  // namespace weft
