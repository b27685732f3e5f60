// Read-only memory mapping of a whole file, opened through OpenModelFile
// (lib/core/model_file.h: regular files only, confined to the thread's file
// root) and guarded against the file changing under the mapping.
//
// A file truncated while mapped makes every read of a page past its new end
// raise SIGBUS, which kills the process. Every MappedFile is therefore
// registered with a process-wide SIGBUS handler (installed on first use,
// chaining to any previous handler for faults outside our mappings): a
// fault inside a mapping replaces the pages from the faulting one to the
// end of the mapping with zero pages, marks the mapping damaged and lets
// the read go on (it sees zeros). CheckIntact() then reports the change, so
// the caller discards what it computed and answers an error instead. The
// descriptor stays open so CheckIntact() can fstat the very inode that is
// mapped: a changed size or modification time is reported even before any
// fault. A file REPLACED by rename (the safe way, see docs/models.md, "Model
// repository": "Replacing model files safely") leaves the old inode and this
// mapping intact.
#ifndef VOCABD_LIB_CORE_MAPPED_FILE_H_
#define VOCABD_LIB_CORE_MAPPED_FILE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include <sys/stat.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/core/model_file.h"

namespace vocabd {

class MappedFile {
 public:
  // NOT_FOUND if the file does not exist, INVALID_ARGUMENT if it is not a
  // regular file or lies outside the thread's file root (see
  // lib/core/model_file.h), INTERNAL on mmap failure. An empty file maps to
  // size 0.
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Lowercase hex sha256 of the contents (OpenSSL EVP).
  // Returns "" when `cancel` becomes true midway (checked every 16 MiB).
  // Each hashed 16 MiB piece is dropped from the process's resident pages
  // afterwards (DropResidentPages), so hashing a file never holds more than
  // one piece of it in RSS.
  std::string Sha256Hex(const std::atomic<bool>* cancel = nullptr) const;
  // True when [p, p + n) lies inside this mapping.
  bool Contains(const void* p, size_t n) const;
  // Drops this process's resident pages wholly inside [p, p + n) (a range of
  // this mapping; others are ignored) with madvise(MADV_DONTNEED). The
  // mapping is read-only and private, so nothing is lost: a later read
  // faults the page back in from the file (page cache). Used after a pass
  // that reads a source once (conversion, quantization, hashing) so peak
  // RSS stays near the bytes actually served.
  void DropResidentPages(const void* p, size_t n) const;

  // OK while the file is as it was mapped. FAILED_PRECONDITION naming the
  // path when it was truncated (a read past the new end was caught, or
  // fstat shows a different size) or modified in place (mtime changed): the
  // data read from the mapping since may be zeros or a mix of old and new.
  // One fstat; thread-safe.
  absl::Status CheckIntact() const;
  // True once a SIGBUS in this mapping was caught (for tests).
  bool damaged() const;

 private:
  MappedFile(OpenedModelFile file, const uint8_t* data, size_t size, int guard_slot)
      : path_(file.path), fd_(std::move(file.fd)), st_(file.st), data_(data), size_(size),
        guard_slot_(guard_slot) {}
  std::string path_;
  UniqueFd fd_;
  struct stat st_ {};
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  int guard_slot_ = -1;  // SIGBUS guard registration, -1 = none
};

}  // namespace vocabd

#endif  // VOCABD_LIB_CORE_MAPPED_FILE_H_
