// server/health_service.h on a bare gRPC server: Check/Watch semantics of
// grpc.health.v1 and the drain behaviour (Shutdown sends NOT_SERVING, then
// ends every Watch so grpc::Server::Shutdown is not held by them).
#include "server/health_service.h"

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <grpcpp/ext/health_check_service_server_builder_option.h>
#include <grpcpp/grpcpp.h>

namespace vocabd {
namespace {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;
using ::testing::ElementsAre;

class HealthServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.SetOption(std::make_unique<grpc::HealthCheckServiceServerBuilderOption>(nullptr));
    builder.RegisterService(&health_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_NE(port, 0);
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                   grpc::InsecureChannelCredentials());
    stub_ = grpc::health::v1::Health::NewStub(channel_);
  }
  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::system_clock::now());
  }

  grpc::Status Check(const std::string& service, HealthCheckResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    HealthCheckRequest request;
    request.set_service(service);
    return stub_->Check(&context, request, response);
  }

  // Waits (bounded) until the service has `n` open Watch streams.
  bool WaitForOpenWatches(size_t n) {
    for (int i = 0; i < 3000; ++i) {
      if (health_.open_watches() == n) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  HealthService health_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<grpc::health::v1::Health::Stub> stub_;
};

struct Watch {
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<HealthCheckResponse>> stream;

  Watch(grpc::health::v1::Health::Stub& stub, const std::string& service) {
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    HealthCheckRequest request;
    request.set_service(service);
    stream = stub.Watch(&context, request);
  }
  // The next status, or -1 when the stream ended.
  int Next() {
    HealthCheckResponse r;
    return stream->Read(&r) ? r.status() : -1;
  }
};

TEST_F(HealthServiceTest, CheckReportsKnownServicesAndNotFound) {
  HealthCheckResponse r;
  ASSERT_TRUE(Check("", &r).ok());
  EXPECT_EQ(r.status(), HealthCheckResponse::SERVING);
  health_.SetServingStatus("a", false);
  ASSERT_TRUE(Check("a", &r).ok());
  EXPECT_EQ(r.status(), HealthCheckResponse::NOT_SERVING);
  health_.SetServingStatus("a", true);
  ASSERT_TRUE(Check("a", &r).ok());
  EXPECT_EQ(r.status(), HealthCheckResponse::SERVING);
  EXPECT_EQ(Check("b", &r).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(HealthServiceTest, WatchSendsTheCurrentStatusThenEveryChange) {
  Watch w(*stub_, "a");
  EXPECT_EQ(w.Next(), HealthCheckResponse::SERVICE_UNKNOWN);
  health_.SetServingStatus("a", true);
  EXPECT_EQ(w.Next(), HealthCheckResponse::SERVING);
  health_.SetServingStatus("a", true);  // no change: nothing sent
  health_.SetServingStatus("other", false);  // another service: nothing sent
  health_.SetServingStatus("a", false);
  EXPECT_EQ(w.Next(), HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(health_.open_watches(), 1u);
  w.context.TryCancel();
  EXPECT_EQ(w.Next(), -1);
  EXPECT_TRUE(WaitForOpenWatches(0));
}

TEST_F(HealthServiceTest, ShutdownSendsNotServingThenEndsEveryWatch) {
  health_.SetServingStatus("a", true);
  health_.SetServingStatus("b", false);
  Watch overall(*stub_, ""), a(*stub_, "a"), b(*stub_, "b"), unknown(*stub_, "x");
  EXPECT_EQ(overall.Next(), HealthCheckResponse::SERVING);
  EXPECT_EQ(a.Next(), HealthCheckResponse::SERVING);
  EXPECT_EQ(b.Next(), HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(unknown.Next(), HealthCheckResponse::SERVICE_UNKNOWN);

  health_.Shutdown();
  EXPECT_EQ(overall.Next(), HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(a.Next(), HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(unknown.Next(), HealthCheckResponse::NOT_SERVING);
  for (Watch* w : {&overall, &a, &b, &unknown}) {
    EXPECT_EQ(w->Next(), -1);  // b was NOT_SERVING already: just the end
    const grpc::Status end = w->stream->Finish();
    EXPECT_EQ(end.error_code(), grpc::StatusCode::UNAVAILABLE) << end.error_message();
  }
  EXPECT_TRUE(WaitForOpenWatches(0));

  // Sticky: nothing turns SERVING again; a new Watch ends at once.
  health_.SetServingStatus("", true);
  HealthCheckResponse r;
  ASSERT_TRUE(Check("", &r).ok());
  EXPECT_EQ(r.status(), HealthCheckResponse::NOT_SERVING);
  Watch late(*stub_, "");
  EXPECT_EQ(late.Next(), HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(late.Next(), -1);
  EXPECT_EQ(late.stream->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  health_.Shutdown();  // idempotent
}

TEST_F(HealthServiceTest, OpenWatchDoesNotHoldServerShutdown) {
  Watch w(*stub_, "");
  ASSERT_EQ(w.Next(), HealthCheckResponse::SERVING);
  const auto start = std::chrono::steady_clock::now();
  health_.Shutdown();
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(60));
  server_->Wait();
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_LT(took, std::chrono::seconds(10));
  EXPECT_EQ(w.Next(), HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(w.Next(), -1);
  server_.reset();
}

TEST_F(HealthServiceTest, ManyWatchersAndUpdatesFromManyThreads) {
  // For the TSan suite: updates race with watches starting and ending.
  std::vector<std::unique_ptr<Watch>> watches;
  for (int i = 0; i < 8; ++i) watches.push_back(std::make_unique<Watch>(*stub_, i % 2 ? "a" : ""));
  std::vector<std::thread> setters;
  for (int t = 0; t < 4; ++t) {
    setters.emplace_back([this, t] {
      for (int i = 0; i < 200; ++i) health_.SetServingStatus(t % 2 ? "a" : "", (i + t) % 2 == 0);
    });
  }
  for (auto& t : setters) t.join();
  for (int i = 0; i < 4; ++i) watches[i]->context.TryCancel();
  health_.Shutdown();
  for (size_t i = 0; i < watches.size(); ++i) {
    int last = -1;
    for (int s; (s = watches[i]->Next()) != -1;) last = s;
    // The cancelled ones may have got nothing; the others end on NOT_SERVING.
    if (i >= 4) {
      EXPECT_EQ(last, HealthCheckResponse::NOT_SERVING) << i;
    }
  }
  EXPECT_TRUE(WaitForOpenWatches(0));
}

}  // namespace
}  // namespace vocabd
