// Read-only memory mapping of a whole file.
#ifndef VOCABD_LIB_CORE_MAPPED_FILE_H_
#define VOCABD_LIB_CORE_MAPPED_FILE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace vocabd {

class MappedFile {
 public:
  // NOT_FOUND if the file does not exist, INVALID_ARGUMENT if it is not a
  // regular file, INTERNAL on mmap failure. An empty file maps to size 0.
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

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace vocabd

#endif  // VOCABD_LIB_CORE_MAPPED_FILE_H_
