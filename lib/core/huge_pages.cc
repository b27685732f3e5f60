#include "lib/core/huge_pages.h"

#include <sys/mman.h>

#include <cstdlib>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace vocabd {

absl::StatusOr<HugePageBuffer> HugePageBuffer::Allocate(size_t bytes, const char* what) {
  if (bytes == 0) {
    return absl::InvalidArgumentError(absl::StrCat("cannot allocate 0 bytes for ", what));
  }
  if (bytes > SIZE_MAX - kHugePageBytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", bytes, " bytes for ", what));
  }
  const size_t alloc = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(kHugePageBytes, alloc));
  if (p == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", bytes, " bytes for ", what));
  }
  ::madvise(p, alloc, MADV_HUGEPAGE);  // advice only: without THP, 4 KiB pages
  HugePageBuffer b;
  b.data_ = p;
  b.size_ = bytes;
  return b;
}

HugePageBuffer::HugePageBuffer(HugePageBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

HugePageBuffer& HugePageBuffer::operator=(HugePageBuffer&& other) noexcept {
  if (this != &other) {
    std::free(data_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

HugePageBuffer::~HugePageBuffer() { std::free(data_); }

}  // namespace vocabd
