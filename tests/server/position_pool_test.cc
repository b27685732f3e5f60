// Where PositionService work runs (server/position_service.h): calls above
// kPositionInlineMaxValues go to the bounded compute pool, which finishes the
// reactor; small calls run inline. The service runs here in a gRPC server of
// its own with a compute pool the test controls: the pool's single worker is
// held by a task of the test, so a call that went to the pool is visibly
// queued (queue_depth), and a full queue answers RESOURCE_EXHAUSTED, while an
// inline call still completes. A large ApplyRope (q + k = 4.5 MiB, threads
// on the pool worker) must still give the golden rotation
// (tests/golden/rope_golden.json, NumPy HF recipe).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "proto/tensor_codec.h"
#include "lib/serving/compute_pool.h"
#include "server/metrics.h"
#include "server/position_service.h"
#include "tests/test_util.h"
#include "vocabd/v1/position.grpc.pb.h"

namespace vocabd::testing {
namespace {

using ::testing::HasSubstr;

// A golden case of rope_golden.json (BHSD).
struct Golden {
  int64_t batch = 0, seq = 0, hq = 0, hk = 0, d = 0;
  double theta = 0;
  int64_t max_positions = 0;
  std::vector<int64_t> positions;
  std::vector<float> q, k, q_out, k_out;
};

Golden LoadGolden(const std::string& name) {
  const nlohmann::json golden = ReadGolden("rope_golden.json");
  for (const auto& c : golden.at("rope_cases")) {
    if (c.at("name") != name) continue;
    Golden g;
    g.batch = c.at("batch");
    g.seq = c.at("seq_len");
    g.hq = c.at("q_heads");
    g.hk = c.at("k_heads");
    g.d = c.at("head_dim");
    g.theta = c.at("theta");
    g.max_positions = c.at("max_position_embeddings");
    EXPECT_EQ(c.at("rotary_dim"), g.d);
    EXPECT_EQ(c.at("pair_layout"), "INTERLEAVED");
    EXPECT_EQ(c.at("scaling"), "default");
    g.positions = c.at("positions").get<std::vector<int64_t>>();
    g.q = ToFloats(c.at("q"));
    g.k = ToFloats(c.at("k"));
    g.q_out = ToFloats(c.at("q_out"));
    g.k_out = ToFloats(c.at("k_out"));
    return g;
  }
  ADD_FAILURE() << "no golden case " << name;
  return Golden();
}

// The golden case repeated `tiles` times along the batch axis (BHSD: each
// batch row is contiguous, so the tensors are concatenations).
v1::ApplyRopeRequest TiledRequest(const Golden& g, int tiles) {
  std::vector<float> q, k;
  std::vector<int64_t> positions;
  for (int i = 0; i < tiles; ++i) {
    q.insert(q.end(), g.q.begin(), g.q.end());
    k.insert(k.end(), g.k.begin(), g.k.end());
    positions.insert(positions.end(), g.positions.begin(), g.positions.end());
  }
  const int64_t b = g.batch * tiles;
  v1::ApplyRopeRequest request;
  request.set_layout(v1::BHSD);
  request.mutable_rope()->set_pair_layout(v1::INTERLEAVED);  // standalone config
  request.mutable_rope()->set_theta(g.theta);
  request.mutable_rope()->set_max_position_embeddings(g.max_positions);
  request.set_allow_beyond_trained_length(true);  // golden positions go to 100000
  *request.mutable_q() = EncodeFloatTensor(q, {b, g.hq, g.seq, g.d});
  *request.mutable_k() = EncodeFloatTensor(k, {b, g.hk, g.seq, g.d});
  *request.mutable_position_ids() = EncodeInt64Tensor(positions, {b, g.seq});
  return request;
}

// Every tile within the golden tolerance of tests/lib/positions/rope_test.cc
// (|got - want| <= 1e-6 * max(1, |a| + |b|) for a pair (a, b)), and every
// tile bit-identical to the first (threads never change bits).
void ExpectTilesMatchGolden(const std::string& what, const v1::Tensor& tensor,
                            const std::vector<float>& in, const std::vector<float>& want,
                            int64_t d, int tiles) {
  auto got = DecodeFloatTensor(tensor, what);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), want.size() * tiles) << what;
  int bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const size_t partner = (i % d) % 2 == 0 ? i + 1 : i - 1;  // interleaved pairs
    const double scale =
        std::max(1.0, static_cast<double>(std::fabs(in[i]) + std::fabs(in[partner])));
    if (std::fabs(static_cast<double>((*got)[i]) - want[i]) > 1e-6 * scale && bad++ < 5) {
      ADD_FAILURE() << what << "[" << i << "] = " << (*got)[i] << ", golden " << want[i];
    }
  }
  for (int t = 1; t < tiles; ++t) {
    ASSERT_EQ(0, std::memcmp(got->data(), got->data() + t * want.size(), want.size() * 4))
        << what << " tile " << t << " differs from tile 0";
  }
}

