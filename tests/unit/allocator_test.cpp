// weft::keep_freed_memory: a freed large block stays in the heap for the next batch.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "weft/util/allocator.hpp"

#if defined(__GLIBC__)
#include <malloc.h>

TEST(Allocator, AFreedBlockOfSeveralMegabytesStaysInTheHeapForReuse) {
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
