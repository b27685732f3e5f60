// vocabctl tokenize / detokenize / vocab / embed --text / score with token
// text, run as the real binary against an in-process server whose
// stories260K has its own tok512.bin tokenizer (the ids are SentencePiece's).
#include <iterator>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/server.h"
#include "tests/test_util.h"

namespace vocabd::testing {
namespace {

using ::testing::HasSubstr;

class VocabctlTokenizeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    VocabdServer::Options options;
    options.listen_address = "127.0.0.1:0";
    options.models = {{"stories260K", Stories260KBin()},
                      {"notok", SourceDir() + "/tests/data/forms/gpt2"}};
    auto server = VocabdServer::Create(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server).release();
  }
  static void TearDownTestSuite() {
    server_->Shutdown();
    delete server_;
  }
  // (exit code, stdout) of `vocabctl --target ... <args>`.
  static std::pair<int, std::string> Vocabctl(const std::string& args) {
    return RunCommand(BinaryDir() + "/client/vocabctl --target " + server_->target() + " " + args +
                      " 2>&1");
  }
  static VocabdServer* server_;
};
VocabdServer* VocabctlTokenizeTest::server_ = nullptr;

TEST_F(VocabctlTokenizeTest, TokenizeTableAndJson) {
  auto [code, out] = Vocabctl("tokenize 'Once upon a time'");
  ASSERT_EQ(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("5 tokens: 1,403,407,261,378"));
  EXPECT_THAT(out, HasSubstr("\" Once\""));
  EXPECT_THAT(out, HasSubstr("0..4"));  // " Once" came from bytes 0..4
  std::tie(code, out) = Vocabctl("--json tokenize --no-special 'Once upon' 'a'");
  ASSERT_EQ(code, 0) << out;
  const nlohmann::json j = nlohmann::json::parse(out);
  EXPECT_EQ(j["results"][0]["ids"], nlohmann::json({403, 407}));
  EXPECT_EQ(j["results"][0]["tokens"][1]["text"], " upon");
  EXPECT_EQ(j["results"][0]["tokens"][1]["offsets"], nlohmann::json({4, 9}));
  std::tie(code, out) = Vocabctl("tokenize --ids-only 'Once upon'");
  EXPECT_EQ(out, "1,403,407\n");
}

TEST_F(VocabctlTokenizeTest, DetokenizeAndIncremental) {
  auto [code, out] = Vocabctl("detokenize --skip-special 1,403,407,261,378 403");
  ASSERT_EQ(code, 0) << out;
  EXPECT_EQ(out, "Once upon a time\nOnce\n");
  // F0 9F 90 (ids 3 + byte: 243, 162, 147) of U+1F431: held back, then B1 (180)
  // completed.
  std::tie(code, out) = Vocabctl("--json detokenize --previous 403,243 162,147");
  ASSERT_EQ(code, 0) << out;
  nlohmann::json j = nlohmann::json::parse(out);
  EXPECT_EQ(j["results"][0]["text"], "");
  EXPECT_EQ(j["results"][0]["held_back_bytes"], 3);
  std::tie(code, out) = Vocabctl("--json detokenize --previous 403,243,162,147 180");
  j = nlohmann::json::parse(out);
  EXPECT_EQ(j["results"][0]["text"], "\xF0\x9F\x90\xB1");
  // The stream ends after 162, 147: the 3 held-back bytes are one U+FFFD.
  std::tie(code, out) = Vocabctl("--json detokenize --end-of-stream --previous 403,243 162,147");
  ASSERT_EQ(code, 0) << out;
  j = nlohmann::json::parse(out);
  EXPECT_EQ(j["results"][0]["text"], "\xEF\xBF\xBD");
  EXPECT_EQ(j["results"][0]["held_back_bytes"], 0);
  // The last call may bring no new ids: it flushes the held-back bytes.
  std::tie(code, out) = Vocabctl("--json detokenize --end-of-stream --previous 403,243,162,147");
  ASSERT_EQ(code, 0) << out;
  j = nlohmann::json::parse(out);
  EXPECT_EQ(j["results"][0]["text"], "\xEF\xBF\xBD");
  EXPECT_EQ(j["results"][0]["held_back_bytes"], 0);
  // Without --end-of-stream the ids are required (a usage error, exit 2).
  std::tie(code, out) = Vocabctl("detokenize --previous 403,243");
  EXPECT_EQ(code, 2);
  EXPECT_THAT(out, HasSubstr("only --end-of-stream"));
  std::tie(code, out) = Vocabctl("detokenize 1,512");
  EXPECT_EQ(code, 1);
  EXPECT_THAT(out, HasSubstr("INVALID_ARGUMENT: sequences[0].ids[1] = 512 is outside [0, 512)"));
}

