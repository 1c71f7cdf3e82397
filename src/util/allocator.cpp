#include "weft/util/allocator.hpp"

#include <cstdlib>  // defines __GLIBC__ where the C library is glibc

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace weft {

bool keep_freed_memory() {
#if defined(__GLIBC__)
  constexpr int kLargestMmapThreshold = 32 * 1024 * 1024;  // glibc's maximum on 64-bit
  const bool threshold = mallopt(M_MMAP_THRESHOLD, kLargestMmapThreshold) == 1;
  const bool trim = mallopt(M_TRIM_THRESHOLD, -1) == 1;  // -1: never trim
  return threshold && trim;
#else
  return false;
#endif
}

}  // namespace weft
