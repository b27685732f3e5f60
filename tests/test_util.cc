#include "tests/test_util.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

namespace vocabd::testing {

std::string SharedModelsDir() { return VOCABD_SHARED_MODELS_DIR; }
bool ThpInKernel() {
  return std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled").good();
}

bool AdvisedHugePages(const void* p) {
  std::ifstream in("/proc/self/smaps");
  const auto addr = reinterpret_cast<uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    // A mapping's header: "start-end perms offset dev inode [path]".
    const size_t dash = line.find('-');
    const size_t space = line.find(' ');
    if (dash != std::string::npos && space != std::string::npos && dash < space &&
        line.find(':') > space) {
      const uintptr_t start = std::stoull(line.substr(0, dash), nullptr, 16);
      const uintptr_t end = std::stoull(line.substr(dash + 1, space - dash - 1), nullptr, 16);
      inside = addr >= start && addr < end;
      continue;
    }
    if (inside && line.rfind("VmFlags:", 0) == 0) {
      return (line + " ").find(" hg ") != std::string::npos;
    }
  }
  return false;
}

int64_t VmRssBytes(int pid) {
  std::ifstream in(pid == 0 ? std::string("/proc/self/status")
                            : "/proc/" + std::to_string(pid) + "/status");
  std::string key;
  while (in >> key) {
    if (key == "VmRSS:") {
      int64_t kb = 0;
      in >> kb;
      return kb * 1024;
    }
    std::string rest;
    std::getline(in, rest);
  }
  return -1;
}

std::string SourceDir() { return VOCABD_SOURCE_DIR; }
std::string BinaryDir() { return VOCABD_BINARY_DIR; }
std::string Stories260KBin() { return SourceDir() + "/models/stories260K/stories260K.bin"; }
std::string Stories260KHfDir() { return SourceDir() + "/models/stories260K-hf"; }

std::string ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ADD_FAILURE() << "cannot read " << path;
    return "";
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::pair<int, std::string> RunCommand(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return {-1, ""};
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

nlohmann::json ReadGolden(const std::string& name) {
  const std::string path = SourceDir() + "/tests/golden/" + name;
  std::string text = ReadFileBytes(path);
  if (text.empty()) throw std::runtime_error("missing golden file " + path);
  return nlohmann::json::parse(text);
}

namespace {

// The directories MakeTempDir created in this process. They are removed when
// the process exits normally: a test binary that ran its whole suite leaves
// nothing in /tmp (some directories hold 256 MB checkpoints). Kept when a test
// failed, for its logs, or when VOCABD_KEEP_TEST_DIRS is set; never removed by
// a forked child (a death test), which shares the parent's list.
class TempDirs {
 public:
  ~TempDirs() {
    if (getpid() != owner_ || dirs_.empty()) return;
    const ::testing::UnitTest* unit = ::testing::UnitTest::GetInstance();
    if (std::getenv("VOCABD_KEEP_TEST_DIRS") != nullptr || unit->Failed()) {
      std::fprintf(stderr, "kept %zu test directories, e.g. %s\n", dirs_.size(),
                   dirs_.front().c_str());
      return;
    }
    for (const std::string& dir : dirs_) {
      std::error_code ignored;
      std::filesystem::remove_all(dir, ignored);
    }
  }
  void Add(std::string dir) {
    std::lock_guard<std::mutex> lock(mu_);
    dirs_.push_back(std::move(dir));
  }

 private:
  const pid_t owner_ = getpid();
  std::mutex mu_;
  std::vector<std::string> dirs_;
};

TempDirs& CreatedTempDirs() {
  static TempDirs dirs;
  return dirs;
}

}  // namespace

std::string MakeTempDir() {
  TempDirs& created = CreatedTempDirs();  // constructed first: destroyed last
  std::string tmpl = "/tmp/vocabd_test_XXXXXX";
  char* dir = mkdtemp(tmpl.data());
  if (dir == nullptr) {
    ADD_FAILURE() << "mkdtemp failed";
    return "/tmp";
  }
  created.Add(dir);
  return dir;
}

const std::string& ProcessTempDir() {
  static const std::string dir = MakeTempDir();
  return dir;
}

std::vector<float> RandomNormal(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

std::vector<float> ToFloats(const nlohmann::json& array) {
  std::vector<float> out;
  out.reserve(array.size());
  for (const auto& v : array) out.push_back(v.get<float>());
  return out;
}

std::vector<double> ToDoubles(const nlohmann::json& array) {
  std::vector<double> out;
  out.reserve(array.size());
  for (const auto& v : array) out.push_back(v.get<double>());
  return out;
}

bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return done();
}

}  // namespace vocabd::testing
