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
  // Returns "" when `cancel` becomes true midway (checked every 64 MiB).
  std::string Sha256Hex(const std::atomic<bool>* cancel = nullptr) const;

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace vocabd

#endif  // VOCABD_LIB_CORE_MAPPED_FILE_H_
