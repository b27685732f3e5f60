// The scoring features over gRPC against the real server: ScoreStream (in
// order, errors end the stream naming requests[i], server keeps serving),
// dynamic batching (concurrent callers, GetModel shows it, over-limit
// requests get RESOURCE_EXHAUSTED), --weights-dtype bf16 (GetModel dtype,
// requested dtype, resident bytes, kernel), batching off, flag parsing.
#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "proto/tensor_codec.h"
#include "client/vocabd_client.h"
#include "lib/head/lm_head.h"
#include "server/model_serving_options.h"
#include "server/server.h"
#include "tests/test_util.h"
#include "vocabd/v1/scoring.grpc.pb.h"

namespace vocabd {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;

constexpr int64_t kScoringHidden = 64;

std::vector<float> SomeHidden(int rows, double phase) {
  std::vector<float> h(rows * kScoringHidden);
  for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<float>(std::sin(phase * (i + 1)));
  return h;
}

v1::ScoreRequest MakeScore(const std::string& model, int rows, double phase, int top_k) {
  v1::ScoreRequest r;
  r.set_model(model);
  *r.mutable_hidden() = EncodeFloatTensor(SomeHidden(rows, phase), {rows, kScoringHidden});
  for (int i = 0; i < rows; ++i) r.add_target_ids((37 * i + 5) % 512);
  r.set_top_k(top_k);
  r.set_request_id("req-" + std::to_string(rows) + "-" + std::to_string(top_k));
  return r;
}

void ExpectSameScores(const v1::ScoreResponse& a, const v1::ScoreResponse& b) {
  ASSERT_EQ(a.rows_size(), b.rows_size());
  for (int r = 0; r < a.rows_size(); ++r) {
    EXPECT_NEAR(a.rows(r).logsumexp(), b.rows(r).logsumexp(), 1e-5);
    EXPECT_NEAR(a.rows(r).target_logprob(), b.rows(r).target_logprob(), 1e-5);
    // Batched and unbatched GEMMs round differently (oneDNN's f32 kernels
    // depend on M), so near-ties (|delta logprob| < 2e-5) may swap places.
    EXPECT_LE(std::abs(a.rows(r).target_rank() - b.rows(r).target_rank()), 2);
    ASSERT_EQ(a.rows(r).top_k_size(), b.rows(r).top_k_size());
    const auto& tb = b.rows(r).top_k();
    for (int k = 0; k < a.rows(r).top_k_size(); ++k) {
      EXPECT_NEAR(a.rows(r).top_k(k).logprob(), tb[k].logprob(), 1e-5);
      if (a.rows(r).top_k(k).token_id() != tb[k].token_id()) {
        const bool near_tie =
            (k > 0 && std::abs(tb[k].logprob() - tb[k - 1].logprob()) < 2e-5) ||
            (k + 1 < tb.size() && std::abs(tb[k].logprob() - tb[k + 1].logprob()) < 2e-5);
        EXPECT_TRUE(near_tie) << "row " << r << " k " << k;
      }
    }
  }
  EXPECT_NEAR(a.sum_target_logprob(), b.sum_target_logprob(), 1e-4);
  EXPECT_EQ(a.num_targets(), b.num_targets());
  EXPECT_EQ(a.request_id(), b.request_id());
}

struct Running {
  std::unique_ptr<VocabdServer> server;
  std::unique_ptr<VocabdClient> client;
};

Running Start(ModelServingOptions serving) {
  VocabdServer::Options options;
  options.listen_address = "127.0.0.1:0";
  options.models = {{"bin", testing::Stories260KBin()}, {"hf", testing::Stories260KHfDir()}};
  options.compute_threads = 1;
  options.serving = std::move(serving);
  Running r;
  auto server = VocabdServer::Create(options);
  EXPECT_TRUE(server.ok()) << server.status();
  if (!server.ok()) return r;
  r.server = std::move(*server);
  VocabdClient::Options client_options;
  client_options.target = r.server->target();
  auto client = VocabdClient::Create(client_options);
  EXPECT_TRUE(client.ok());
  r.client = std::move(*client);
  return r;
}

class ScoringServingTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ModelServingOptions serving;
    serving.batching.max_batch_rows = 64;
    serving.batching.max_queue_delay_us = 200;
    serving.batching.max_queue_rows = 128;
    ASSERT_TRUE(serving.AddBatchingFlag("hf:max_queue_rows=100").ok());
    running_ = new Running(Start(serving));
  }
  static void TearDownTestSuite() {
    running_->client.reset();
    running_->server->Shutdown();
    delete running_;
  }
  static VocabdClient& client() { return *running_->client; }
  static Running* running_;
};
Running* ScoringServingTest::running_ = nullptr;

