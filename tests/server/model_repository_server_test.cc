// LoadModel / UnloadModel / ListModels against the real server with a
// model repository: names only, hostile files refused with the file and
// rule named while the already-loaded models keep serving unchanged, a
// failed reload keeps the old version, unload, default model.
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/metrics.h"
#include "server/server.h"
#include "tests/server/prometheus_text.h"
#include "tests/test_util.h"
#include "vocabd/v1/embedding.grpc.pb.h"
#include "vocabd/v1/model.grpc.pb.h"

namespace vocabd {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

class RepositoryServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new std::string(testing::MakeTempDir() + "/repo");
    fs::create_directories(*root_);
    fs::copy(testing::Stories260KHfDir(), *root_ + "/hf");
    fs::create_directories(*root_ + "/gguf");
    fs::copy_file(testing::SharedModelsDir() + "/stories260K/stories260K.gguf",
                  *root_ + "/gguf/gguf.gguf");
    fs::create_directory_symlink(testing::Stories260KHfDir(), *root_ + "/escape");
    const std::string hostile = testing::SourceDir() + "/tests/data/hostile";
    for (const auto& entry : fs::directory_iterator(hostile)) {
      if (entry.is_directory()) {
        fs::copy(entry.path(), *root_ + "/" + entry.path().filename().string());
      }
    }
    VocabdServer::Options options;
    options.listen_address = "127.0.0.1:0";
    options.models = {{"default", testing::Stories260KBin()}};
    options.model_repository = *root_;
    auto server = VocabdServer::Create(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
    auto channel = grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials());
    models_ = v1::ModelService::NewStub(channel).release();
    embed_ = v1::EmbeddingService::NewStub(channel).release();
  }
  static void TearDownTestSuite() {
    delete models_;
    delete embed_;
    server_->Shutdown();
    delete server_;
    delete root_;
  }

  static grpc::Status Load(const std::string& name, v1::ModelInfo* info = nullptr) {
    grpc::ClientContext ctx;
    v1::LoadModelRequest req;
    req.set_name(name);
    v1::ModelInfo out;
    return models_->LoadModel(&ctx, req, info != nullptr ? info : &out);
  }
  static grpc::Status Unload(const std::string& name) {
    grpc::ClientContext ctx;
    v1::UnloadModelRequest req;
    req.set_name(name);
    v1::UnloadModelResponse out;
    return models_->UnloadModel(&ctx, req, &out);
  }
  static v1::ListModelsResponse List() {
    grpc::ClientContext ctx;
    v1::ListModelsResponse out;
    EXPECT_TRUE(models_->ListModels(&ctx, v1::ListModelsRequest(), &out).ok());
    return out;
  }
  static const v1::ModelInfo* Find(const v1::ListModelsResponse& list, const std::string& name) {
    for (const auto& m : list.models()) {
      if (m.name() == name) return &m;
    }
    return nullptr;
  }
  // Embeds ids 1, 403, 407 with `model` ("" = default); returns the bytes.
  static grpc::Status EmbedBytes(const std::string& model, std::string* data) {
    grpc::ClientContext ctx;
    v1::EmbedRequest req;
    req.set_model(model);
    auto* seq = req.add_sequences();
    for (int id : {1, 403, 407}) seq->add_token_ids(id);
    v1::EmbedResponse resp;
    grpc::Status s = embed_->Embed(&ctx, req, &resp);
    if (s.ok()) *data = resp.embeddings().data();
    return s;
  }

  static std::string* root_;
  static VocabdServer* server_;
  static v1::ModelService::Stub* models_;
  static v1::EmbeddingService::Stub* embed_;
};

std::string* RepositoryServerTest::root_ = nullptr;
VocabdServer* RepositoryServerTest::server_ = nullptr;
v1::ModelService::Stub* RepositoryServerTest::models_ = nullptr;
v1::EmbeddingService::Stub* RepositoryServerTest::embed_ = nullptr;

