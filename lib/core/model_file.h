// Opening the files of a model load safely: the one function every loader
// (checkpoint, config, index, shards, GGUF, llama2.c .bin, tokenizer files)
// uses to open a file it reads.
//
// What OpenModelFile guarantees for a returned descriptor:
//   1. the file is a REGULAR file: a FIFO, socket, device or directory is
//      refused with INVALID_ARGUMENT before it is opened (stat), and the
//      open itself uses O_NONBLOCK and is re-checked with fstat on the
//      descriptor, so a FIFO swapped in between can never block the load;
//   2. when a file root is in force (a ScopedFileRoot on this thread, or the
//      explicit `root` argument), the file's real path (every symlink
//      resolved) lies inside the root: a link out of the root is
//      INVALID_ARGUMENT naming the file, what it resolves to and the root.
//      The resolved path is opened with O_NOFOLLOW and the descriptor's own
//      path (/proc/self/fd) is checked again, so swapping a directory for a
//      symlink between the check and the open is caught too. Links INSIDE
//      the root (e.g. Hugging Face cache snapshots -> ../../blobs/...) work.
//
// Errors: NOT_FOUND (missing), PERMISSION_DENIED (EACCES/EPERM),
// INVALID_ARGUMENT (not a regular file / outside the root / a link raced
// in), INTERNAL (other errno); every message names the path.
//
// The file root. ModelRepository::DoLoad puts a ScopedFileRoot (the
// repository root) around the whole load, so every file opened through this
// header on the loading thread is confined without passing the root through
// each loader's signature. A loader that opens files on ANOTHER thread must
// pass CurrentFileRoot() along and call the two-argument form. Without a
// root (models given by --model PATH, tests), only rule 1 applies and
// symlinks are followed: the operator chose the path.
//
// How a new loader reads its file (tokenizer.json, tokenizer.model,
// tokenizer_config.json, tok*.bin, ...):
//   ASSIGN_OR_RETURN(std::string text, ReadModelFile(path, kMaxTokenizerBytes));
//   ... parse `text` (e.g. SentencePieceProcessor::LoadFromSerializedProto)
// or, for large files, MappedFile::Open(path) (lib/core/mapped_file.h),
// which calls OpenModelFile. Never std::ifstream / fopen / a library's own
// Load(path): those skip both checks.
#ifndef VOCABD_LIB_CORE_MODEL_FILE_H_
#define VOCABD_LIB_CORE_MODEL_FILE_H_

#include <sys/stat.h>

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"

namespace vocabd {

// An owned file descriptor (closed on destruction; -1 = none).
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd();
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  int get() const { return fd_; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_ = -1;
};

// An opened model file: the descriptor (read-only, O_CLOEXEC), the path as
// given (for messages) and fstat of the descriptor at open time.
struct OpenedModelFile {
  UniqueFd fd;
  std::string path;
  struct stat st {};
};

// While alive, files opened through OpenModelFile / ReadModelFile /
// MappedFile::Open on THIS thread must resolve inside `root` (an absolute
// path; symlinks in it are resolved once here). "" lifts confinement for
// the scope. Scopes nest; the destructor restores the previous root.
class ScopedFileRoot {
 public:
  explicit ScopedFileRoot(const std::string& root);
  ~ScopedFileRoot();
  ScopedFileRoot(const ScopedFileRoot&) = delete;
  ScopedFileRoot& operator=(const ScopedFileRoot&) = delete;

 private:
  std::string previous_;
};

// The root in force on this thread ("" = none).
const std::string& CurrentFileRoot();

// Opens `path` for reading under the rules above, with this thread's root.
absl::StatusOr<OpenedModelFile> OpenModelFile(const std::string& path);
// The same with an explicit root ("" = no confinement).
absl::StatusOr<OpenedModelFile> OpenModelFile(const std::string& path, const std::string& root);

// Reads the whole of a small file opened by OpenModelFile(path).
// INVALID_ARGUMENT when it holds more than `max_bytes` bytes (message names
// the path, its size and the limit).
absl::StatusOr<std::string> ReadModelFile(const std::string& path, size_t max_bytes);

}  // namespace vocabd

#endif  // VOCABD_LIB_CORE_MODEL_FILE_H_
