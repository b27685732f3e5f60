// Memory for the large tables the LM head streams on every call: one
// allocation aligned to 2 MiB and advised for transparent huge pages
// (madvise(MADV_HUGEPAGE); Linux's THP "madvise" mode, the default of
// Debian's kernels, gives huge pages only to memory advised so).
//
// Why: a one-row head call reads the whole weight matrix once (a Llama-3
// F32 head is 2.1 GB). On 4 KiB pages that is 512 page walks per 2 MiB,
// which on a 2-vCPU Zen 5 VM made the F32 and BF16 one-row kernels 1.29x
// and 1.33x the time to stream the same bytes from huge pages; from huge
// pages they ran at 1.00-1.17x and 1.05-1.13x of it in five runs
// (bench/head_bench, docs/performance.md).
// A file mapping cannot be advised so on kernels without
// CONFIG_READ_ONLY_THP_FOR_FS, hence a copy.
//
// The advice is only advice: where THP is off ("never") or no huge page is
// free, the buffer is backed by 4 KiB pages and works the same, slower.
#ifndef VOCABD_LIB_CORE_HUGE_PAGES_H_
#define VOCABD_LIB_CORE_HUGE_PAGES_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"

namespace vocabd {

class HugePageBuffer {
 public:
  static constexpr size_t kHugePageBytes = size_t{2} << 20;
  // `bytes` of uninitialized memory (the allocation is rounded up to a
  // multiple of 2 MiB). RESOURCE_EXHAUSTED, naming `what` and the size,
  // when it cannot be allocated; INVALID_ARGUMENT for bytes == 0.
  static absl::StatusOr<HugePageBuffer> Allocate(size_t bytes, const char* what);

  HugePageBuffer() = default;
  HugePageBuffer(HugePageBuffer&& other) noexcept;
  HugePageBuffer& operator=(HugePageBuffer&& other) noexcept;
  HugePageBuffer(const HugePageBuffer&) = delete;
  HugePageBuffer& operator=(const HugePageBuffer&) = delete;
  ~HugePageBuffer();

  uint8_t* data() const { return data_; }
  // The bytes asked for (not the rounded allocation).
  size_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace vocabd

#endif  // VOCABD_LIB_CORE_HUGE_PAGES_H_