TEST_F(ScoringServingTest, ScoreStreamAnswersInOrderLikeScore) {
  auto stub = v1::ScoringService::NewStub(client().channel());
  grpc::ClientContext ctx;
  auto stream = stub->ScoreStream(&ctx);
  std::vector<v1::ScoreRequest> requests = {
      MakeScore("bin", 3, 0.1, 5), MakeScore("hf", 1, 0.2, 512), MakeScore("", 7, 0.3, 0),
      MakeScore("hf", 2, 0.4, 1), MakeScore("bin", 4, 0.5, 64)};
  for (const auto& r : requests) ASSERT_TRUE(stream->Write(r));
  ASSERT_TRUE(stream->WritesDone());
  for (const auto& r : requests) {
    v1::ScoreResponse got;
    ASSERT_TRUE(stream->Read(&got));
    auto want = client().Score(r);
    ASSERT_TRUE(want.ok()) << want.status();
    ExpectSameScores(got, *want);
    EXPECT_EQ(got.model(), r.model().empty() ? "bin" : r.model());
  }
  v1::ScoreResponse extra;
  EXPECT_FALSE(stream->Read(&extra));
  grpc::Status st = stream->Finish();
  EXPECT_TRUE(st.ok()) << st.error_message();
}

TEST_F(ScoringServingTest, ScoreStreamInterleavedWritesAndReads) {
  auto stub = v1::ScoringService::NewStub(client().channel());
  grpc::ClientContext ctx;
  auto stream = stub->ScoreStream(&ctx);
  for (int i = 0; i < 20; ++i) {
    const v1::ScoreRequest r = MakeScore("hf", 1 + i % 3, 0.05 * (i + 1), 3);
    ASSERT_TRUE(stream->Write(r));
    v1::ScoreResponse got;
    ASSERT_TRUE(stream->Read(&got));
    EXPECT_EQ(got.request_id(), r.request_id());
    EXPECT_EQ(got.rows_size(), 1 + i % 3);
  }
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(ScoringServingTest, ScoreStreamErrorEndsStreamNamingTheRequest) {
  auto stub = v1::ScoringService::NewStub(client().channel());
  grpc::ClientContext ctx;
  auto stream = stub->ScoreStream(&ctx);
  ASSERT_TRUE(stream->Write(MakeScore("bin", 2, 0.3, 2)));
  v1::ScoreRequest bad = MakeScore("bin", 1, 0.3, 2);
  bad.set_top_k(2000);
  stream->Write(bad);
  stream->Write(MakeScore("bin", 1, 0.3, 2));
  stream->WritesDone();
  v1::ScoreResponse got;
  ASSERT_TRUE(stream->Read(&got));  // the first request's answer still arrives
  EXPECT_EQ(got.rows_size(), 2);
  EXPECT_FALSE(stream->Read(&got));
  grpc::Status st = stream->Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("requests[1]: top_k = 2000"));

  // Unknown model in a stream; the server keeps serving.
  grpc::ClientContext ctx2;
  auto stream2 = stub->ScoreStream(&ctx2);
  stream2->Write(MakeScore("nope", 1, 0.3, 2));
  stream2->WritesDone();
  EXPECT_FALSE(stream2->Read(&got));
  st = stream2->Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(st.error_message(), HasSubstr("requests[0]: model 'nope' not found"));
  EXPECT_TRUE(client().Score(MakeScore("bin", 1, 0.3, 2)).ok());
}