TEST_F(VocabctlTokenizeTest, VocabPage) {
  auto [code, out] = Vocabctl("vocab --start 12 --count 2");
  ASSERT_EQ(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("\"<0x0A>\""));
  EXPECT_THAT(out, HasSubstr("\"\\n\""));
  EXPECT_THAT(out, HasSubstr("BYTE"));
}

TEST_F(VocabctlTokenizeTest, EmbedText) {
  auto [code, out] = Vocabctl("--json embed --text 'Once upon'");
  ASSERT_EQ(code, 0) << out;
  const nlohmann::json j = nlohmann::json::parse(out);
  EXPECT_EQ(j["token_ids"], nlohmann::json({1, 403, 407}));
  EXPECT_EQ(j["shape"], nlohmann::json({3, 64}));
  std::tie(code, out) = Vocabctl("embed --text a --ids 1");
  EXPECT_EQ(code, 2) << out;
  std::tie(code, out) = Vocabctl("--model notok embed --text a");
  EXPECT_EQ(code, 1);
  EXPECT_THAT(out, HasSubstr("FAILED_PRECONDITION: model 'notok' has no tokenizer"));
}

TEST_F(VocabctlTokenizeTest, ScoreShowsTokenText) {
  auto [code, out] = Vocabctl("score --from-ids 1,403 --targets 403,407 --top-k 2 --candidates 261");
  ASSERT_EQ(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("403 \" Once\""));
  EXPECT_THAT(out, HasSubstr("407 \" upon\""));
  EXPECT_THAT(out, HasSubstr("261 \" a\":"));
  std::tie(code, out) = Vocabctl("--json score --from-ids 1,403 --targets 403,407 --top-k 2");
  ASSERT_EQ(code, 0) << out;
  const nlohmann::json j = nlohmann::json::parse(out);
  EXPECT_EQ(j["rows"][1]["target_text"], " upon");
  EXPECT_TRUE(j["rows"][0]["top_k"][0].contains("text"));
  // No tokenizer: plain ids, no error.
  std::tie(code, out) = Vocabctl("--model notok score --random 1 --top-k 2");
  ASSERT_EQ(code, 0) << out;
  EXPECT_THAT(out, ::testing::Not(HasSubstr("\"")));
}

TEST_F(VocabctlTokenizeTest, ModelsListsEachModelsTokenizer) {
  auto [code, out] = Vocabctl("models");
  ASSERT_EQ(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("TOKENIZER"));
  // Columns: NAME STATE ARCH VOCAB HIDDEN DTYPE TIED ROPE HEAD TOKENIZER RESIDENT.
  std::map<std::string, std::string> tokenizer;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream cells(line);
    std::vector<std::string> row{std::istream_iterator<std::string>(cells), {}};
    if (row.size() >= 10) tokenizer[row[0]] = row[9];
  }
  EXPECT_EQ(tokenizer["stories260K*"], "sentencepiece") << out;
  EXPECT_EQ(tokenizer["notok"], "none") << out;
}

}  // namespace
}  // namespace vocabd::testing
