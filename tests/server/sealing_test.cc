// The sealed repository, against the real server (in-process, on
// 127.0.0.1:0): every file a load opens must resolve inside the repository
// root and be a regular file (a symlinked config.json / shard / .bin / .gguf
// out of the root and a FIFO shard are INVALID_ARGUMENT at once); a
// checkpoint truncated under its memory mapping is an error on the next
// call, never a SIGBUS, and LoadModel maps the replaced file; the overall
// health follows the default model. Each refusal asserts the status, the
// message, the time (well under a second) and the server's memory growth
// (VmRSS of this process, which runs the server).
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <thread>
#include <string>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "grpc/health/v1/health.grpc.pb.h"
#include "proto/tensor_codec.h"
#include "lib/serving/model_registry.h"
#include "lib/serving/model_repository.h"
#include "server/model_service.h"
#include "server/server.h"
#include "server/service_context.h"
#include "tests/test_util.h"
#include "vocabd/v1/embedding.grpc.pb.h"
#include "vocabd/v1/model.grpc.pb.h"
#include "vocabd/v1/scoring.grpc.pb.h"

namespace vocabd {
namespace {

using ::testing::HasSubstr;
using HealthResponse = grpc::health::v1::HealthCheckResponse;
namespace fs = std::filesystem;

// Limits of every refusal below: well under a second, and no allocation
// worth noticing (a real load of these models maps ~1 MiB).
constexpr auto kFast = std::chrono::milliseconds(500) * testing::kSanitizerSlowdown;
constexpr int64_t kMaxGrowthBytes = int64_t{16} << 20;


void CopyWritable(const std::string& from, const std::string& to) {
  fs::copy_file(from, to, fs::copy_options::overwrite_existing);
  fs::permissions(to, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::replace);
}

// Tensor names of a .safetensors file (its JSON header).
std::vector<std::string> TensorNames(const std::string& path) {
  const std::string bytes = testing::ReadFileBytes(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  const nlohmann::json header = nlohmann::json::parse(bytes.substr(8, n));
  std::vector<std::string> names;
  for (const auto& [name, value] : header.items()) {
    if (name != "__metadata__") names.push_back(name);
  }
  return names;
}

// <dir>/config.json (copied) + model.safetensors.index.json naming every
// tensor of stories260K-hf in the one shard `shard`.
void WriteShardedModel(const std::string& dir, const std::string& shard) {
  fs::create_directories(dir);
  CopyWritable(testing::Stories260KHfDir() + "/config.json", dir + "/config.json");
  nlohmann::json index;
  for (const std::string& name : TensorNames(testing::Stories260KHfDir() + "/model.safetensors")) {
    index["weight_map"][name] = shard;
  }
  std::ofstream(dir + "/model.safetensors.index.json") << index.dump();
}

class Rpcs {
 public:
  explicit Rpcs(const std::string& target) {
    auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
    models_ = v1::ModelService::NewStub(channel);
    embed_ = v1::EmbeddingService::NewStub(channel);
    scoring_ = v1::ScoringService::NewStub(channel);
    health_ = grpc::health::v1::Health::NewStub(channel);
  }
  grpc::Status Load(const std::string& name, v1::ModelInfo* info = nullptr) {
    grpc::ClientContext ctx;
    v1::LoadModelRequest req;
    req.set_name(name);
    v1::ModelInfo out;
    return models_->LoadModel(&ctx, req, info != nullptr ? info : &out);
  }
  grpc::Status Unload(const std::string& name) {
    grpc::ClientContext ctx;
    v1::UnloadModelRequest req;
    req.set_name(name);
    v1::UnloadModelResponse out;
    return models_->UnloadModel(&ctx, req, &out);
  }
  grpc::Status Get(const std::string& name, v1::ModelInfo* info) {
    grpc::ClientContext ctx;
    v1::GetModelRequest req;
    req.set_name(name);
    return models_->GetModel(&ctx, req, info);
  }
  grpc::Status List(v1::ListModelsResponse* out) {
    grpc::ClientContext ctx;
    return models_->ListModels(&ctx, v1::ListModelsRequest(), out);
  }
  grpc::Status Embed(const std::string& model, std::string* data) {
    grpc::ClientContext ctx;
    v1::EmbedRequest req;
    req.set_model(model);
    auto* seq = req.add_sequences();
    for (int id : {1, 403, 407, 511}) seq->add_token_ids(id);
    v1::EmbedResponse resp;
    grpc::Status s = embed_->Embed(&ctx, req, &resp);
    if (s.ok() && data != nullptr) *data = resp.embeddings().data();
    return s;
  }
  grpc::Status Score(const std::string& model) {
    grpc::ClientContext ctx;
    v1::ScoreRequest req;
    req.set_model(model);
    std::vector<float> h(2 * 64);
    for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<float>(i % 7) / 7.0f - 0.5f;
    *req.mutable_hidden() = EncodeFloatTensor(h, {2, 64});
    req.add_target_ids(3);
    req.add_target_ids(5);
    v1::ScoreResponse resp;
    return scoring_->Score(&ctx, req, &resp);
  }
  HealthResponse::ServingStatus Health(const std::string& service) {
    grpc::ClientContext ctx;
    grpc::health::v1::HealthCheckRequest req;
    req.set_service(service);
    HealthResponse resp;
    grpc::Status s = health_->Check(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp.status();
  }

 private:
  std::unique_ptr<v1::ModelService::Stub> models_;
  std::unique_ptr<v1::EmbeddingService::Stub> embed_;
  std::unique_ptr<v1::ScoringService::Stub> scoring_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_;
};

// Runs `call`, checks it took less than kFast and grew VmRSS by less than
// kMaxGrowthBytes; returns its status.
template <typename F>
grpc::Status Bounded(F call, const std::string& what) {
  const int64_t rss_before = testing::VmRssBytes();
  const auto start = std::chrono::steady_clock::now();
  grpc::Status s = call();
  const auto took = std::chrono::steady_clock::now() - start;
  const int64_t rss_after = testing::VmRssBytes();
  EXPECT_LT(took, kFast) << what;
  EXPECT_RSS_LT(rss_after - rss_before, kMaxGrowthBytes) << what;
  return s;
}

class SealingTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new std::string(testing::MakeTempDir() + "/repo");
    elsewhere_ = new std::string(testing::MakeTempDir() + "/elsewhere");
    const std::string& root = *root_;
    const std::string& out = *elsewhere_;
    const std::string hf = testing::Stories260KHfDir();
    fs::create_directories(root);
    fs::create_directories(out);
    CopyWritable(hf + "/config.json", out + "/config.json");
    CopyWritable(hf + "/model.safetensors", out + "/model.safetensors");
    CopyWritable(testing::Stories260KBin(), out + "/stories.bin");
    CopyWritable(testing::SharedModelsDir() + "/stories260K/stories260K.gguf",
                 out + "/stories.gguf");

    // A good HF model, and one whose config.json is a link INSIDE the root
    // (allowed: Hugging Face cache snapshots link to ../../blobs).
    fs::create_directories(root + "/hf");
    CopyWritable(hf + "/config.json", root + "/hf/config.json");
    CopyWritable(hf + "/model.safetensors", root + "/hf/model.safetensors");
    fs::create_directories(root + "/inlink");
    fs::create_symlink("../hf/config.json", root + "/inlink/config.json");
    fs::create_symlink("../hf/model.safetensors", root + "/inlink/model.safetensors");
    // Links out of the root, one per file kind a load opens.
    fs::create_directories(root + "/outcfg");
    fs::create_symlink(out + "/config.json", root + "/outcfg/config.json");
    CopyWritable(hf + "/model.safetensors", root + "/outcfg/model.safetensors");
    fs::create_directories(root + "/outweights");
    CopyWritable(hf + "/config.json", root + "/outweights/config.json");
    fs::create_symlink(out + "/model.safetensors", root + "/outweights/model.safetensors");
    WriteShardedModel(root + "/outshard", "model-00001-of-00001.safetensors");
    fs::create_symlink(out + "/model.safetensors",
                       root + "/outshard/model-00001-of-00001.safetensors");
    WriteShardedModel(root + "/outindex", "model-00001-of-00001.safetensors");
    fs::rename(root + "/outindex/model.safetensors.index.json",
               out + "/model.safetensors.index.json");
    fs::create_symlink(out + "/model.safetensors.index.json",
                       root + "/outindex/model.safetensors.index.json");
    CopyWritable(hf + "/model.safetensors", root + "/outindex/model-00001-of-00001.safetensors");
    fs::create_directories(root + "/outbin");
    fs::create_symlink(out + "/stories.bin", root + "/outbin/outbin.bin");
    fs::create_directories(root + "/outgguf");
    fs::create_symlink(out + "/stories.gguf", root + "/outgguf/outgguf.gguf");
    // A shard that is a FIFO: opening it for reading would wait for a writer.
    WriteShardedModel(root + "/fifo", "model-00001-of-00001.safetensors");
    ASSERT_EQ(::mkfifo((root + "/fifo/model-00001-of-00001.safetensors").c_str(), 0600), 0);
    // A shard that is a directory.
    WriteShardedModel(root + "/dirshard", "model-00001-of-00001.safetensors");
    fs::create_directories(root + "/dirshard/model-00001-of-00001.safetensors");
    // A llama2.c model whose file the test truncates while it is served.
    fs::create_directories(root + "/trunc");
    CopyWritable(testing::Stories260KBin(), root + "/trunc/trunc.bin");
    fs::create_directories(root + "/trunchf");
    CopyWritable(hf + "/config.json", root + "/trunchf/config.json");
    CopyWritable(hf + "/model.safetensors", root + "/trunchf/model.safetensors");

    VocabdServer::Options options;
    options.listen_address = "127.0.0.1:0";
    options.models = {{"default", testing::Stories260KBin()}};
    options.model_repository = root;
    auto server = VocabdServer::Create(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
    rpcs_ = new Rpcs(server_->target());
  }
  static void TearDownTestSuite() {
    delete rpcs_;
    server_->Shutdown();
    delete server_;
    delete root_;
    delete elsewhere_;
  }

  static std::string* root_;
  static std::string* elsewhere_;
  static VocabdServer* server_;
  static Rpcs* rpcs_;
};

std::string* SealingTest::root_ = nullptr;
std::string* SealingTest::elsewhere_ = nullptr;
VocabdServer* SealingTest::server_ = nullptr;
Rpcs* SealingTest::rpcs_ = nullptr;

TEST_F(SealingTest, LinksInsideTheRootLoad) {
  v1::ModelInfo info;
  grpc::Status s = rpcs_->Load("inlink", &info);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(info.state(), v1::READY);
  std::string a, b;
  ASSERT_TRUE(rpcs_->Embed("inlink", &a).ok());
  ASSERT_TRUE(rpcs_->Embed("default", &b).ok());
  EXPECT_EQ(a, b);
}

TEST_F(SealingTest, EveryFileLinkedOutOfTheRootIsInvalidArgument) {
  struct Case {
    std::string model;
    std::string file;  // the link the message must name
  };
  for (const Case& c : {Case{"outcfg", "config.json"}, Case{"outweights", "model.safetensors"},
                        Case{"outshard", "model-00001-of-00001.safetensors"},
                        Case{"outindex", "model.safetensors.index.json"},
                        Case{"outbin", "outbin.bin"}, Case{"outgguf", "outgguf.gguf"}}) {
    SCOPED_TRACE(c.model);
    grpc::Status s = Bounded([&] { return rpcs_->Load(c.model); }, c.model);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr(*root_ + "/" + c.model + "/" + c.file));
    EXPECT_THAT(s.error_message(), HasSubstr("resolves to " + *elsewhere_ + "/"));
    EXPECT_THAT(s.error_message(), HasSubstr("outside the model repository root " + *root_));
    v1::ModelInfo info;
    ASSERT_TRUE(rpcs_->Get(c.model, &info).ok());
    EXPECT_EQ(info.state(), v1::FAILED);
  }
}

TEST_F(SealingTest, FifoShardIsRefusedAtOnceAndNeverStaysLoading) {
  for (int attempt = 0; attempt < 2; ++attempt) {  // a retry gets the same answer
    grpc::Status s = Bounded([] { return rpcs_->Load("fifo"); }, "fifo");
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_THAT(s.error_message(),
                HasSubstr(*root_ + "/fifo/model-00001-of-00001.safetensors is a FIFO "
                                   "(named pipe), not a regular file"));
    v1::ModelInfo info;
    ASSERT_TRUE(rpcs_->Get("fifo", &info).ok());
    EXPECT_EQ(info.state(), v1::FAILED);
  }
  grpc::Status s = Bounded([] { return rpcs_->Load("dirshard"); }, "dirshard");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("is a directory, not a regular file"));
}

// A file truncated under the server (cp over it, a partial download...):
// the next Embed/Score answers FAILED_PRECONDITION naming the file, the
// process lives on; writing the new file elsewhere, renaming it over the
// old name and LoadModel serve the new file.
void TruncateThenReplace(Rpcs* rpcs, const std::string& model, const std::string& file,
                         const std::string& original) {
  v1::ModelInfo info;
  grpc::Status s = rpcs->Load(model, &info);
  ASSERT_TRUE(s.ok()) << s.error_message();
  std::string before;
  ASSERT_TRUE(rpcs->Embed(model, &before).ok());
  ASSERT_TRUE(rpcs->Score(model).ok());

  ASSERT_EQ(::truncate(file.c_str(), 4096), 0) << std::strerror(errno);
  for (int i = 0; i < 2; ++i) {
    s = Bounded([&] { return rpcs->Embed(model, nullptr); }, "embed after truncate");
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr("model file " + file));
    EXPECT_THAT(s.error_message(), HasSubstr("bytes)"));
    EXPECT_THAT(s.error_message(), HasSubstr("LoadModel"));
    s = Bounded([&] { return rpcs->Score(model); }, "score after truncate");
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  }
  // Other models are untouched.
  ASSERT_TRUE(rpcs->Embed("default", nullptr).ok());