// A client that writes every request before reading any answer, where a
// request fails while an earlier, large answer is still unsent: the server
// keeps reading (and dropping) the later requests, so the error arrives, not
// the deadline (a server that stopped reading would leave the call to end in
// DEADLINE_EXCEEDED; embed_stream_test has the same case for EmbedStream).
TEST_F(ScoringServingTest, ScoreStreamClientWritingEverythingFirstGetsTheErrorNotADeadline) {
  auto stub = v1::ScoringService::NewStub(client().channel());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::seconds(20 * testing::kSanitizerSlowdown));
  auto stream = stub->ScoreStream(&ctx);
  ASSERT_TRUE(stream->Write(MakeScore("bin", 2048, 0.3, 512)));  // answer: 2048 x 512 top-k, ~12 MB
  v1::ScoreRequest bad = MakeScore("bin", 1, 0.3, 2);
  bad.set_top_k(2000);
  ASSERT_TRUE(stream->Write(bad));
  for (int i = 0; i < 16; ++i) {  // 16 x 1 MiB of hidden rows, never scored
    if (!stream->Write(MakeScore("bin", 4096, 0.01 * i, 2))) break;
  }
  stream->WritesDone();
  v1::ScoreResponse got;
  int answers = 0;
  while (stream->Read(&got)) ++answers;
  EXPECT_EQ(answers, 1);
  const grpc::Status st = stream->Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  EXPECT_THAT(st.error_message(), HasSubstr("requests[1]: top_k = 2000"));
  EXPECT_TRUE(client().Score(MakeScore("bin", 1, 0.3, 2)).ok());
}

TEST_F(ScoringServingTest, EmptyStreamFinishesOk) {
  auto stub = v1::ScoringService::NewStub(client().channel());
  grpc::ClientContext ctx;
  auto stream = stub->ScoreStream(&ctx);
  stream->WritesDone();
  v1::ScoreResponse got;
  EXPECT_FALSE(stream->Read(&got));
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(ScoringServingTest, ConcurrentCallersAreBatchedAndCorrect) {
  constexpr int kCallers = 24;
  std::vector<v1::ScoreResponse> got(kCallers);
  std::vector<grpc::Status> status(kCallers);
  std::vector<std::thread> threads;
  for (int i = 0; i < kCallers; ++i) {
    threads.emplace_back([&, i] {
      auto r = client().Score(MakeScore("hf", 1 + i % 2, 0.01 * (i + 1), 4));
      if (r.ok()) got[i] = *r;
      status[i] = r.ok() ? grpc::Status::OK : grpc::Status(grpc::StatusCode::UNKNOWN, "");
    });
  }
  for (auto& t : threads) t.join();
  // Reference: the same requests one at a time.
  for (int i = 0; i < kCallers; ++i) {
    ASSERT_TRUE(status[i].ok()) << i;
    auto want = client().Score(MakeScore("hf", 1 + i % 2, 0.01 * (i + 1), 4));
    ASSERT_TRUE(want.ok());
    ExpectSameScores(got[i], *want);
  }
  // ComputeLogits with per-request options through the batcher too.
  v1::ComputeLogitsRequest lr;
  lr.set_model("hf");
  *lr.mutable_hidden() = EncodeFloatTensor(SomeHidden(2, 0.7), {2, kScoringHidden});
  lr.set_log_softmax(true);
  lr.set_vocab_limit(100);
  lr.set_output_dtype(v1::BF16);
  auto logits = client().ComputeLogits(lr);
  ASSERT_TRUE(logits.ok()) << logits.status();
  EXPECT_EQ(logits->logits().dtype(), v1::BF16);
  auto decoded = DecodeFloatTensor(logits->logits(), "logits");
  ASSERT_TRUE(decoded.ok());
  EXPECT_TRUE(std::isinf((*decoded)[100]) && (*decoded)[100] < 0);
}

TEST_F(ScoringServingTest, GetModelShowsBatchingAndDtype) {
  auto bin = client().GetModel("bin");
  auto hf = client().GetModel("hf");
  ASSERT_TRUE(bin.ok() && hf.ok());
  EXPECT_EQ(bin->dtype(), v1::F32);
  EXPECT_EQ(bin->requested_dtype(), v1::DTYPE_UNSPECIFIED);
  EXPECT_EQ(bin->dtype_fallback_reason(), "");
  EXPECT_FALSE(bin->lm_head_implementation().empty());
  // The tied F32 table is packed at load (CPUs with the AVX-512 head kernel)
  // or copied to huge pages in the background after load.
  EXPECT_THAT(bin->lm_head_memory(), AnyOf("huge pages (packed at load)",
                                           "huge pages (copied at load)",
                                           "file mapping, copying to huge pages"));
  ASSERT_TRUE(bin->has_batching());
  EXPECT_EQ(bin->batching().max_batch_rows(), 64);
  EXPECT_EQ(bin->batching().max_queue_delay_us(), 200);
  EXPECT_EQ(bin->batching().max_queue_rows(), 128);
  EXPECT_EQ(hf->batching().max_queue_rows(), 100);  // per-model override
}

// One request with more rows than max_queue_rows is not refused as "LM-head
// queue is full: 0 rows queued" (it could never succeed): it enters the empty
// queue and runs in slices of max_batch_rows (lib/serving/dynamic_batcher.h;
// the bound against a non-empty queue: dynamic_batcher_test).
TEST_F(ScoringServingTest, RequestOverQueueRowsIsSplitAndSucceeds) {
  auto r = client().Score(MakeScore("hf", 101, 0.2, 1));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rows_size(), 101);
  auto alone = client().Score(MakeScore("hf", 100, 0.2, 1));
  ASSERT_TRUE(alone.ok());
  for (int i = 0; i < 100; ++i) {
    EXPECT_NEAR(r->rows(i).target_logprob(), alone->rows(i).target_logprob(), 1e-5) << i;
  }
  v1::ComputeLogitsRequest lr;
  lr.set_model("bin");
  *lr.mutable_hidden() = EncodeFloatTensor(SomeHidden(129, 0.7), {129, kScoringHidden});
  auto l = client().ComputeLogits(lr);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->logits().shape(0), 129);
  EXPECT_EQ(l->logits().data().size(), 129u * 512 * 4);
}

