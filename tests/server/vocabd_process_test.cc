// Runs the real `vocabd` and `vocabctl` binaries: start on port 0, call it
// with vocabctl, stop it with SIGTERM and expect a clean exit.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "lib/checkpoint.h"
#include "tests/test_util.h"

namespace vocabd::testing {
namespace {

class VocabdProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    log_path_ = MakeTempDir() + "/vocabd.log";
    pid_ = fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      FILE* log = freopen(log_path_.c_str(), "w", stdout);
      if (log == nullptr) _exit(100);
      dup2(fileno(stdout), fileno(stderr));
      const std::string vocabd = BinaryDir() + "/server/vocabd";
      const std::string bin = "--model=stories260K=" + Stories260KBin();
      const std::string hf = "--model=stories260K-hf=" + Stories260KHfDir();
      execl(vocabd.c_str(), "vocabd", "--listen", "127.0.0.1:0", bin.c_str(), hf.c_str(),
            "--log-level", "info", static_cast<char*>(nullptr));
      _exit(101);
    }
    // Wait for "listening on port N".
    const std::regex re("listening on port ([0-9]+)");
    for (int i = 0; i < 300 && port_ == 0; ++i) {
      std::smatch m;
      const std::string text = ReadFileOrEmpty(log_path_);
      if (std::regex_search(text, m, re)) port_ = std::stoi(m[1]);
      if (port_ == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_NE(port_, 0) << "vocabd did not start; log:\n" << ReadFileOrEmpty(log_path_);
  }
  void TearDown() override {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  std::string Vocabctl(const std::string& args) const {
    return BinaryDir() + "/client/vocabctl --target 127.0.0.1:" + std::to_string(port_) + " " +
           args;
  }
  // Sends SIGTERM; returns the exit status (or -1 on timeout).
  int Terminate() {
    kill(pid_, SIGTERM);
    for (int i = 0; i < 200; ++i) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return -1;
  }

  std::string log_path_;
  pid_t pid_ = -1;
  int port_ = 0;
};

TEST_F(VocabdProcessTest, ServesVocabctlAndDrainsOnSigterm) {
  auto [health_code, health] = RunCommand(Vocabctl("health"));
  EXPECT_EQ(health_code, 0);
  EXPECT_THAT(health, ::testing::HasSubstr("SERVING"));

  auto [code, out] = RunCommand(Vocabctl("--json embed --ids 1,403,407"));
  ASSERT_EQ(code, 0) << out;
  const nlohmann::json response = nlohmann::json::parse(out);
  ASSERT_EQ(response["embeddings"].size(), 3u);
  auto checkpoint = LoadCheckpoint(Stories260KBin());
  ASSERT_TRUE(checkpoint.ok());
  const float* table = (*checkpoint)->embedding().f32();
  const int64_t ids[] = {1, 403, 407};
  for (int t = 0; t < 3; ++t) {
    ASSERT_EQ(response["embeddings"][t].size(), 64u);
    for (int j = 0; j < 64; ++j) {
      EXPECT_EQ(response["embeddings"][t][j].get<float>(), table[ids[t] * 64 + j]);
    }
  }

  auto [bad_code, bad_out] = RunCommand(Vocabctl("embed --ids 1,9999 2>&1"));
  EXPECT_EQ(bad_code, 1);
  EXPECT_THAT(bad_out, ::testing::HasSubstr("INVALID_ARGUMENT"));
  EXPECT_THAT(bad_out, ::testing::HasSubstr("sequences[0].token_ids[1] = 9999"));

  // One model's detail shows how its head is served.
  auto [model_code, model_out] = RunCommand(Vocabctl("models stories260K"));
  ASSERT_EQ(model_code, 0) << model_out;
  EXPECT_THAT(model_out, ::testing::ContainsRegex("requested dtype: +auto"));
  EXPECT_THAT(model_out, ::testing::ContainsRegex("lm head kernels: +[^ ]"));
  EXPECT_THAT(model_out, ::testing::ContainsRegex("batching: +(max_batch_rows [0-9]+|off)"));

  EXPECT_EQ(Terminate(), 0);
  const std::string log = ReadFileOrEmpty(log_path_);
  EXPECT_THAT(log, ::testing::HasSubstr("received SIGTERM"));
  EXPECT_THAT(log, ::testing::HasSubstr("vocabd stopped"));
}

TEST_F(VocabdProcessTest, FailsToStartOnABadModelPath) {
  auto [code, out] = RunCommand(BinaryDir() + "/server/vocabd --listen 127.0.0.1:0 --model x=/nonexistent 2>&1");
  EXPECT_EQ(code, 1);
  EXPECT_THAT(out, ::testing::HasSubstr("/nonexistent"));
  EXPECT_EQ(Terminate(), 0);
}

}  // namespace
}  // namespace vocabd::testing