  // The safe replacement: write elsewhere in the same filesystem, rename.
  CopyWritable(original, file + ".tmp");
  fs::rename(file + ".tmp", file);
  s = rpcs->Load(model, &info);
  ASSERT_TRUE(s.ok()) << s.error_message();
  std::string after;
  s = rpcs->Embed(model, &after);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(after, before);
  EXPECT_TRUE(rpcs->Score(model).ok());
  // Renaming yet another version over it leaves the served inode intact.
  CopyWritable(original, file + ".tmp");
  fs::rename(file + ".tmp", file);
  EXPECT_TRUE(rpcs->Embed(model, nullptr).ok());
}

TEST_F(SealingTest, TruncatedLlama2cFileIsAnErrorNotSigbus) {
  TruncateThenReplace(rpcs_, "trunc", *root_ + "/trunc/trunc.bin", testing::Stories260KBin());
}

TEST_F(SealingTest, TruncatedSafetensorsFileIsAnErrorNotSigbus) {
  TruncateThenReplace(rpcs_, "trunchf", *root_ + "/trunchf/model.safetensors",
                      testing::Stories260KHfDir() + "/model.safetensors");
}

// Truncation while calls are running: reads may fault inside the weights
// (the SIGBUS guard turns them into zero pages); every call answers OK
// (finished before) or FAILED_PRECONDITION, and the process lives on.
TEST_F(SealingTest, TruncationDuringConcurrentCallsNeverCrashes) {
  const std::string file = *root_ + "/race/race.bin";
  fs::create_directories(*root_ + "/race");
  CopyWritable(testing::Stories260KBin(), file);
  ASSERT_TRUE(rpcs_->Load("race").ok());
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, refused{0}, other{0};
  auto hammer = [&](bool score) {
    Rpcs rpcs(server_->target());
    while (!stop) {
      grpc::Status s = score ? rpcs.Score("race") : rpcs.Embed("race", nullptr);
      if (s.ok()) {
        ++ok;
      } else if (s.error_code() == grpc::StatusCode::FAILED_PRECONDITION) {
        ++refused;
      } else {
        ++other;
        ADD_FAILURE() << s.error_message();
      }
    }
  };
  // Counts, not wall-clock: truncate once calls have succeeded, stop once
  // calls have been refused (each wait bounded).
  auto wait_for = [](const std::atomic<int>& n) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (n.load() == 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  };
  std::thread embedder(hammer, false), scorer(hammer, true);
  wait_for(ok);
  ASSERT_EQ(::truncate(file.c_str(), 64), 0);
  wait_for(refused);
  stop = true;
  embedder.join();
  scorer.join();
  EXPECT_GT(ok.load(), 0);
  EXPECT_GT(refused.load(), 0);
  EXPECT_EQ(other.load(), 0);
  ASSERT_TRUE(rpcs_->Embed("default", nullptr).ok());  // still alive
  EXPECT_EQ(rpcs_->Embed("race", nullptr).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
}

// Overall health ("") follows the default model; ModelService stays up.
TEST(HealthFollowsModelsTest, OverallHealthIsNotServingUnlessTheDefaultModelIsReady) {
  const std::string root = testing::MakeTempDir() + "/repo";
  fs::create_directories(root + "/main");
  const std::string hf = testing::Stories260KHfDir();
  CopyWritable(hf + "/config.json", root + "/main/config.json");
  CopyWritable(hf + "/model.safetensors", root + "/main/model.safetensors");
  fs::create_directories(root + "/other");
  CopyWritable(testing::Stories260KBin(), root + "/other/other.bin");
  VocabdServer::Options options;
  options.listen_address = "127.0.0.1:0";
  options.model_repository = root;
  options.load_models = {"main", "other"};
  options.default_model = "main";
  auto server = VocabdServer::Create(options);
  ASSERT_TRUE(server.ok()) << server.status();
  Rpcs rpcs((*server)->target());
  const std::string kModelService = "vocabd.v1.ModelService";
  EXPECT_EQ(rpcs.Health(""), HealthResponse::SERVING);

  // Unloading another model changes nothing.
  ASSERT_TRUE(rpcs.Unload("other").ok());
  EXPECT_EQ(rpcs.Health(""), HealthResponse::SERVING);

  // Default unloaded: NOT_SERVING; ListModels/GetModel still answer.
  ASSERT_TRUE(rpcs.Unload("main").ok());
  EXPECT_EQ(rpcs.Health(""), HealthResponse::NOT_SERVING);
  EXPECT_EQ(rpcs.Health(kModelService), HealthResponse::SERVING);
  v1::ListModelsResponse list;
  EXPECT_TRUE(rpcs.List(&list).ok());
  v1::ModelInfo info;
  EXPECT_EQ(rpcs.Get("main", &info).error_code(), grpc::StatusCode::NOT_FOUND);

  // Loaded again: SERVING.
  ASSERT_TRUE(rpcs.Load("main").ok());
  EXPECT_EQ(rpcs.Health(""), HealthResponse::SERVING);

  // A failed load of the default (nothing else serving it): NOT_SERVING,
  // GetModel says FAILED.
  ASSERT_TRUE(rpcs.Unload("main").ok());
  std::ofstream(root + "/main/config.json", std::ios::trunc) << "{not json";
  EXPECT_EQ(rpcs.Load("main").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(rpcs.Health(""), HealthResponse::NOT_SERVING);
  ASSERT_TRUE(rpcs.Get("main", &info).ok());
  EXPECT_EQ(info.state(), v1::FAILED);
  EXPECT_TRUE(rpcs.List(&list).ok());

  // Fixed and loaded: SERVING again; a failed RELOAD keeps the old version
  // READY and SERVING.
  CopyWritable(hf + "/config.json", root + "/main/config.json");
  ASSERT_TRUE(rpcs.Load("main").ok());
  EXPECT_EQ(rpcs.Health(""), HealthResponse::SERVING);
  std::ofstream(root + "/main/config.json", std::ios::trunc) << "{not json";
  EXPECT_EQ(rpcs.Load("main").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(rpcs.Health(""), HealthResponse::SERVING);
  (*server)->Shutdown();
}

// While the default model LOADS (nothing served yet), health is NOT_SERVING:
// a Watch sees NOT_SERVING, then SERVING once the load is done.
TEST(HealthFollowsModelsTest, WatchSeesServingOnlyAfterTheDefaultLoads) {
  const std::string root = testing::MakeTempDir() + "/repo";
  fs::create_directories(root + "/main");
  CopyWritable(testing::Stories260KBin(), root + "/main/main.bin");
  VocabdServer::Options options;
  options.listen_address = "127.0.0.1:0";
  options.model_repository = root;
  options.default_model = "main";
  auto server = VocabdServer::Create(options);
  ASSERT_TRUE(server.ok()) << server.status();
  Rpcs rpcs((*server)->target());
  EXPECT_EQ(rpcs.Health(""), HealthResponse::NOT_SERVING);  // nothing loaded yet
  auto channel = grpc::CreateChannel((*server)->target(), grpc::InsecureChannelCredentials());
  auto health = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext watch_context;
  grpc::health::v1::HealthCheckRequest request;
  auto watch = health->Watch(&watch_context, request);
  HealthResponse update;
  ASSERT_TRUE(watch->Read(&update));
  EXPECT_EQ(update.status(), HealthResponse::NOT_SERVING);
  ASSERT_TRUE(rpcs.Load("main").ok());
  ASSERT_TRUE(watch->Read(&update));
  EXPECT_EQ(update.status(), HealthResponse::SERVING);
  watch_context.TryCancel();
  watch->Finish();
  (*server)->Shutdown();
}

// A load that never ends (its factory blocked like an open() on a hung
// network filesystem) holds neither the LoadModel call past a cancel nor the
// server's drain past the drain deadline: the real ModelService handler on a
// live gRPC server, with a repository whose factory blocks.
TEST(StuckLoadTest, LoadModelCancelsAndDoesNotHoldTheDrain) {
  const std::string root = testing::MakeTempDir() + "/repo";
  fs::create_directories(root + "/stuck");
  fs::create_directories(root + "/stuck2");
  ModelRegistry registry;
  auto gate = std::make_shared<std::promise<void>>();
  std::shared_future<void> released = gate->get_future().share();
  ModelRepository::Options repository_options;
  repository_options.root = root;
  repository_options.registry = &registry;
  repository_options.stop_timeout = std::chrono::milliseconds(100);
  repository_options.factory = [released](const std::string&, const std::string&)
      -> absl::StatusOr<std::unique_ptr<Model>> {
    released.wait();
    return absl::UnavailableError("released");
  };
  auto repository = ModelRepository::Create(repository_options);
  ASSERT_TRUE(repository.ok()) << repository.status();
  ServiceContext context;
  context.registry = &registry;
  context.repository = repository->get();
  ModelServiceImpl service(context);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(port, 0);
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                     grpc::InsecureChannelCredentials());
  auto models = v1::ModelService::NewStub(channel);

  // 1. The client's deadline ends the call; the load shows LOADING.
  {
    const auto start = std::chrono::steady_clock::now();
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
    v1::LoadModelRequest request;
    request.set_name("stuck");
    v1::ModelInfo info;
    grpc::Status s = models->LoadModel(&ctx, request, &info);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();
    EXPECT_LT(std::chrono::steady_clock::now() - start, kFast);
    grpc::ClientContext get_ctx;
    v1::GetModelRequest get;
    get.set_name("stuck");
    ASSERT_TRUE(models->GetModel(&get_ctx, get, &info).ok());
    EXPECT_EQ(info.state(), v1::LOADING);
  }
  // 2. A LoadModel without deadline is open when the drain starts: the
  //    drain deadline cancels it and Shutdown returns.
  grpc::Status pending;
  std::thread caller([&] {
    grpc::ClientContext ctx;
    v1::LoadModelRequest request;
    request.set_name("stuck2");
    v1::ModelInfo info;
    pending = models->LoadModel(&ctx, request, &info);
  });
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        auto st = registry.Status("stuck2");
        return st.ok() && st->state == ModelState::kLoading;
      },
      std::chrono::milliseconds(5000)));
  const auto start = std::chrono::steady_clock::now();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  server->Wait();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(2000));
  caller.join();
  EXPECT_FALSE(pending.ok());
  // 3. The repository's destructor abandons the stuck loads after
  //    stop_timeout instead of joining them forever.
  const auto stop = std::chrono::steady_clock::now();
  repository->reset();
  EXPECT_LT(std::chrono::steady_clock::now() - stop, kFast);
  gate->set_value();  // the abandoned threads end and report to nobody
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

}  // namespace
}  // namespace vocabd
