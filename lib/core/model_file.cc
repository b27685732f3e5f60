#include "lib/core/model_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace vocabd {
namespace {

thread_local std::string t_file_root;

const char* KindName(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

absl::Status ErrnoStatus(int err, const std::string& what, const std::string& path) {
  const std::string message = absl::StrCat(what, " ", path, ": ", std::strerror(err));
  if (err == ENOENT || err == ENOTDIR) return absl::NotFoundError(message);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(message);
  if (err == ELOOP) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " became a symbolic link while it was being opened"));
  }
  return absl::InternalError(message);
}

absl::Status NotRegular(const std::string& path, mode_t mode) {
  return absl::InvalidArgumentError(
      absl::StrCat(path, " is ", KindName(mode), ", not a regular file: model files must be "
                         "regular files"));
}

bool Inside(const std::string& real, const std::string& root) {
  if (root == "/") return !real.empty() && real[0] == '/';
  return real.size() > root.size() && real.compare(0, root.size(), root) == 0 &&
         real[root.size()] == '/';
}

absl::Status Outside(const std::string& path, const std::string& real, const std::string& root) {
  return absl::InvalidArgumentError(
      absl::StrCat(path, " resolves to ", real, ", outside the model repository root ", root,
                   " (links out of the root are refused)"));
}

std::string Resolve(const std::string& path) {
  char buffer[PATH_MAX];
  if (::realpath(path.c_str(), buffer) == nullptr) return "";
  return buffer;
}

}  // namespace

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

ScopedFileRoot::ScopedFileRoot(const std::string& root) : previous_(t_file_root) {
  if (root.empty()) {
    t_file_root.clear();
    return;
  }
  const std::string real = Resolve(root);
  // An unresolvable root confines to itself (every open then fails), never
  // to nothing.
  t_file_root = real.empty() ? root : real;
}

ScopedFileRoot::~ScopedFileRoot() { t_file_root = previous_; }

const std::string& CurrentFileRoot() { return t_file_root; }

absl::StatusOr<OpenedModelFile> OpenModelFile(const std::string& path) {
  return OpenModelFile(path, t_file_root);
}

absl::StatusOr<OpenedModelFile> OpenModelFile(const std::string& path, const std::string& root) {
  // 1. Refuse what is not a regular file before opening it (a FIFO's open
  //    would wait for a writer; a device's open may have side effects).
  struct stat before;
  if (::stat(path.c_str(), &before) != 0) return ErrnoStatus(errno, "cannot stat", path);
  if (!S_ISREG(before.st_mode)) return NotRegular(path, before.st_mode);
  // 2. Confinement: the real path must be inside the root; open it without
  //    following a link.
  std::string target = path;
  int flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY;
  if (!root.empty()) {
    target = Resolve(path);
    if (target.empty()) return ErrnoStatus(errno, "cannot resolve", path);
    if (!Inside(target, root)) return Outside(path, target, root);
    flags |= O_NOFOLLOW;
  }
  OpenedModelFile file;
  file.path = path;
  file.fd = UniqueFd(::open(target.c_str(), flags));
  if (file.fd.get() < 0) return ErrnoStatus(errno, "cannot open", path);
  // 3. What was opened, checked on the descriptor itself.
  if (::fstat(file.fd.get(), &file.st) != 0) return ErrnoStatus(errno, "cannot stat", path);
  if (!S_ISREG(file.st.st_mode)) return NotRegular(path, file.st.st_mode);
  if (!root.empty()) {
    char link[PATH_MAX];
    const std::string proc = absl::StrCat("/proc/self/fd/", file.fd.get());
    const ssize_t n = ::readlink(proc.c_str(), link, sizeof(link) - 1);
    if (n > 0) {
      const std::string opened(link, static_cast<size_t>(n));
      if (!Inside(opened, root)) return Outside(path, opened, root);
    } else {
      // No /proc: the descriptor must be the file the resolved path names.
      struct stat again;
      if (::stat(target.c_str(), &again) != 0 || again.st_dev != file.st.st_dev ||
          again.st_ino != file.st.st_ino) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, " changed while it was being opened; retry the load"));
      }
    }
  }
  // Regular files ignore O_NONBLOCK; clear it anyway for plain reads later.
  const int fl = ::fcntl(file.fd.get(), F_GETFL);
  if (fl >= 0) ::fcntl(file.fd.get(), F_SETFL, fl & ~O_NONBLOCK);
  return file;
}

absl::StatusOr<std::string> ReadModelFile(const std::string& path, size_t max_bytes) {
  absl::StatusOr<OpenedModelFile> file = OpenModelFile(path);
  if (!file.ok()) return file.status();
  const size_t size = static_cast<size_t>(file->st.st_size);
  if (size > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(path, " has ", size,
                                                    " bytes, more than the limit of ", max_bytes,
                                                    " bytes for this kind of file"));
  }
  std::string text(size, '\0');
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(file->fd.get(), text.data() + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(errno, "cannot read", path);
    if (n == 0) break;  // truncated meanwhile: return what is there
    done += static_cast<size_t>(n);
  }
  text.resize(done);
  return text;
}

}  // namespace vocabd
