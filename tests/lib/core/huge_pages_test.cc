// Tests for lib/core/huge_pages: alignment, size, moves, and the two errors.
#include "lib/core/huge_pages.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstring>
#include <utility>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/test_util.h"

namespace vocabd {
namespace {

using ::testing::HasSubstr;

TEST(HugePageBufferTest, AlignedToTwoMiBAndWritable) {
  auto b = HugePageBuffer::Allocate(3 * 1024 * 1024 + 5, "test table");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b->data()) % HugePageBuffer::kHugePageBytes, 0u);
  EXPECT_EQ(b->size(), 3u * 1024 * 1024 + 5);
  std::memset(b->data(), 0xab, b->size());  // every byte asked for is usable
  EXPECT_EQ(b->data()[b->size() - 1], 0xab);
  // Advised for THP (whatever the system's mode); a fresh anonymous mapping
  // is not (a malloc'd block may sit where an earlier buffer was advised).
  if (testing::ThpInKernel()) {
    EXPECT_TRUE(testing::AdvisedHugePages(b->data()));
    EXPECT_TRUE(testing::AdvisedHugePages(b->data() + b->size() - 1));
  }
  constexpr size_t kPlain = size_t{8} << 20;
  void* plain = ::mmap(nullptr, kPlain, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(plain, MAP_FAILED);
  EXPECT_FALSE(testing::AdvisedHugePages(plain));
  ::munmap(plain, kPlain);
}

TEST(HugePageBufferTest, MoveKeepsTheMemory) {
  auto b = HugePageBuffer::Allocate(16, "test table");
  ASSERT_TRUE(b.ok()) << b.status();
  uint8_t* p = b->data();
  p[0] = 7;
  HugePageBuffer moved = std::move(*b);
  EXPECT_EQ(moved.data(), p);
  EXPECT_EQ(moved.size(), 16u);
  EXPECT_EQ(b->data(), nullptr);
  EXPECT_EQ(b->size(), 0u);
  HugePageBuffer assigned;
  assigned = std::move(moved);
  EXPECT_EQ(assigned.data(), p);
  EXPECT_EQ(assigned.data()[0], 7);
}

TEST(HugePageBufferTest, ZeroBytesIsInvalidAndTooManyIsExhausted) {
  auto zero = HugePageBuffer::Allocate(0, "the packed Q8_0 weights");
  EXPECT_EQ(zero.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(zero.status().message(), HasSubstr("0 bytes for the packed Q8_0 weights"));
  auto huge = HugePageBuffer::Allocate(SIZE_MAX, "lm_head.weight");
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(huge.status().message(),
              HasSubstr("cannot allocate 18446744073709551615 bytes for lm_head.weight"));
}

}  // namespace
}  // namespace vocabd