TEST_F(RepositoryServerTest, LoadByNameServesAndListsReady) {
  v1::ModelInfo info;
  grpc::Status s = Load("hf", &info);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(info.name(), "hf");
  EXPECT_EQ(info.state(), v1::READY);
  EXPECT_EQ(info.vocab_size(), 512);
  EXPECT_FALSE(info.is_default());
  std::string from_hf, from_default;
  ASSERT_TRUE(EmbedBytes("hf", &from_hf).ok());
  ASSERT_TRUE(EmbedBytes("", &from_default).ok());  // no name -> default model
  EXPECT_EQ(from_hf, from_default);                  // same weights, both forms
  s = Load("gguf", &info);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(info.source_files(0).format(), "gguf");
  EXPECT_TRUE(info.source_files(0).memory_mapped());
  // Repository loads hash in the background: poll GetModel until done.
  for (int i = 0; i < 500 && info.source_files(0).sha256_pending(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    grpc::ClientContext ctx;
    v1::GetModelRequest req;
    req.set_name("gguf");
    ASSERT_TRUE(models_->GetModel(&ctx, req, &info).ok());
  }
  EXPECT_FALSE(info.source_files(0).sha256_pending());
  EXPECT_EQ(info.source_files(0).sha256(),
            "270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d");
  const v1::ListModelsResponse list = List();
  ASSERT_NE(Find(list, "hf"), nullptr);
  EXPECT_EQ(Find(list, "hf")->state(), v1::READY);
  EXPECT_TRUE(Find(list, "default")->is_default());
}

// ListModels shows every repository subfolder: unloaded ones as AVAILABLE
// with no metadata and a reason saying how to load them (a repository whose
// models are not loaded yet is not an empty list).
TEST_F(RepositoryServerTest, ListModelsShowsUnloadedSubfoldersAsAvailable) {
  const v1::ListModelsResponse list = List();
  int available = 0;
  for (const std::string name : {"gguf_bad_magic", "st_unknown_dtype", "gguf"}) {
    const v1::ModelInfo* m = Find(list, name);
    ASSERT_NE(m, nullptr) << name;
    if (m->state() == v1::FAILED || m->state() == v1::READY) continue;  // loaded by another test
    EXPECT_EQ(m->state(), v1::AVAILABLE) << name;
    EXPECT_EQ(m->vocab_size(), 0) << name;
    EXPECT_THAT(m->state_reason(), HasSubstr("LoadModel loads it"));
    ++available;
  }
  EXPECT_GT(available, 0) << "every checked folder was already loaded";
  EXPECT_EQ(Find(list, "default")->state(), v1::READY);
  int defaults = 0;
  for (const auto& m : list.models()) defaults += m.is_default() ? 1 : 0;
  EXPECT_EQ(defaults, 1);
}

TEST_F(RepositoryServerTest, NamesOnlyNoEscapes) {
  for (const std::string bad : {"..", "../repo", "/etc", "hf/../hf", ""}) {
    grpc::Status s = Load(bad);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad << ": " << s.error_message();
  }
  grpc::Status s = Load("escape");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("outside the model repository"));
  s = Load("no_such_model");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(RepositoryServerTest, HostileFilesRefusedOthersUnchanged) {
  std::string before;
  ASSERT_TRUE(EmbedBytes("", &before).ok());
  std::ifstream in(testing::SourceDir() + "/tests/data/hostile/manifest.json");
  const nlohmann::json manifest = nlohmann::json::parse(in);
  ASSERT_EQ(manifest.size(), 51u);
  for (const auto& c : manifest) {
    const std::string name = c["case"];
    SCOPED_TRACE(name);
    grpc::Status s = Load(name);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error_code(), c["code"] == "FAILED_PRECONDITION"
                                  ? grpc::StatusCode::FAILED_PRECONDITION
                                  : grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(s.error_message(), HasSubstr(name + "/" + c["file"].get<std::string>()));
    for (const auto& want : c["expect"]) {
      EXPECT_THAT(s.error_message(), HasSubstr(want.get<std::string>()));
    }
    // The server keeps serving, with the same results.
    std::string after;
    ASSERT_TRUE(EmbedBytes("", &after).ok());
    ASSERT_EQ(after, before);
  }
  const v1::ListModelsResponse list = List();
  const v1::ModelInfo* failed = Find(list, "gguf_bad_magic");
  ASSERT_NE(failed, nullptr);
  EXPECT_EQ(failed->state(), v1::FAILED);
  EXPECT_THAT(failed->state_reason(), HasSubstr("bad magic"));
  // A request naming a FAILED model says why.
  std::string unused;
  grpc::Status s = EmbedBytes("gguf_bad_magic", &unused);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("failed to load"));
  EXPECT_EQ(Find(list, "default")->state(), v1::READY);
}