class PositionPoolTest : public ::testing::Test {
 protected:
  void Start(size_t max_queue_size) {
    ComputePool::Options pool_options;
    pool_options.num_threads = 1;
    pool_options.max_queue_size = max_queue_size;
    auto pool = ComputePool::Create(pool_options);
    ASSERT_TRUE(pool.ok()) << pool.status();
    pool_ = std::move(*pool);
    auto metrics = Metrics::Create(Metrics::Options());
    ASSERT_TRUE(metrics.ok());
    metrics_ = std::move(*metrics);
    ServiceContext context;  // no models: standalone RoPE configs only
    context.compute_pool = pool_.get();
    context.metrics = metrics_.get();
    service_ = std::make_unique<PositionServiceImpl>(context);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.SetMaxReceiveMessageSize(64 << 20);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
    stub_ = v1::PositionService::NewStub(grpc::CreateCustomChannel(
        "127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials(), args));
  }
  void TearDown() override {
    Release();
    if (server_ != nullptr) server_->Shutdown();
    pool_.reset();
  }
  // Occupies the pool's only worker until Release().
  void HoldTheWorker() {
    auto started = std::make_shared<std::promise<void>>();
    std::future<void> running = started->get_future();
    ASSERT_TRUE(pool_->Submit([started, gate = gate_.get_future().share()] {
                       started->set_value();
                       gate.wait();
                     }).ok());
    running.wait();
    ASSERT_EQ(pool_->queue_depth(), 0u);
  }
  void Release() {
    if (!released_) {
      released_ = true;
      gate_.set_value();
    }
  }
  grpc::Status Rope(const v1::ApplyRopeRequest& request, v1::ApplyRopeResponse* response,
                    std::chrono::milliseconds timeout = std::chrono::minutes(5)) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + timeout);
    return stub_->ApplyRope(&ctx, request, response);
  }

  std::unique_ptr<ComputePool> pool_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<PositionServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::PositionService::Stub> stub_;
  std::promise<void> gate_;
  bool released_ = false;
};

constexpr char kCase[] = "interleaved_theta5e5_d64_b2";
// 1024 tiles: q [2048, 2, 3, 64] + k [2048, 1, 3, 64] = 1,179,648 F32 values
// (4.5 MiB): above kPositionInlineMaxValues and above lib/positions/rope.h's 4 MiB
// threading threshold.
constexpr int kLargeTiles = 1024;

