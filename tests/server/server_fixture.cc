#include "tests/server/server_fixture.h"

#include "tests/test_util.h"

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

}  // namespace vocabd::testing