// Regression: a stream that ends (deadline, client cancel) while later
// requests of it are still queued for the LM head. Their cancellation check
// reads the call's ServerContext, which gRPC frees once the finished call is
// done, so the reactor must not Finish before they are back (the server died
// with SIGSEGV in ServerContextBase::IsCancelled on the batch loop).
TEST(ScoreStreamLifetimeTest, StreamEndingWithRequestsQueuedKeepsServing) {
  ModelServingOptions serving;
  serving.batching.max_batch_rows = 1;  // every request is a GEMM of its own
  serving.batching.max_queue_rows = 1 << 20;
  Running r = Start(serving);
  ASSERT_NE(r.server, nullptr);
  auto stub = v1::ScoringService::NewStub(r.client->channel());
  const v1::ScoreRequest big = MakeScore("bin", 300, 0.4, 4);
  for (int round = 0; round < 12; ++round) {
    grpc::ClientContext ctx;
    const bool cancel = round % 2 == 1;
    if (!cancel) {
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(20));
    }
    auto stream = stub->ScoreStream(&ctx);
    for (int i = 0; i < 64; ++i) {
      if (!stream->Write(big)) break;
    }
    v1::ScoreResponse got;
    if (cancel) {
      stream->Read(&got);
      ctx.TryCancel();
    }
    while (stream->Read(&got)) {
    }
    const grpc::Status st = stream->Finish();
    // Either it ended early (DEADLINE_EXCEEDED / CANCELLED) or, on a fast
    // machine, all 64 answers made it.
    if (!st.ok()) {
      EXPECT_TRUE(st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
                  st.error_code() == grpc::StatusCode::CANCELLED)
          << st.error_code() << " " << st.error_message();
    }
  }
  // A stream whose request fails while later ones are in compute.
  {
    grpc::ClientContext ctx;
    auto stream = stub->ScoreStream(&ctx);
    ASSERT_TRUE(stream->Write(big));
    for (int i = 0; i < 8; ++i) stream->Write(big);
    v1::ScoreRequest bad = big;
    bad.set_top_k(5000);
    stream->Write(bad);
    for (int i = 0; i < 8; ++i) stream->Write(big);
    stream->WritesDone();
    v1::ScoreResponse got;
    int answers = 0;
    while (stream->Read(&got)) ++answers;
    EXPECT_EQ(answers, 9);
    const grpc::Status st = stream->Finish();
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
    EXPECT_THAT(st.error_message(), HasSubstr("requests[9]: top_k = 5000"));
  }
  auto after = r.client->Score(MakeScore("bin", 2, 0.3, 2));
  EXPECT_TRUE(after.ok()) << after.status();
  r.client.reset();
  r.server->Shutdown();
}

