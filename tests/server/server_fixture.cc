#include "tests/server/server_fixture.h"

#include <chrono>
#include <filesystem>
#include <fstream>

#include "tests/test_util.h"
#include "vocabd/v1/model.grpc.pb.h"

namespace vocabd::testing {

std::unique_ptr<VocabdServer> ServerTest::server_;
std::unique_ptr<VocabdClient> ServerTest::client_;

void ServerTest::SetUpTestSuite() {
  VocabdServer::Options options;
  options.listen_address = "127.0.0.1:0";
  options.models = {{kBinModel, Stories260KBin()}, {kHfModel, Stories260KHfDir()}};
  options.compute_threads = 2;
  auto server = VocabdServer::Create(options);
  ASSERT_TRUE(server.ok()) << server.status();
  server_ = std::move(*server);
  VocabdClient::Options client_options;
  client_options.target = server_->target();
  auto client = VocabdClient::Create(client_options);
  ASSERT_TRUE(client.ok()) << client.status();
  client_ = std::move(*client);
}

void ServerTest::TearDownTestSuite() {
  client_.reset();
  if (server_) server_->Shutdown();
  server_.reset();
}

void WriteRepoModel(const std::string& dir, const std::string& tokenizer_json) {
  namespace fs = std::filesystem;
  fs::create_directories(dir);
  fs::copy_file(Stories260KHfDir() + "/config.json", dir + "/config.json");
  fs::copy_file(Stories260KHfDir() + "/model.safetensors", dir + "/model.safetensors");
  std::ofstream(dir + "/tokenizer.json") << tokenizer_json;
}

grpc::Status LoadRepoModel(const std::string& target, const std::string& name) {
  auto stub =
      v1::ModelService::NewStub(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  v1::LoadModelRequest req;
  req.set_name(name);
  v1::ModelInfo info;
  return stub->LoadModel(&ctx, req, &info);
}

ServingProbe::ServingProbe(std::function<grpc::Status()> call) : call_(std::move(call)) {
  thread_ = std::thread([this] {
    while (!stop_) {
      CallOnce();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
}

void ServingProbe::CallOnce() {
  const grpc::Status s = call_();
  ++calls_;
  if (!s.ok() && failures_++ == 0) {
    first_failure_ = std::to_string(s.error_code()) + " " + s.error_message();
  }
}

// After the thread, one more call from here: an attack that ends within
// the thread's first call still has a call answered after it.
void ServingProbe::Stop() {
  if (stop_.exchange(true)) return;
  if (thread_.joinable()) thread_.join();
  CallOnce();
}

void ServingProbe::ExpectAllAnswered(const std::string& what) {
  Stop();
  EXPECT_GE(calls_, 1) << what;
  EXPECT_EQ(failures_, 0) << what << ": " << first_failure_;
}

}  // namespace vocabd::testing
