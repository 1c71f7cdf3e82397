// weft::keep_freed_memory: a freed large block stays in the heap for the next batch.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "weft/util/allocator.hpp"

#if defined(__SANITIZE_ADDRESS__)  // GCC
#define WEFT_UNDER_ASAN 1
#elif defined(__has_feature)  // Clang
#if __has_feature(address_sanitizer)
#define WEFT_UNDER_ASAN 1
#endif
#endif

#if defined(__GLIBC__)
#include <malloc.h>

TEST(Allocator, AFreedBlockOfSeveralMegabytesStaysInTheHeapForReuse) {
#if defined(WEFT_UNDER_ASAN)
  GTEST_SKIP() << "AddressSanitizer replaces glibc's malloc (keep_freed_memory returns false)";
#endif
  ASSERT_TRUE(weft::keep_freed_memory());
  constexpr std::size_t kBytes = 8 << 20;  // above glibc's default mmap threshold (128 KiB)
  const std::size_t free_before = mallinfo2().fordblks;
  void* block = std::malloc(kBytes);
  ASSERT_NE(block, nullptr);
  std::memset(block, 1, kBytes);  // touched, as a tensor would be
  std::free(block);
  // Without the settings the block would be unmapped (or trimmed) on free.
  EXPECT_GE(mallinfo2().fordblks, free_before + kBytes);
}
#endif
