// Shared helpers for the test suite.
#ifndef VOCABD_TESTS_TEST_UTIL_H_
#define VOCABD_TESTS_TEST_UTIL_H_

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/core/happens_before.h"

namespace vocabd::testing {

// True in the ThreadSanitizer build (deploy/dev.sh test-tsan). There every
// instrumented access is several times slower, and each field of a big
// response that gRPC frees on another thread costs TSan a (suppressed)
// report (deploy/sanitizers/tsan.supp): a 120000-row Score call took TSan
// about 15 minutes. Tests that only need "a call that keeps the compute
// thread busy for a while" use TsanScaled(rows) rows; everything they check
// stays the same.
#ifdef VOCABD_TSAN  // lib/core/happens_before.h
inline constexpr bool kThreadSanitizer = true;
#else
inline constexpr bool kThreadSanitizer = false;
#endif
// True in the AddressSanitizer build (deploy/dev.sh test-sanitizers; GCC
// defines __SANITIZE_ADDRESS__, clang answers __has_feature).
#if defined(__SANITIZE_ADDRESS__)
#define VOCABD_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define VOCABD_TEST_ASAN 1
#endif
#endif
#ifdef VOCABD_TEST_ASAN
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif
// Memory bounds read from VmRSS / VmHWM hold in the plain build only: the
// sanitizers' shadow memory and ASan's freed-memory quarantine add to the
// process's RSS whatever the code allocates. Tests assert them with
// EXPECT_RSS_LT / EXPECT_RSS_LE, which the sanitizer builds skip (CI runs
// the plain build first, so every bound is still checked on every run).
inline constexpr bool kRssBoundsHold = !kThreadSanitizer && !kAddressSanitizer;
// Time bounds ("refused well under a second") hold in the plain build, which
// CI runs first; the sanitizer builds multiply them by this (TSan's
// instrumentation and shadow-memory walks make a refused call take ~1 s).
inline constexpr int kSanitizerSlowdown = kThreadSanitizer ? 10 : (kAddressSanitizer ? 3 : 1);
#define EXPECT_RSS_LT(a, b)                          \
  switch (0)                                         \
  case 0:                                            \
  default:                                           \
    if (!::vocabd::testing::kRssBoundsHold) {        \
    } else                                           \
      EXPECT_LT(a, b)
#define EXPECT_RSS_LE(a, b)                          \
  switch (0)                                         \
  case 0:                                            \
  default:                                           \
    if (!::vocabd::testing::kRssBoundsHold) {        \
    } else                                           \
      EXPECT_LE(a, b)

// `rows`, or rows / 10 (at least `min_rows`) under ThreadSanitizer.
constexpr int64_t TsanScaled(int64_t rows, int64_t min_rows = 1) {
  if (!kThreadSanitizer) return rows;
  return rows / 10 > min_rows ? rows / 10 : min_rows;
}

// VmRSS of process `pid` (0 = this process) in bytes, from
// /proc/<pid>/status; -1 if unreadable.
int64_t VmRssBytes(int pid = 0);

// ../shared/models beside the clone.
std::string SharedModelsDir();
// The repository root.
std::string SourceDir();
// The build directory (where vocabd and vocabctl are built).
std::string BinaryDir();
// <repo>/models/stories260K/stories260K.bin and the HF directory shipped in
// the project.
std::string Stories260KBin();
std::string Stories260KHfDir();
// Reads tests/golden/<name> as JSON (fails the test if unreadable).
nlohmann::json ReadGolden(const std::string& name);
// Whole file as bytes.
std::string ReadFileBytes(const std::string& path);
// Whole file, or "" when it does not exist (yet): for polling logs.
std::string ReadFileOrEmpty(const std::string& path);
// Runs `command` with popen; returns (exit code, stdout). -1 if it could not
// run or did not exit normally.
std::pair<int, std::string> RunCommand(const std::string& command);
// A fresh directory /tmp/vocabd_test_XXXXXX, unique per call. Removed with its
// contents when the test process exits normally, unless a test failed or
// VOCABD_KEEP_TEST_DIRS is set (then kept, and one line on stderr names one).
std::string MakeTempDir();
// One MakeTempDir() per process, for files with fixed names.
const std::string& ProcessTempDir();
// `n` floats drawn from N(0, 1) by std::normal_distribution over
// std::mt19937(seed): the same values for the same seed.
std::vector<float> RandomNormal(size_t n, uint32_t seed);
// JSON array of numbers -> vector.
std::vector<float> ToFloats(const nlohmann::json& array);
std::vector<double> ToDoubles(const nlohmann::json& array);

// Sets an environment variable (value == nullptr: unsets it) for one
// scope; its previous value, or its absence, is restored after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (had_) {
      setenv(name_, old_.c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

// True when the mapping that holds `p` was advised for transparent huge
// pages (madvise(MADV_HUGEPAGE): "hg" in its VmFlags in /proc/self/smaps),
// whatever the system's THP mode; false if no mapping holds it.
bool AdvisedHugePages(const void* p);
// True when the kernel has transparent huge pages at all
// (/sys/kernel/mm/transparent_hugepage exists); without them madvise
// (MADV_HUGEPAGE) fails and no mapping is advised.
bool ThpInKernel();

// Polls `done` every millisecond until it is true or `limit` passes;
// returns its last value.
bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds limit);

}  // namespace vocabd::testing

#endif  // VOCABD_TESTS_TEST_UTIL_H_