TEST(ScoringServingOptionsTest, Bf16WeightsAndBatchingOff) {
  ModelServingOptions serving;
  serving.dynamic_batching = false;
  ASSERT_TRUE(serving.AddWeightsDTypeFlag("hf=bf16").ok());
  Running r = Start(serving);
  ASSERT_NE(r.client, nullptr);
  auto bin = r.client->GetModel("bin");
  auto hf = r.client->GetModel("hf");
  ASSERT_TRUE(bin.ok() && hf.ok());
  EXPECT_FALSE(bin->has_batching());
  EXPECT_EQ(hf->requested_dtype(), v1::BF16);
  if (LmHead::Bf16Supported()) {
    EXPECT_EQ(hf->dtype(), v1::BF16);
    EXPECT_EQ(bin->resident_bytes() - hf->resident_bytes(), 512 * 64 * 2);
  } else {
    EXPECT_EQ(hf->dtype(), v1::F32);
    EXPECT_THAT(hf->dtype_fallback_reason(), HasSubstr("AVX512-BF16"));
  }
  // Scores agree with F32 within the bf16 bound; the embedding is the bf16
  // table, converted exactly.
  auto a = r.client->Score(MakeScore("bin", 2, 0.3, 3));
  v1::ScoreRequest req = MakeScore("hf", 2, 0.3, 3);
  auto b = r.client->Score(req);
  ASSERT_TRUE(a.ok() && b.ok());
  for (int i = 0; i < 2; ++i) {
    EXPECT_NEAR(a->rows(i).target_logprob(), b->rows(i).target_logprob(), 0.05);
  }
  r.client.reset();
  r.server->Shutdown();
}

TEST(ScoringServingOptionsTest, FlagParsingAndValidation) {
  ModelServingOptions s;
  EXPECT_THAT(s.AddBatchingFlag("hf").message(), HasSubstr("NAME:KEY=VALUE"));
  EXPECT_THAT(s.AddBatchingFlag("hf:colour=3").message(), HasSubstr("unknown key 'colour'"));
  EXPECT_THAT(s.AddBatchingFlag("hf:max_batch_rows=x").message(),
              HasSubstr("max_batch_rows = 'x' is not an integer"));
  EXPECT_THAT(s.AddBatchingFlag("hf:enabled=maybe").message(), HasSubstr("enabled = 'maybe'"));
  EXPECT_THAT(s.AddWeightsDTypeFlag("hf=f16").message(), HasSubstr("'f16' is not auto"));
  EXPECT_THAT(s.AddWeightsDTypeFlag("=bf16").message(), HasSubstr("empty model name"));
  ModelServingOptions ok;
  ASSERT_TRUE(ok.AddBatchingFlag("hf:max_batch_rows=8").ok());
  ASSERT_TRUE(ok.AddBatchingFlag("hf:enabled=false").ok());
  ASSERT_TRUE(ok.AddBatchingFlag("bin:max_queue_delay_us=50").ok());
  ASSERT_TRUE(ok.AddWeightsDTypeFlag("bf16").ok());
  ASSERT_TRUE(ok.AddWeightsDTypeFlag("bin=f32").ok());
  EXPECT_TRUE(ok.Validate().ok());
  Model::Options hf = ok.ForModel("hf", "p", nullptr, nullptr);
  Model::Options bin = ok.ForModel("bin", "p", nullptr, nullptr);
  EXPECT_FALSE(hf.batching.has_value());
  ASSERT_TRUE(bin.batching.has_value());
  EXPECT_EQ(bin.batching->max_queue_delay_us, 50);
  EXPECT_EQ(hf.weights_dtype, WeightsDType::kBF16);
  EXPECT_EQ(bin.weights_dtype, WeightsDType::kF32);
  ModelServingOptions bad;
  bad.batching.max_batch_rows = 0;
  EXPECT_THAT(bad.Validate().message(), HasSubstr("--max-batch-rows = 0 must be >= 1"));
  ModelServingOptions bad2;
  ASSERT_TRUE(bad2.AddBatchingFlag("hf:max_queue_rows=3").ok());
  EXPECT_THAT(bad2.Validate().message(),
              HasSubstr("--batching hf: max_queue_rows = 3 must be >= max_batch_rows = 256"));
  // Unknown model names in --batching are refused at start.
  VocabdServer::Options options;
  options.listen_address = "127.0.0.1:0";
  options.models = {{"bin", testing::Stories260KBin()}};
  ASSERT_TRUE(options.serving.AddBatchingFlag("nope:max_batch_rows=4").ok());
  auto server = VocabdServer::Create(options);
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(server.status().message(), HasSubstr("--batching names model 'nope'"));
}

}  // namespace
}  // namespace vocabd
