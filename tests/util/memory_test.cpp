// weft::keep_freed_memory: respects the user's own allocator settings, and afterwards blocks
// of a few MiB come from the heap (no mmap per allocation) and stay there when freed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "weft/util/memory.hpp"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

// AddressSanitizer brings its own allocator: glibc's settings do not apply, and mallopt fails.
#if defined(__SANITIZE_ADDRESS__)
#define WEFT_OWN_ALLOCATOR 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define WEFT_OWN_ALLOCATOR 1
#endif
#endif

namespace {

bool contains(const std::string& text, const char* part) {
  return text.find(part) != std::string::npos;
}

// One test: the settings are process-wide, so the order of the steps matters.
TEST(KeepFreedMemory, HonoursOptOutsThenKeepsBlocksInTheHeap) {
  ::setenv("WEFT_KEEP_FREED_MEMORY", "0", 1);
  EXPECT_TRUE(contains(weft::keep_freed_memory(), "defaults (WEFT_KEEP_FREED_MEMORY=0)"));
  ::unsetenv("WEFT_KEEP_FREED_MEMORY");
#if defined(__GLIBC__)
  ::setenv("MALLOC_TRIM_THRESHOLD_", "131072", 1);
  EXPECT_TRUE(contains(weft::keep_freed_memory(), "as set by MALLOC_TRIM_THRESHOLD_"));
  ::unsetenv("MALLOC_TRIM_THRESHOLD_");
  ::setenv("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=131072", 1);
  EXPECT_TRUE(contains(weft::keep_freed_memory(), "as set by GLIBC_TUNABLES"));
  ::unsetenv("GLIBC_TUNABLES");

  const std::string done = weft::keep_freed_memory();
#if defined(WEFT_OWN_ALLOCATOR)
  EXPECT_TRUE(contains(done, "glibc refused the settings; defaults kept")) << done;
#else
  // glibc's default would mmap a fresh 4 MiB block (above its 128 KiB threshold).
  EXPECT_TRUE(contains(done, "freed memory kept")) << done;
  const std::size_t mapped_before = mallinfo2().hblkhd;
  void* block = std::malloc(4u << 20);
  ASSERT_NE(block, nullptr);
  std::memset(block, 1, 4u << 20);
  EXPECT_EQ(mallinfo2().hblkhd, mapped_before) << "a 4 MiB block was mmap()ed";
  const std::size_t heap = mallinfo2().arena;
  std::free(block);
  EXPECT_EQ(mallinfo2().arena, heap) << "freeing the block trimmed the heap";
#endif
#else
  EXPECT_TRUE(contains(weft::keep_freed_memory(), "not glibc"));
#endif
}

}  // namespace
