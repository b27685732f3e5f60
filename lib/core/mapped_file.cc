#include "lib/core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <openssl/evp.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace vocabd {

absl::StatusOr<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    const std::string message = absl::StrCat("cannot open ", path, ": ", std::strerror(err));
    if (err == ENOENT || err == ENOTDIR) return absl::NotFoundError(message);
    if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(message);
    return absl::InternalError(message);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return absl::InternalError(absl::StrCat("cannot stat ", path, ": ", std::strerror(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a regular file"));
  }
  const size_t size = static_cast<size_t>(st.st_size);
  const uint8_t* data = nullptr;
  if (size > 0) {
    void* addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return absl::InternalError(
          absl::StrCat("cannot mmap ", path, " (", size, " bytes): ", std::strerror(err)));
    }
    data = static_cast<const uint8_t*>(addr);
  }
  ::close(fd);  // The mapping stays valid after the descriptor is closed.
  return std::unique_ptr<MappedFile>(new MappedFile(path, data, size));
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

bool MappedFile::Contains(const void* p, size_t n) const {
  const auto a = reinterpret_cast<uintptr_t>(p);
  const auto base = reinterpret_cast<uintptr_t>(data_);
  return data_ != nullptr && a >= base && n <= size_ && a - base <= size_ - n;
}

void MappedFile::DropResidentPages(const void* p, size_t n) const {
  if (!Contains(p, n)) return;
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto a = reinterpret_cast<uintptr_t>(p);
  const uintptr_t begin = (a + page - 1) / page * page;
  const uintptr_t end = (a + n) / page * page;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

std::string MappedFile::Sha256Hex(const std::atomic<bool>* cancel) const {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_len = 0;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  if (ctx == nullptr) return "";
  bool ok = EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) == 1;
  // Feed in 16 MiB pieces (no int limit; each dropped from RSS after).
  constexpr size_t kChunk = size_t{16} << 20;
  for (size_t offset = 0; ok && offset < size_; offset += kChunk) {
    if (cancel != nullptr && cancel->load()) {
      EVP_MD_CTX_free(ctx);
      return "";
    }
    const size_t n = size_ - offset < kChunk ? size_ - offset : kChunk;
    ok = EVP_DigestUpdate(ctx, data_ + offset, n) == 1;
    DropResidentPages(data_ + offset, n);
  }
  ok = ok && EVP_DigestFinal_ex(ctx, digest, &digest_len) == 1;
  EVP_MD_CTX_free(ctx);
  if (!ok) return "";
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * digest_len);
  for (unsigned int i = 0; i < digest_len; ++i) {
    hex.push_back(kHex[digest[i] >> 4]);
    hex.push_back(kHex[digest[i] & 0xf]);
  }
  return hex;
}

}  // namespace vocabd
