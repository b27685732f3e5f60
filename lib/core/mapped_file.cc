#include "lib/core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <mutex>

#include <openssl/evp.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace vocabd {

namespace {

// The SIGBUS guard: a fixed table of mapped ranges the handler can read
// without locks or allocation (async-signal-safe: atomics, mmap, sigaction).
struct GuardSlot {
  std::atomic<uintptr_t> begin{0};
  std::atomic<size_t> length{0};
  std::atomic<bool> damaged{false};
};
constexpr int kGuardSlots = 4096;
GuardSlot g_slots[kGuardSlots];
std::mutex g_slots_mu;  // registration only (never taken in the handler)
struct sigaction g_previous_sigbus;
std::once_flag g_install_once;

void SigbusHandler(int sig, siginfo_t* info, void* ucontext) {
  const uintptr_t addr = reinterpret_cast<uintptr_t>(info->si_addr);
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  for (GuardSlot& slot : g_slots) {
    const uintptr_t begin = slot.begin.load(std::memory_order_acquire);
    if (begin == 0) continue;
    const size_t length = slot.length.load(std::memory_order_acquire);
    if (addr < begin || addr >= begin + length) continue;
    // Zero pages from the faulting page to the end of the mapping: the read
    // is retried and sees zeros; CheckIntact() reports the damage.
    const uintptr_t from = addr & ~(page - 1);
    const uintptr_t to = (begin + length + page - 1) & ~(page - 1);
    void* r = ::mmap(reinterpret_cast<void*>(from), to - from, PROT_READ,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (r != MAP_FAILED) {
      slot.damaged.store(true, std::memory_order_release);
      return;
    }
    break;
  }
  // Not ours (or cannot repair): what would have happened without us.
  if ((g_previous_sigbus.sa_flags & SA_SIGINFO) != 0 &&
      g_previous_sigbus.sa_sigaction != nullptr) {
    g_previous_sigbus.sa_sigaction(sig, info, ucontext);
    return;
  }
  if (g_previous_sigbus.sa_handler != SIG_DFL && g_previous_sigbus.sa_handler != SIG_IGN) {
    g_previous_sigbus.sa_handler(sig);
    return;
  }
  // Default action: restore it; returning re-executes the faulting access,
  // which now kills the process with SIGBUS as before.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(SIGBUS, &dfl, nullptr);
}

void InstallSigbusGuard() {
  std::call_once(g_install_once, [] {
    struct sigaction action {};
    action.sa_sigaction = SigbusHandler;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGBUS, &action, &g_previous_sigbus);
  });
}

int RegisterMapping(const uint8_t* data, size_t size) {
  InstallSigbusGuard();
  std::lock_guard<std::mutex> lock(g_slots_mu);
  for (int i = 0; i < kGuardSlots; ++i) {
    if (g_slots[i].begin.load(std::memory_order_relaxed) != 0) continue;
    g_slots[i].damaged.store(false, std::memory_order_relaxed);
    g_slots[i].length.store(size, std::memory_order_release);
    g_slots[i].begin.store(reinterpret_cast<uintptr_t>(data), std::memory_order_release);
    return i;
  }
  return -1;  // table full: this mapping is served unguarded
}

void UnregisterMapping(int slot) {
  if (slot < 0) return;
  std::lock_guard<std::mutex> lock(g_slots_mu);
  g_slots[slot].begin.store(0, std::memory_order_release);
  g_slots[slot].length.store(0, std::memory_order_release);
}

}  // namespace

absl::StatusOr<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
  absl::StatusOr<OpenedModelFile> file = OpenModelFile(path);
  if (!file.ok()) return file.status();
  const size_t size = static_cast<size_t>(file->st.st_size);
  const uint8_t* data = nullptr;
  int slot = -1;
  if (size > 0) {
    void* addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, file->fd.get(), 0);
    if (addr == MAP_FAILED) {
      const int err = errno;
      return absl::InternalError(
          absl::StrCat("cannot mmap ", path, " (", size, " bytes): ", std::strerror(err)));
    }
    data = static_cast<const uint8_t*>(addr);
    slot = RegisterMapping(data, size);
  }
  // The descriptor stays open: CheckIntact() fstats the mapped inode.
  return std::unique_ptr<MappedFile>(new MappedFile(std::move(*file), data, size, slot));
}

MappedFile::~MappedFile() {
  UnregisterMapping(guard_slot_);
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

bool MappedFile::damaged() const {
  return guard_slot_ >= 0 && g_slots[guard_slot_].damaged.load(std::memory_order_acquire);
}

absl::Status MappedFile::CheckIntact() const {
  const auto changed = [this](const std::string& how) {
    return absl::FailedPreconditionError(
        absl::StrCat("model file ", path_, " ", how,
                     " since it was loaded; replace model files by writing elsewhere and "
                     "renaming, then call LoadModel to map the new file"));
  };
  if (damaged()) return changed("was truncated under its memory mapping");
  struct stat now;
  if (::fstat(fd_.get(), &now) != 0) return absl::OkStatus();  // cannot tell: keep serving
  if (static_cast<size_t>(now.st_size) != size_) {
    return changed(absl::StrCat("changed size (", size_, " -> ", now.st_size, " bytes)"));
  }
  if (now.st_mtim.tv_sec != st_.st_mtim.tv_sec || now.st_mtim.tv_nsec != st_.st_mtim.tv_nsec) {
    return changed("was modified in place");
  }
  return absl::OkStatus();
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
