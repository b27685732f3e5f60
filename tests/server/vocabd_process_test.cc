// Runs the real `vocabd` and `vocabctl` binaries: start on port 0, call it
// with vocabctl, stop it with SIGTERM and expect a clean exit.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "lib/checkpoint/checkpoint.h"
#include "tests/test_util.h"

namespace vocabd::testing {
namespace {

class VocabdProcessTest : public ::testing::Test {
 protected:
  // Flags after --listen; the fixture below adds --model-repository.
  virtual std::vector<std::string> ServerFlags() {
    return {"--model=stories260K=" + Stories260KBin(),
            "--model=stories260K-hf=" + Stories260KHfDir(), "--log-level", "info"};
  }
  void SetUp() override {
    std::vector<std::string> args = {"vocabd", "--listen", "127.0.0.1:0"};
    for (std::string& flag : ServerFlags()) args.push_back(std::move(flag));
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    log_path_ = MakeTempDir() + "/vocabd.log";
    pid_ = fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      FILE* log = freopen(log_path_.c_str(), "w", stdout);
      if (log == nullptr) _exit(100);
      dup2(fileno(stdout), fileno(stderr));
      const std::string vocabd = BinaryDir() + "/server/vocabd";
      execv(vocabd.c_str(), argv.data());
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

// The Position commands print the server's tables; values checked against
// the formulas in proto/vocabd/v1/position.proto.
TEST_F(VocabdProcessTest, VocabctlPositionCommands) {
  // ALiBi, 8 heads: 2^-1 .. 2^-8 (explicit, and the model's 8 heads).
  for (const std::string heads : {"--heads 8", ""}) {
    auto [code, out] = RunCommand(Vocabctl("--json alibi " + heads));
    ASSERT_EQ(code, 0) << out;
    const std::vector<float> slopes = ToFloats(nlohmann::json::parse(out)["slopes"]);
    ASSERT_EQ(slopes.size(), 8u) << heads;
    for (int h = 0; h < 8; ++h) EXPECT_EQ(slopes[h], std::ldexp(1.0f, -(h + 1))) << h;
  }
  {
    auto [code, out] = RunCommand(Vocabctl("alibi --heads 8"));
    ASSERT_EQ(code, 0) << out;
    EXPECT_THAT(out, ::testing::HasSubstr("head   0: 0.5\n"));
    EXPECT_THAT(out, ::testing::HasSubstr("head   7: 0.00390625\n"));
  }
  {
    // One head: slope 2^-8; causal bias, queries at key positions 1 and 2.
    auto [code, out] = RunCommand(Vocabctl("--json alibi --heads 1 --bias --q-len 2 --k-len 3"));
    ASSERT_EQ(code, 0) << out;
    const nlohmann::json j = nlohmann::json::parse(out);
    EXPECT_EQ(j["bias_shape"], nlohmann::json({1, 2, 3}));
    const float s = 0.00390625f;
    EXPECT_EQ(j["bias"][0][0][0].get<float>(), -s);
    EXPECT_EQ(j["bias"][0][0][1].get<float>(), 0.0f);
    EXPECT_TRUE(j["bias"][0][0][2].is_null());  // -inf prints as null
    EXPECT_EQ(j["bias"][0][1], nlohmann::json({-2 * s, -s, 0.0f}));
  }

  // Sinusoidal: row 0 is sin 0, cos 0 pairs; row 1 starts sin(1), cos(1).
  {
    auto [code, out] = RunCommand(Vocabctl("--json sinusoidal --positions 3 --dim 8"));
    ASSERT_EQ(code, 0) << out;
    const nlohmann::json j = nlohmann::json::parse(out);
    EXPECT_EQ(j["shape"], nlohmann::json({3, 8}));
    EXPECT_EQ(ToFloats(j["table"][0]), std::vector<float>({0, 1, 0, 1, 0, 1, 0, 1}));
    EXPECT_EQ(j["table"][1][0].get<float>(), static_cast<float>(std::sin(1.0)));
    EXPECT_EQ(j["table"][1][1].get<float>(), static_cast<float>(std::cos(1.0)));
    // PE[p, 2i] = sin(p / 10000^(2i/d)): i = 1 at p = 2.
    EXPECT_EQ(j["table"][2][2].get<float>(), static_cast<float>(std::sin(2.0 / 10.0)));
  }
  {
    auto [code, out] =
        RunCommand(Vocabctl("--json sinusoidal --positions 2 --dim 8 --layout half-split"));
    ASSERT_EQ(code, 0) << out;
    const nlohmann::json j = nlohmann::json::parse(out);
    EXPECT_EQ(ToFloats(j["table"][0]), std::vector<float>({0, 0, 0, 0, 1, 1, 1, 1}));
    EXPECT_EQ(j["table"][1][0].get<float>(), static_cast<float>(std::sin(1.0)));
    EXPECT_EQ(j["table"][1][4].get<float>(), static_cast<float>(std::cos(1.0)));
  }
  {
    auto [code, out] = RunCommand(Vocabctl("sinusoidal --positions 2 --dim 7 2>&1"));
    EXPECT_EQ(code, 1) << out;
    EXPECT_THAT(out, ::testing::HasSubstr("error: INVALID_ARGUMENT"));
  }

  // RoPE cache of stories260K (theta 10000, head_dim 8): inv_freq
  // 10000^(-2i/8) = 1, 0.1, 0.01, 0.001; positions 2.. with float64 angles.
  {
    auto [code, out] = RunCommand(
        Vocabctl("--json rope-cache --positions 3 --start 2 --high-precision"));
    ASSERT_EQ(code, 0) << out;
    const nlohmann::json j = nlohmann::json::parse(out);
    EXPECT_EQ(j["attention_scaling"].get<double>(), 1.0);
    const std::vector<float> inv_freq = ToFloats(j["inv_freq"]);
    ASSERT_EQ(inv_freq.size(), 4u);
    EXPECT_EQ(inv_freq[0], 1.0f);
    EXPECT_FLOAT_EQ(inv_freq[1], 0.1f);
    EXPECT_FLOAT_EQ(inv_freq[2], 0.01f);
    EXPECT_FLOAT_EQ(inv_freq[3], 0.001f);
    ASSERT_EQ(j["cos"].size(), 3u);
    ASSERT_EQ(j["cos"][0].size(), 4u);
    EXPECT_EQ(j["cos"][0][0].get<float>(), static_cast<float>(std::cos(2.0)));
    EXPECT_EQ(j["sin"][0][0].get<float>(), static_cast<float>(std::sin(2.0)));
    EXPECT_EQ(j["cos"][2][0].get<float>(), static_cast<float>(std::cos(4.0)));
    EXPECT_FLOAT_EQ(j["sin"][2][1].get<float>(), static_cast<float>(std::sin(0.4)));
  }
  {
    auto [code, out] = RunCommand(Vocabctl("rope-cache --positions 2"));
    ASSERT_EQ(code, 0) << out;
    EXPECT_THAT(out, ::testing::HasSubstr("rope: theta 10000, rotary_dim 8"));
    EXPECT_THAT(out, ::testing::HasSubstr("inv_freq, first 4 of 4:    1.00000    0.10000"));
  }
  {
    auto [code, out] = RunCommand(Vocabctl("rope-cache --positions 1 --start 600 2>&1"));
    EXPECT_EQ(code, 1) << out;
    EXPECT_THAT(out, ::testing::HasSubstr("error: INVALID_ARGUMENT"));
  }
}

// embed-stream sends one request per --ids on one stream and answers each
// exactly as `embed` answers the same ids alone; a bad id ends the stream
// naming the request.
TEST_F(VocabdProcessTest, VocabctlEmbedStreamMatchesEmbed) {
  auto [code, out] =
      RunCommand(Vocabctl("--json embed-stream --ids 1,403,407 --ids 5 --dtype bf16"));
  ASSERT_EQ(code, 0) << out;
  const nlohmann::json stream = nlohmann::json::parse(out)["responses"];
  ASSERT_EQ(stream.size(), 2u) << out;
  const std::vector<std::string> ids = {"1,403,407", "5"};
  for (size_t i = 0; i < ids.size(); ++i) {
    auto [embed_code, embed_out] = RunCommand(Vocabctl("--json embed --dtype bf16 --ids " + ids[i]));
    ASSERT_EQ(embed_code, 0) << embed_out;
    const nlohmann::json alone = nlohmann::json::parse(embed_out);
    EXPECT_EQ(stream[i]["shape"], alone["shape"]);
    EXPECT_EQ(stream[i]["dtype"], "BF16");
    EXPECT_EQ(stream[i]["embeddings"], alone["embeddings"]) << i;
  }
  auto [text_code, text] = RunCommand(Vocabctl("embed-stream --ids 1,403 --ids 5 --show 2"));
  ASSERT_EQ(text_code, 0) << text;
  EXPECT_THAT(text, ::testing::HasSubstr("response 1 (--ids 5):\nmodel: stories260K"));
  auto [bad_code, bad_out] = RunCommand(Vocabctl("embed-stream --ids 1 --ids 5,9999 2>&1"));
  EXPECT_EQ(bad_code, 1) << bad_out;
  EXPECT_THAT(bad_out, ::testing::HasSubstr("INVALID_ARGUMENT: requests[1]: "));
}

// score-stream sends one request per --from-ids on one stream and answers
// each exactly as `score` answers the same request alone.
TEST_F(VocabdProcessTest, VocabctlScoreStreamMatchesScore) {
  const std::vector<std::pair<std::string, std::string>> groups = {
      {"1,403,407", "403,407,261"}, {"5,6", "6,7"}};
  auto [code, out] = RunCommand(Vocabctl(
      "--json score-stream --from-ids 1,403,407 --targets 403,407,261 --from-ids 5,6 "
      "--targets 6,7 --top-k 2"));
  ASSERT_EQ(code, 0) << out;
  const nlohmann::json stream = nlohmann::json::parse(out)["responses"];
  ASSERT_EQ(stream.size(), 2u) << out;
  for (size_t i = 0; i < groups.size(); ++i) {
    auto [score_code, score_out] = RunCommand(Vocabctl("--json score --from-ids " +
                                                       groups[i].first + " --targets " +
                                                       groups[i].second + " --top-k 2"));
    ASSERT_EQ(score_code, 0) << score_out;
    const nlohmann::json alone = nlohmann::json::parse(score_out);
    ASSERT_EQ(stream[i]["rows"].size(), alone["rows"].size()) << i;
    EXPECT_EQ(stream[i]["num_targets"], alone["num_targets"]);
    for (size_t r = 0; r < alone["rows"].size(); ++r) {
      EXPECT_EQ(stream[i]["rows"][r]["target_id"], alone["rows"][r]["target_id"]);
      // The stream's requests may share one head call with each other
      // (dynamic batching): on a CPU whose head runs oneDNN for these rows
      // (no AVX-512) the row count changes the summation order, so the
      // values agree to float rounding, not bit for bit.
      const float alone_logprob = alone["rows"][r]["target_logprob"].get<float>();
      EXPECT_NEAR(stream[i]["rows"][r]["target_logprob"].get<float>(), alone_logprob,
                  2e-5 * std::max(1.0f, std::fabs(alone_logprob)))
          << "request " << i << " row " << r;
      EXPECT_EQ(stream[i]["rows"][r]["target_rank"], alone["rows"][r]["target_rank"]);
      EXPECT_EQ(stream[i]["rows"][r]["top_k"][0]["id"], alone["rows"][r]["top_k"][0]["id"]);
    }
  }
  {
    auto [text_code, text] = RunCommand(
        Vocabctl("score-stream --from-ids 1,403 --targets 403,407 --from-ids 5 --targets 6"));
    ASSERT_EQ(text_code, 0) << text;
    EXPECT_THAT(text, ::testing::HasSubstr("response 0 (--from-ids 1,403):\nmodel: stories260K"));
    EXPECT_THAT(text, ::testing::HasSubstr("response 1 (--from-ids 5):\nmodel: stories260K"));
    EXPECT_THAT(text, ::testing::HasSubstr("over 2 targets"));
  }
  // The second request fails: the stream ends with its status.
  auto [bad_code, bad_out] = RunCommand(
      Vocabctl("score-stream --from-ids 1,403 --targets 403,407 --from-ids 5 --targets 9999 2>&1"));
  EXPECT_EQ(bad_code, 1) << bad_out;
  EXPECT_THAT(bad_out, ::testing::HasSubstr("error: INVALID_ARGUMENT: requests[1]: "));
  EXPECT_THAT(bad_out, ::testing::HasSubstr("9999"));
}

TEST_F(VocabdProcessTest, VocabctlLoadNeedsARepositoryUnloadDoesNot) {
  auto [code, out] = RunCommand(Vocabctl("load hf 2>&1"));
  EXPECT_EQ(code, 1);
  EXPECT_THAT(out, ::testing::HasSubstr(
                       "error: FAILED_PRECONDITION: no model repository: start vocabd with "
                       "--model-repository DIR"));
  // Unload needs no repository: a --model model can be unloaded.
  auto [unload_code, unload_out] = RunCommand(Vocabctl("unload stories260K-hf 2>&1"));
  EXPECT_EQ(unload_code, 0) << unload_out;
  EXPECT_EQ(unload_out, "stories260K-hf: unloaded\n");
  auto [gone_code, gone_out] = RunCommand(Vocabctl("models stories260K-hf 2>&1"));
  EXPECT_EQ(gone_code, 1);
  EXPECT_THAT(gone_out, ::testing::HasSubstr("error: NOT_FOUND"));
  auto [again_code, again_out] = RunCommand(Vocabctl("unload stories260K-hf 2>&1"));
  EXPECT_EQ(again_code, 1);
  EXPECT_THAT(again_out, ::testing::HasSubstr("error: NOT_FOUND"));
}

// vocabd with a model repository holding a copy of stories260K-hf as "hf".
class VocabdRepositoryProcessTest : public VocabdProcessTest {
 protected:
  std::vector<std::string> ServerFlags() override {
    const std::string root = MakeTempDir() + "/repo";
    std::filesystem::create_directories(root);
    std::filesystem::copy(Stories260KHfDir(), root + "/hf");
    return {"--model=stories260K=" + Stories260KBin(), "--model-repository", root,
            "--log-level", "info"};
  }
};

TEST_F(VocabdRepositoryProcessTest, VocabctlLoadsAndUnloadsARepositoryModel) {
  auto [code, out] = RunCommand(Vocabctl("load hf"));
  ASSERT_EQ(code, 0) << out;
  EXPECT_THAT(out, ::testing::ContainsRegex("name: +hf"));
  EXPECT_THAT(out, ::testing::ContainsRegex("state: +READY"));
  EXPECT_THAT(out, ::testing::ContainsRegex("vocab_size: +512"));

  auto [json_code, json_out] = RunCommand(Vocabctl("--json models hf"));
  ASSERT_EQ(json_code, 0) << json_out;
  EXPECT_EQ(nlohmann::json::parse(json_out)["state"], "READY");
  auto [embed_code, embed_out] = RunCommand(Vocabctl("--model hf embed --ids 1,2"));
  EXPECT_EQ(embed_code, 0) << embed_out;

  auto [unload_code, unload_out] = RunCommand(Vocabctl("unload hf"));
  ASSERT_EQ(unload_code, 0) << unload_out;
  EXPECT_EQ(unload_out, "hf: unloaded\n");
  auto [gone_code, gone_out] = RunCommand(Vocabctl("models hf 2>&1"));
  EXPECT_EQ(gone_code, 1);
  EXPECT_THAT(gone_out, ::testing::HasSubstr("error: NOT_FOUND"));

  auto [bad_code, bad_out] = RunCommand(Vocabctl("load ../hf 2>&1"));
  EXPECT_EQ(bad_code, 1);
  EXPECT_THAT(bad_out, ::testing::HasSubstr(
                           "error: INVALID_ARGUMENT: name = \"../hf\" is not a model name"));
  auto [missing_code, missing_out] = RunCommand(Vocabctl("--json load nosuch 2>&1"));
  EXPECT_EQ(missing_code, 1);
  EXPECT_THAT(missing_out, ::testing::HasSubstr(
                               "error: NOT_FOUND: model 'nosuch' is not in the model repository"));
  EXPECT_THAT(missing_out, ::testing::HasSubstr("(available: [hf])"));

  // --json load prints the ModelInfo fields.
  auto [reload_code, reload_out] = RunCommand(Vocabctl("--json load hf"));
  ASSERT_EQ(reload_code, 0) << reload_out;
  const nlohmann::json reloaded = nlohmann::json::parse(reload_out);
  EXPECT_EQ(reloaded["name"], "hf");
  EXPECT_EQ(reloaded["state"], "READY");
  EXPECT_EQ(reloaded["hidden_size"], 64);
  EXPECT_EQ(Terminate(), 0);
}

}  // namespace
}  // namespace vocabd::testing
