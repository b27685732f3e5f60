// A model loaded from a --model-repository folder gets the tokenizer the same
// files get with --model FILE: NAME/NAME.bin finds the tok*.bin
// beside it (llama2.c), a GGUF-only folder under another name reads the
// GGUF's tokenizer.ggml.* metadata. Each repository model is compared with
// the same file served by --model: same ids, same pieces, for Tokenize and
// for Score's return_pieces.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "client/vocabd_client.h"
#include "proto/tensor_codec.h"
#include "server/server.h"
#include "tests/test_util.h"

namespace vocabd::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class RepositoryTokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string root = MakeTempDir() + "/repo";
    const std::string shared = SharedModelsDir();
    // Layout 1: NAME/NAME.bin + tok512.bin (llama2.c).
    fs::create_directories(root + "/stories260K");
    fs::copy_file(shared + "/stories260K/stories260K.bin", root + "/stories260K/stories260K.bin");
    fs::copy_file(shared + "/stories260K/tok512.bin", root + "/stories260K/tok512.bin");
    // Layout 2: a GGUF-only folder whose name is not the file's.
    fs::create_directories(root + "/tiny");
    fs::copy_file(shared + "/llama-2-tiny-random/llama-2-tiny-random.gguf",
                  root + "/tiny/llama-2-tiny-random.gguf");
    // Layout 3: NAME/NAME.gguf.
    fs::create_directories(root + "/s260gguf");
    fs::copy_file(shared + "/stories260K/stories260K.gguf", root + "/s260gguf/s260gguf.gguf");
    VocabdServer::Options options;
    options.listen_address = "127.0.0.1:0";
    options.models = {{"file_bin", shared + "/stories260K/stories260K.bin"},
                      {"file_tiny", shared + "/llama-2-tiny-random/llama-2-tiny-random.gguf"},
                      {"file_s260gguf", shared + "/stories260K/stories260K.gguf"}};
    options.model_repository = root;
    options.load_models = {"stories260K", "tiny", "s260gguf"};
    auto server = VocabdServer::Create(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server).release();
    VocabdClient::Options client_options;
    client_options.target = server_->target();
    client_ = std::move(*VocabdClient::Create(client_options)).release();
  }
  static void TearDownTestSuite() {
    delete client_;
    server_->Shutdown();
    delete server_;
  }

  static absl::StatusOr<v1::TokenizeResponse> Tokenize(const std::string& model) {
    v1::TokenizeRequest request;
    request.set_model(model);
    request.add_texts("Once upon a time, there was a little girl named Lily.");
    request.set_return_pieces(true);
    return client_->Tokenize(request);
  }

  static void ExpectSameAsFile(const std::string& repo_model, const std::string& file_model) {
    auto info = client_->GetModel(repo_model);
    ASSERT_TRUE(info.ok()) << info.status();
    auto file_info = client_->GetModel(file_model);
    ASSERT_TRUE(file_info.ok()) << file_info.status();
    EXPECT_EQ(info->tokenizer_missing_reason(), "");
    EXPECT_EQ(info->tokenizer().kind(), file_info->tokenizer().kind());
    EXPECT_FALSE(info->tokenizer().kind().empty());

    auto tokens = Tokenize(repo_model);
    ASSERT_TRUE(tokens.ok()) << tokens.status();
    auto file_tokens = Tokenize(file_model);
    ASSERT_TRUE(file_tokens.ok()) << file_tokens.status();
    ASSERT_EQ(tokens->results_size(), 1);
    EXPECT_GT(tokens->results(0).ids_size(), 3);
    EXPECT_EQ(tokens->results(0).SerializeAsString(), file_tokens->results(0).SerializeAsString());

    // Score with return_pieces (needs the tokenizer too).
    v1::ScoreRequest score;
    score.set_model(repo_model);
    const int64_t hidden = info->hidden_size();
    std::vector<float> h(static_cast<size_t>(2 * hidden), 0.25f);
    *score.mutable_hidden() = EncodeFloatTensor(h, {2, hidden});
    score.add_target_ids(1);
    score.add_target_ids(2);
    score.set_return_pieces(true);
    auto scored = client_->Score(score);
    ASSERT_TRUE(scored.ok()) << scored.status();
    score.set_model(file_model);
    auto file_scored = client_->Score(score);
    ASSERT_TRUE(file_scored.ok()) << file_scored.status();
    ASSERT_EQ(scored->rows_size(), 2);
    EXPECT_EQ(scored->rows(0).target_piece(), file_scored->rows(0).target_piece());
    EXPECT_FALSE(scored->rows(0).target_token_bytes().empty());
  }

  static VocabdServer* server_;
  static VocabdClient* client_;
};

VocabdServer* RepositoryTokenizerTest::server_ = nullptr;
VocabdClient* RepositoryTokenizerTest::client_ = nullptr;

TEST_F(RepositoryTokenizerTest, Llama2cFolderFindsTokBinBeside) {
  ExpectSameAsFile("stories260K", "file_bin");
}

TEST_F(RepositoryTokenizerTest, GgufOnlyFolderUnderAnotherNameReadsGgufMetadata) {
  ExpectSameAsFile("tiny", "file_tiny");
}

TEST_F(RepositoryTokenizerTest, NameDotGgufFolderReadsGgufMetadata) {
  ExpectSameAsFile("s260gguf", "file_s260gguf");
}

}  // namespace
}  // namespace vocabd::testing
