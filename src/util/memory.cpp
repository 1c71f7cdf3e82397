#include "weft/util/memory.hpp"

#include <cstdlib>
#include <cstring>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace weft {

std::string keep_freed_memory() {
  const char* own = std::getenv("WEFT_KEEP_FREED_MEMORY");
  if (own && std::strcmp(own, "0") == 0)
    return "allocator: glibc defaults (WEFT_KEEP_FREED_MEMORY=0)";
#if defined(__GLIBC__)
  for (const char* name : {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_"})
    if (std::getenv(name)) return std::string("allocator: as set by ") + name;
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables && std::strstr(tunables, "glibc.malloc."))
    return "allocator: as set by GLIBC_TUNABLES";
  // 32 MiB is the largest mmap threshold glibc accepts on 64-bit systems.
  const bool ok =
      mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1 && mallopt(M_TRIM_THRESHOLD, 1 << 30) == 1;
  return ok ? "allocator: freed memory kept (blocks up to 32 MiB from the heap, no trimming)"
            : "allocator: glibc refused the settings; defaults kept";
#else
  return "allocator: not glibc; defaults kept";
#endif
}

}  // namespace weft