TEST_F(RepositoryServerTest, FailedReloadKeepsPreviousAndUnloadRemoves) {
  ASSERT_TRUE(Load("hf").ok());
  std::string before;
  ASSERT_TRUE(EmbedBytes("hf", &before).ok());
  const std::string config = *root_ + "/hf/config.json";
  const std::string saved = testing::ReadFileBytes(config);
  std::ofstream(config, std::ios::trunc) << "{\"model_type\": \"llama\"}";
  grpc::Status s = Load("hf");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("hf/config.json"));
  EXPECT_THAT(s.error_message(), HasSubstr("\"vocab_size\" is required but missing"));
  std::ofstream(config, std::ios::trunc) << saved;
  std::string after;
  ASSERT_TRUE(EmbedBytes("hf", &after).ok());
  EXPECT_EQ(after, before);
  EXPECT_EQ(Find(List(), "hf")->state(), v1::READY);

  ASSERT_TRUE(Unload("hf").ok());
  EXPECT_EQ(EmbedBytes("hf", &after).error_code(), grpc::StatusCode::NOT_FOUND);
  // Unloaded, the folder is listed again as loadable (AVAILABLE).
  ASSERT_NE(Find(List(), "hf"), nullptr);
  EXPECT_EQ(Find(List(), "hf")->state(), v1::AVAILABLE);
  EXPECT_EQ(Unload("hf").error_code(), grpc::StatusCode::NOT_FOUND);
  ASSERT_TRUE(EmbedBytes("", &after).ok());  // the default model still serves
}

// model_resident_bytes and the lm_head queue follow LoadModel / UnloadModel
// (sampled from the registry at scrape time).
TEST_F(RepositoryServerTest, ModelGaugesFollowLoadAndUnload) {
  auto resident = [](const std::string& model) {
    return testing::PrometheusText(server_->metrics().Render())
        .Value("vocabd_model_resident_bytes", {{"model", model}});
  };
  auto lm_head_queue = [](const std::string& model) {
    return testing::PrometheusText(server_->metrics().Render())
        .Value("vocabd_queue_depth", {{"queue", "lm_head:" + model}});
  };
  EXPECT_THAT(resident("default"), ::testing::Optional(::testing::Gt(0.0)));  // --model
  EXPECT_EQ(resident("hf"), std::nullopt);
  ASSERT_TRUE(Load("hf").ok());
  EXPECT_EQ(resident("hf"), resident("default"));  // same weights in another form
  EXPECT_THAT(lm_head_queue("hf"), ::testing::Optional(0.0));
  ASSERT_TRUE(Load("hf").ok());  // reload: still one series
  EXPECT_EQ(resident("hf"), resident("default"));
  ASSERT_TRUE(Unload("hf").ok());
  EXPECT_EQ(resident("hf"), std::nullopt);
  EXPECT_EQ(lm_head_queue("hf"), std::nullopt);
  EXPECT_THAT(resident("default"), ::testing::Optional(::testing::Gt(0.0)));
}

}  // namespace
}  // namespace vocabd