TEST_F(PositionPoolTest, LargeApplyRopeRunsOnThePoolAndMatchesTheGolden) {
  Start(/*max_queue_size=*/8);
  const Golden g = LoadGolden(kCase);
  const v1::ApplyRopeRequest small = TiledRequest(g, 1);
  const v1::ApplyRopeRequest large = TiledRequest(g, kLargeTiles);
  ASSERT_GT((g.q.size() + g.k.size()) * kLargeTiles, static_cast<size_t>(kPositionInlineMaxValues));
  ASSERT_LE(g.q.size() + g.k.size(), static_cast<size_t>(kPositionInlineMaxValues));
  HoldTheWorker();

  // Small: inline, done while the worker is held.
  v1::ApplyRopeResponse small_response;
  grpc::Status s = Rope(small, &small_response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ExpectTilesMatchGolden("q", small_response.q(), g.q, g.q_out, g.d, 1);
  ExpectTilesMatchGolden("k", small_response.k(), g.k, g.k_out, g.d, 1);

  // Large: queued on the pool behind the held worker, not answered yet.
  v1::ApplyRopeResponse large_response;
  grpc::Status large_status;
  std::thread caller([&] { large_status = Rope(large, &large_response); });
  ASSERT_TRUE(WaitFor([&] { return pool_->queue_depth() == 1; }, std::chrono::seconds(60)))
      << "the large ApplyRope never reached the compute pool";
  // A large GetRopeCache goes there too.
  v1::GetRopeCacheRequest cache;
  cache.mutable_rope()->set_pair_layout(v1::HALF_SPLIT);
  cache.mutable_rope()->set_head_dim(128);
  cache.set_num_positions(4096);  // 4096 x 128 = 524,288 values
  v1::GetRopeCacheResponse cache_response;
  grpc::Status cache_status;
  std::thread cache_caller([&] {
    grpc::ClientContext ctx;
    cache_status = stub_->GetRopeCache(&ctx, cache, &cache_response);
  });
  ASSERT_TRUE(WaitFor([&] { return pool_->queue_depth() == 2; }, std::chrono::seconds(60)))
      << "the large GetRopeCache never reached the compute pool";
  // A small table is inline.
  v1::GetSinusoidalPositionsRequest sin;
  sin.set_num_positions(16);
  sin.set_dim(8);
  v1::GetSinusoidalPositionsResponse sin_response;
  grpc::ClientContext sin_ctx;
  ASSERT_TRUE(stub_->GetSinusoidalPositions(&sin_ctx, sin, &sin_response).ok());

  Release();
  caller.join();
  cache_caller.join();
  ASSERT_TRUE(large_status.ok()) << large_status.error_message();
  ExpectTilesMatchGolden("q", large_response.q(), g.q, g.q_out, g.d, kLargeTiles);
  ExpectTilesMatchGolden("k", large_response.k(), g.k, g.k_out, g.d, kLargeTiles);
  ASSERT_TRUE(cache_status.ok()) << cache_status.error_message();
  ASSERT_EQ(cache_response.cos().shape_size(), 2);
  EXPECT_EQ(cache_response.cos().shape(0), 4096);
  EXPECT_EQ(cache_response.cos().shape(1), 64);
}

TEST_F(PositionPoolTest, FullQueueRefusesLargeCallsButNotInlineOnes) {
  Start(/*max_queue_size=*/1);
  const Golden g = LoadGolden(kCase);
  HoldTheWorker();
  ASSERT_TRUE(pool_->Submit([] {}).ok());  // fills the queue
  v1::ApplyRopeResponse response;
  grpc::Status s = Rope(TiledRequest(g, kLargeTiles), &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("queue full"));
  s = Rope(TiledRequest(g, 1), &response);
  EXPECT_TRUE(s.ok()) << s.error_message();
  v1::GetAlibiSlopesRequest alibi;
  alibi.set_num_heads(64);
  alibi.set_include_bias(true);
  alibi.set_q_len(64);
  alibi.set_k_len(128);  // 64 x 64 x 128 = 524,288 values: pool
  v1::GetAlibiSlopesResponse alibi_response;
  grpc::ClientContext ctx;
  s = stub_->GetAlibiSlopes(&ctx, alibi, &alibi_response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
}

TEST_F(PositionPoolTest, CallCancelledWhileQueuedIsNotComputed) {
  Start(/*max_queue_size=*/8);
  const Golden g = LoadGolden(kCase);
  HoldTheWorker();
  grpc::ClientContext ctx;
  v1::ApplyRopeResponse response;
  grpc::Status status;
  std::thread caller([&] { status = stub_->ApplyRope(&ctx, TiledRequest(g, kLargeTiles), &response); });
  ASSERT_TRUE(WaitFor([&] { return pool_->queue_depth() == 1; }, std::chrono::seconds(60)));
  ctx.TryCancel();
  caller.join();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED) << status.error_message();
  // The client fails the call at once; the server learns of the cancellation
  // when the RST_STREAM arrives, asynchronously. Release the worker only
  // after that (500 ms is ample on a loaded machine, and under TSan).
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  Release();
  // The worker drops it without rotating.
  EXPECT_TRUE(WaitFor([&] { return metrics_->skipped_work("cancelled") == 1; },
                      std::chrono::seconds(60)));
}

}  // namespace
}  // namespace vocabd::testing
