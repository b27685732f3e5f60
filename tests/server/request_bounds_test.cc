// Every request bounded: each test sends one small request that would make an
// unbounded server allocate or compute far more than its size (a zero-sized
// axis with a huge batch x seq, thousands of rows of a wide vocabulary, ...) to
// a live server (started in this process on 127.0.0.1:0) and asserts the
// status, the message, the time and the server's memory growth: the peak VmRSS
// of this process (which runs the server) during the call, measured by
// resetting the peak (/proc/self/clear_refs "5") and reading VmHWM after the
// call.
//
// Also: --max-request-memory-bytes per RPC (RESOURCE_EXHAUSTED naming the
// flag and the numbers), NaN/Inf refused unless allow_non_finite, and
// CatchAll (no exception leaves a handler).
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "lib/serving/request_memory.h"
#include "proto/tensor_codec.h"
#include "server/handler_guard.h"
#include "server/server.h"
#include "tests/test_util.h"
#include "vocabd/v1/embedding.grpc.pb.h"
#include "vocabd/v1/position.grpc.pb.h"
#include "vocabd/v1/scoring.grpc.pb.h"
#include "vocabd/v1/tokenizer.grpc.pb.h"

namespace vocabd {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

constexpr int64_t kBoundsMiB = int64_t{1} << 20;

int64_t StatusKb(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const size_t n = std::strlen(key);
  while (std::getline(in, line)) {
    if (line.compare(0, n, key) == 0) return std::atoll(line.c_str() + n + 1);
  }
  return -1;
}

// Peak RSS growth (bytes) of this process -- the server's -- while `call`
// runs, and its duration.
struct Cost {
  int64_t peak_growth_bytes = 0;
  double seconds = 0;
};
template <typename F>
Cost Measure(F call) {
  { std::ofstream("/proc/self/clear_refs") << "5"; }  // VmHWM := VmRSS
  const int64_t before = StatusKb("VmRSS:");
  const auto start = Clock::now();
  call();
  Cost c;
  c.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  c.peak_growth_bytes = (StatusKb("VmHWM:") - before) * 1024;
  return c;
}

// A Llama-layout safetensors checkpoint with vocab_size x 64 (tied head),
// e.g. vocab 131,072 x hidden 64: a small file whose logits rows are large.
std::string WriteWideVocabModel(int64_t vocab) {
  const std::string dir = testing::MakeTempDir();
  const int64_t hidden = 64;
  nlohmann::json config = {{"architectures", {"LlamaForCausalLM"}},
                           {"model_type", "llama"},
                           {"hidden_size", hidden},
                           {"intermediate_size", 172},
                           {"num_attention_heads", 8},
                           {"num_key_value_heads", 4},
                           {"num_hidden_layers", 1},
                           {"vocab_size", vocab},
                           {"max_position_embeddings", 512},
                           {"rms_norm_eps", 1e-5},
                           {"rope_theta", 10000.0},
                           {"tie_word_embeddings", true},
                           {"torch_dtype", "float32"}};
  std::ofstream(dir + "/config.json") << config.dump();
  const int64_t embed_bytes = vocab * hidden * 4;
  nlohmann::json header = {
      {"model.embed_tokens.weight",
       {{"dtype", "F32"}, {"shape", {vocab, hidden}}, {"data_offsets", {0, embed_bytes}}}},
      {"model.norm.weight",
       {{"dtype", "F32"}, {"shape", {hidden}}, {"data_offsets", {embed_bytes, embed_bytes + 256}}}}};
  std::string h = header.dump();
  while (h.size() % 8 != 0) h.push_back(' ');
  std::ofstream out(dir + "/model.safetensors", std::ios::binary);
  const uint64_t len = h.size();
  out.write(reinterpret_cast<const char*>(&len), 8);
  out << h;
  const std::vector<float> table = testing::RandomNormal(static_cast<size_t>(vocab * hidden), 13);
  out.write(reinterpret_cast<const char*>(table.data()), embed_bytes);
  const std::vector<float> norm(64, 1.0f);
  out.write(reinterpret_cast<const char*>(norm.data()), 256);
  return dir;
}

struct Live {
  std::unique_ptr<VocabdServer> server;
  std::unique_ptr<v1::EmbeddingService::Stub> embedding;
  std::unique_ptr<v1::ScoringService::Stub> scoring;
  std::unique_ptr<v1::PositionService::Stub> positions;
  std::unique_ptr<v1::TokenizerService::Stub> tokenizer;
  ~Live() {
    if (server) server->Shutdown();
  }
};

std::unique_ptr<Live> StartServer(VocabdServer::Options options) {
  options.listen_address = "127.0.0.1:0";
  if (options.models.empty()) options.models = {{"stories260K", testing::Stories260KBin()}};
  auto server = VocabdServer::Create(options);
  EXPECT_TRUE(server.ok()) << server.status();
  if (!server.ok()) return nullptr;
  auto live = std::make_unique<Live>();
  live->server = std::move(*server);
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  auto channel = grpc::CreateCustomChannel(live->server->target(),
                                           grpc::InsecureChannelCredentials(), args);
  live->embedding = v1::EmbeddingService::NewStub(channel);
  live->scoring = v1::ScoringService::NewStub(channel);
  live->positions = v1::PositionService::NewStub(channel);
  live->tokenizer = v1::TokenizerService::NewStub(channel);
  return live;
}

v1::Tensor EmptyF32(std::vector<int64_t> shape) {
  v1::Tensor t;
  t.set_dtype(v1::F32);
  for (int64_t d : shape) t.add_shape(d);
  return t;  // data "" (0 elements: one axis is 0)
}

v1::Tensor Hidden(int64_t rows, int64_t width, float scale = 0.5f) {
  std::vector<float> v(static_cast<size_t>(rows * width));
  for (size_t i = 0; i < v.size(); ++i) v[i] = scale * std::sin(0.37f * static_cast<float>(i));
  return EncodeFloatTensor(v, {rows, width});
}

class RequestBoundsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    default_ = StartServer(VocabdServer::Options()).release();
  }
  static void TearDownTestSuite() {
    delete default_;
    default_ = nullptr;
  }
  static Live& live() { return *default_; }
  static Live* default_;
};
Live* RequestBoundsTest::default_ = nullptr;

// ---- item 1: ApplyRope with a zero-sized axis ------------------------------

TEST_F(RequestBoundsTest, ApplyRopeZeroSizedAxisIsRefusedBeforeAnyPositionsTable) {
  for (int64_t batch : {int64_t{32768}, int64_t{65536}}) {
    v1::ApplyRopeRequest request;
    *request.mutable_q() = EmptyF32({batch, 0, 32768, 8});
    *request.mutable_k() = EmptyF32({batch, 0, 32768, 8});
    grpc::Status status;
    const Cost cost = Measure([&] {
      grpc::ClientContext ctx;
      v1::ApplyRopeResponse response;
      status = live().positions->ApplyRope(&ctx, request, &response);
    });
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << batch;
    EXPECT_EQ(status.error_message(), "q.shape[1] (num_heads) = 0 must be > 0");
    // Was 38-47 s and 8 / 16 GiB (batch x seq int64 positions first).
    EXPECT_LT(cost.seconds, 0.5 * testing::kSanitizerSlowdown) << batch;
    EXPECT_RSS_LT(cost.peak_growth_bytes, 32 * kBoundsMiB) << batch;
  }
}

// ---- item 2: no exception leaves a handler ---------------------------------

TEST_F(RequestBoundsTest, ApplyRopeHugeZeroSizedAxisIsInvalidArgumentNotUnimplemented) {
  v1::ApplyRopeRequest request;
  *request.mutable_q() = EmptyF32({1048576, 0, 1048576, 8});
  *request.mutable_k() = EmptyF32({1048576, 0, 1048576, 8});
  grpc::Status status;
  const Cost cost = Measure([&] {
    grpc::ClientContext ctx;
    v1::ApplyRopeResponse response;
    status = live().positions->ApplyRope(&ctx, request, &response);
  });
  // Was UNIMPLEMENTED with an empty message (std::bad_alloc escaped).
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "q.shape[1] (num_heads) = 0 must be > 0");
  EXPECT_LT(cost.seconds, 0.5 * testing::kSanitizerSlowdown);
  EXPECT_RSS_LT(cost.peak_growth_bytes, 32 * kBoundsMiB);
}

TEST(HandlerGuardTest, BadAllocIsResourceExhaustedNamingTheRequestAndSize) {
  RequestMemory need = ApplyRopeMemory(1 << 20, 1 << 20, 1 << 16, 8, 4);
  absl::Status st = CatchAll("ApplyRope", &need, []() -> absl::Status { throw std::bad_alloc(); });
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(st.message(), HasSubstr("ApplyRope: out of memory (the request needs about "));
  EXPECT_THAT(st.message(), HasSubstr(absl::StrCat(need.bytes(), " bytes: q, k 2097152 x 4")));
  st = CatchAll("Score", nullptr, []() -> absl::Status { throw std::bad_alloc(); });
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(st.message(), HasSubstr("Score: out of memory"));
  st = CatchAll("Embed", nullptr, []() -> absl::Status { throw std::runtime_error("boom"); });
  EXPECT_EQ(st.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(st.message(), "Embed: unexpected exception: boom");
  st = CatchAll("Embed", nullptr, []() -> absl::Status { throw 7; });
  EXPECT_EQ(st.code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(CatchAll("Embed", nullptr, [] { return absl::OkStatus(); }).ok());
}

// ---- item 3: Score / ComputeLogits hold one slice of logits ----------------

class WideVocabTest : public ::testing::Test {
 protected:
  static constexpr int64_t kVocab = 131072;
  static void SetUpTestSuite() {
    VocabdServer::Options options;
    options.models = {{"wide", WriteWideVocabModel(kVocab)}};
    live_ = StartServer(options).release();
  }
  static void TearDownTestSuite() {
    delete live_;
    live_ = nullptr;
  }
  static Live* live_;
};
Live* WideVocabTest::live_ = nullptr;

TEST_F(WideVocabTest, Score4096RowsHoldsOneBatchOfLogitsNotAll) {
  ASSERT_NE(live_, nullptr);
  // 4,096 rows of 131,072 logits (fewer rows only under TSan's slowdown).
  const int rows = static_cast<int>(testing::TsanScaled(4096, 512));
  v1::ScoreRequest request;
  *request.mutable_hidden() = Hidden(rows, 64);
  for (int i = 0; i < rows; ++i) request.add_target_ids((i * 7919) % kVocab);
  request.set_top_k(2);
  grpc::Status status;
  v1::ScoreResponse response;
  const Cost cost = Measure([&] {
    grpc::ClientContext ctx;
    status = live_->scoring->Score(&ctx, request, &response);
  });
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.rows_size(), rows);
  EXPECT_EQ(response.num_targets(), rows);
  // All rows' logits are 4096 x 131072 x 4 = 2 GiB (the old peak); one
  // batch (256 rows) is 128 MiB. The growth stays within the formula.
  const RequestMemory need = ScoreMemory(rows, 64, kVocab, 256, 2);
  // (+64 MiB: allocator and gRPC buffers beside the formula's bytes.)
  EXPECT_RSS_LT(cost.peak_growth_bytes, need.bytes() + 64 * kBoundsMiB) << need.formula();
  EXPECT_RSS_LT(cost.peak_growth_bytes, 512 * kBoundsMiB);
  // 34 GFLOP of GEMM: seconds on an idle core; bounded generously for a
  // shared CPU (94 s seen with load 17 on 2 cores), not "under a second".
  EXPECT_LT(cost.seconds, 300);
  std::printf("Score 4096 rows x vocab 131072: %.2f s, peak growth %lld MiB (budgeted %lld MiB)\n",
              cost.seconds, static_cast<long long>(cost.peak_growth_bytes / kBoundsMiB),
              static_cast<long long>(need.bytes() / kBoundsMiB));
}

TEST_F(WideVocabTest, ComputeLogitsEncodesSlicesStraightIntoTheResponse) {
  ASSERT_NE(live_, nullptr);
  v1::ComputeLogitsRequest request;
  *request.mutable_hidden() = Hidden(128, 64);
  request.set_output_dtype(v1::BF16);
  grpc::Status status;
  v1::ComputeLogitsResponse response;
  const Cost cost = Measure([&] {
    grpc::ClientContext ctx;
    status = live_->scoring->ComputeLogits(&ctx, request, &response);
  });
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.logits().shape_size(), 2);
  EXPECT_EQ(response.logits().shape(1), kVocab);
  EXPECT_EQ(response.logits().data().size(), 128u * kVocab * 2);
  // The client's copies of the 32 MiB response are in this process too.
  const RequestMemory need = ComputeLogitsMemory(128, 64, kVocab, 256, 2);
  EXPECT_RSS_LT(cost.peak_growth_bytes, need.bytes() + 64 * kBoundsMiB + 32 * kBoundsMiB) << need.formula();
  std::printf("ComputeLogits 128 rows x vocab 131072 BF16: peak growth %lld MiB (budgeted %lld)\n",
              static_cast<long long>(cost.peak_growth_bytes / kBoundsMiB),
              static_cast<long long>(need.bytes() / kBoundsMiB));
  // Same values as F32 logits rounded to BF16 by the codec.
  request.set_output_dtype(v1::F32);
  *request.mutable_hidden() = Hidden(2, 64);
  grpc::ClientContext ctx32;
  v1::ComputeLogitsResponse f32;
  ASSERT_TRUE(live_->scoring->ComputeLogits(&ctx32, request, &f32).ok());
  request.set_output_dtype(v1::BF16);
  grpc::ClientContext ctx16;
  v1::ComputeLogitsResponse bf16;
  ASSERT_TRUE(live_->scoring->ComputeLogits(&ctx16, request, &bf16).ok());
  auto a = DecodeFloatTensor(f32.logits(), "f32");
  auto b = DecodeFloatTensor(bf16.logits(), "bf16");
  ASSERT_TRUE(a.ok() && b.ok());
  const v1::Tensor rounded = EncodeFloatTensor(*a, {2, kVocab}, DType::kBF16);
  EXPECT_EQ(rounded.data(), bf16.logits().data());
}

TEST_F(WideVocabTest, OverBudgetIsResourceExhaustedNamingTheFlagAndNumbers) {
  ASSERT_NE(live_, nullptr);
  v1::ComputeLogitsRequest request;
  *request.mutable_hidden() = Hidden(1024, 64);  // response 1024 x 131072 x 4 x 2 = 1 GiB
  grpc::Status status;
  const Cost cost = Measure([&] {
    grpc::ClientContext ctx;
    v1::ComputeLogitsResponse response;
    status = live_->scoring->ComputeLogits(&ctx, request, &response);
  });
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  const RequestMemory need = ComputeLogitsMemory(1024, 64, kVocab, 256, 4);
  EXPECT_EQ(status.error_message(),
            absl::StrCat("ComputeLogits needs ", need.bytes(),
                         " bytes (hidden 1024 x 64 x 4 + batch 256 x 131136 x 4 + response 1024 x "
                         "131072 x 4 x 2) > --max-request-memory-bytes = 268435456"));
  EXPECT_LT(cost.seconds, 0.5 * testing::kSanitizerSlowdown);
  EXPECT_RSS_LT(cost.peak_growth_bytes, 32 * kBoundsMiB);
}

// ---- item 6: more rows than --max-queue-rows -------------------------------

TEST_F(RequestBoundsTest, ScoreAndComputeLogitsWithMoreRowsThanTheQueueSucceed) {
  // Default flags: --max-queue-rows 4096, --max-batch-rows 256.
  v1::ScoreRequest score;
  *score.mutable_hidden() = Hidden(4097, 64);
  for (int i = 0; i < 4097; ++i) score.add_target_ids(i % 512);
  grpc::Status status;
  v1::ScoreResponse scored;
  Cost cost = Measure([&] {
    grpc::ClientContext ctx;
    status = live().scoring->Score(&ctx, score, &scored);
  });
  // Was RESOURCE_EXHAUSTED "LM-head queue is full: 0 rows queued".
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(scored.rows_size(), 4097);
  // 4097 x 512 x 64 GEMM: milliseconds alone; the bound allows a loaded CI box.
  EXPECT_LT(cost.seconds, 5.0 * testing::kSanitizerSlowdown);
  EXPECT_RSS_LT(cost.peak_growth_bytes, 64 * kBoundsMiB);
  // Row 4096 (in the last slice) scores as it does alone.
  v1::ScoreRequest last;
  {
    auto all = DecodeFloatTensor(score.hidden(), "hidden");
    ASSERT_TRUE(all.ok());
    *last.mutable_hidden() = EncodeFloatTensor(
        std::vector<float>(all->end() - 64, all->end()), {1, 64});
  }
  last.add_target_ids(4096 % 512);
  grpc::ClientContext ctx_last;
  v1::ScoreResponse alone;
  ASSERT_TRUE(live().scoring->Score(&ctx_last, last, &alone).ok());
  EXPECT_NEAR(scored.rows(4096).target_logprob(), alone.rows(0).target_logprob(), 1e-5);
  EXPECT_NEAR(scored.rows(4096).logsumexp(), alone.rows(0).logsumexp(), 1e-5);

  v1::ComputeLogitsRequest logits;
  *logits.mutable_hidden() = Hidden(5000, 64);
  v1::ComputeLogitsResponse computed;
  cost = Measure([&] {
    grpc::ClientContext ctx;
    status = live().scoring->ComputeLogits(&ctx, logits, &computed);
  });
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(computed.logits().shape(0), 5000);
  EXPECT_EQ(computed.logits().data().size(), 5000u * 512 * 4);
  EXPECT_LT(cost.seconds, 5.0 * testing::kSanitizerSlowdown);
  EXPECT_RSS_LT(cost.peak_growth_bytes, 64 * kBoundsMiB);
}

// ---- the memory bound per RPC -----------------------------------------------

class SmallBudgetTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    VocabdServer::Options options;
    options.max_request_memory_bytes = kBoundsMiB;
    live_ = StartServer(options).release();
  }
  static void TearDownTestSuite() {
    delete live_;
    live_ = nullptr;
  }
  static void ExpectOverBudget(const grpc::Status& status, const std::string& rpc) {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << rpc;
    EXPECT_THAT(status.error_message(), HasSubstr(rpc + " needs "));
    EXPECT_THAT(status.error_message(), HasSubstr("> --max-request-memory-bytes = 1048576"));
  }
  static Live* live_;
};
Live* SmallBudgetTest::live_ = nullptr;

TEST_F(SmallBudgetTest, EveryRpcChecksItsBudgetBeforeAllocating) {
  ASSERT_NE(live_, nullptr);
  {
    v1::EmbedRequest request;
    request.add_sequences()->mutable_token_ids()->Resize(4096, 1);  // 4096 x 64 x 4 x 2 = 2 MiB
    grpc::ClientContext ctx;
    v1::EmbedResponse response;
    grpc::Status st = live_->embedding->Embed(&ctx, request, &response);
    ExpectOverBudget(st, "Embed");
    EXPECT_THAT(st.error_message(), HasSubstr("rows 4096 x 64 x 4"));
  }
  {
    v1::EmbedRequest request;
    request.add_sequences()->mutable_token_ids()->Resize(16, 1);
    grpc::ClientContext ctx;
    v1::EmbedResponse response;
    EXPECT_TRUE(live_->embedding->Embed(&ctx, request, &response).ok());
  }
  {
    v1::ScoreRequest request;
    *request.mutable_hidden() = Hidden(4096, 64);  // hidden alone is 1 MiB
    grpc::ClientContext ctx;
    v1::ScoreResponse response;
    ExpectOverBudget(live_->scoring->Score(&ctx, request, &response), "Score");
  }
  {
    v1::ApplyRopeRequest request;
    std::vector<float> q(2 * 8 * 4096 * 8, 0.5f), k(2 * 4 * 4096 * 8, 0.5f);
    *request.mutable_q() = EncodeFloatTensor(q, {2, 8, 4096, 8});
    *request.mutable_k() = EncodeFloatTensor(k, {2, 4, 4096, 8});
    request.set_allow_beyond_trained_length(true);
    grpc::ClientContext ctx;
    v1::ApplyRopeResponse response;
    grpc::Status st = live_->positions->ApplyRope(&ctx, request, &response);
    ExpectOverBudget(st, "ApplyRope");
    EXPECT_THAT(st.error_message(), HasSubstr("q, k 786432 x 4 + positions 8192 x 8"));
  }
  {
    v1::GetSinusoidalPositionsRequest request;
    request.set_num_positions(4096);
    request.set_dim(64);
    grpc::ClientContext ctx;
    v1::GetSinusoidalPositionsResponse response;
    grpc::Status st = live_->positions->GetSinusoidalPositions(&ctx, request, &response);
    ExpectOverBudget(st, "GetSinusoidalPositions");
    EXPECT_THAT(st.error_message(), HasSubstr("(table 4096 x 64 x 4 x 3 + frequencies 64 x 8)"));
  }
  {
    v1::GetAlibiSlopesRequest request;
    request.set_num_heads(8);
    request.set_include_bias(true);
    request.set_q_len(512);
    request.set_k_len(512);
    grpc::ClientContext ctx;
    v1::GetAlibiSlopesResponse response;
    ExpectOverBudget(live_->positions->GetAlibiSlopes(&ctx, request, &response),
                     "GetAlibiSlopes");
  }
  {
    v1::GetRopeCacheRequest request;
    request.set_num_positions(1 << 20);
    request.set_allow_beyond_trained_length(true);
    grpc::ClientContext ctx;
    v1::GetRopeCacheResponse response;
    ExpectOverBudget(live_->positions->GetRopeCache(&ctx, request, &response), "GetRopeCache");
  }
}

// The tokenizer RPCs and Score's candidates/pieces under the same bound.
// stories260K's tokenizer (tok512.bin) has pieces of at most P bytes; the
// formulas are checked exactly in RequestMemoryTest.
TEST_F(SmallBudgetTest, TokenizerRpcsAndScoreCandidatesCheckTheBudget) {
  ASSERT_NE(live_, nullptr);
  {
    // 65,536 one-byte ids on the wire: 1 MiB of ids once copied, plus text.
    v1::DetokenizeRequest request;
    request.add_sequences()->mutable_ids()->Resize(65536, 5);
    grpc::ClientContext ctx;
    v1::DetokenizeResponse response;
    grpc::Status st = live_->tokenizer->Detokenize(&ctx, request, &response);
    ExpectOverBudget(st, "Detokenize");
    EXPECT_THAT(st.error_message(),
                HasSubstr("(sequences 1 x 512 + ids 65536 x 8 x 2 + text 65536 x "));
  }
  {
    // 2,000,000 empty sequences (4 MB on the wire): no ids, but each
    // sequence costs its own objects (561 MB peak if not bounded).
    v1::DetokenizeRequest request;
    for (int i = 0; i < 2000000; ++i) request.add_sequences();
    grpc::Status st;
    const Cost cost = Measure([&] {
      grpc::ClientContext ctx;
      v1::DetokenizeResponse response;
      st = live_->tokenizer->Detokenize(&ctx, request, &response);
    });
    ExpectOverBudget(st, "Detokenize");
    EXPECT_THAT(st.error_message(), HasSubstr("(sequences 2000000 x 512 + ids 0 x 8 x 2"));
    std::printf("2,000,000 empty Detokenize sequences: %.2f s, peak growth %lld MiB\n",
                cost.seconds, static_cast<long long>(cost.peak_growth_bytes / kBoundsMiB));
    EXPECT_LT(cost.seconds, 10.0 * testing::kSanitizerSlowdown);
    // What is left is gRPC receiving and protobuf parsing 2,000,000 messages
    // (~175 MiB measured; 561 MiB before the per-sequence term).
    EXPECT_RSS_LT(cost.peak_growth_bytes, 320 * kBoundsMiB);
  }
  {
    v1::DetokenizeRequest request;
    request.add_sequences()->mutable_ids()->Resize(64, 403);
    grpc::ClientContext ctx;
    v1::DetokenizeResponse response;
    EXPECT_TRUE(live_->tokenizer->Detokenize(&ctx, request, &response).ok());
  }
  {
    v1::TokenizeRequest request;
    request.add_texts(std::string(65536, 'a'));
    request.set_return_pieces(true);
    grpc::ClientContext ctx;
    v1::TokenizeResponse response;
    grpc::Status st = live_->tokenizer->Tokenize(&ctx, request, &response);
    ExpectOverBudget(st, "Tokenize");
    EXPECT_THAT(st.error_message(),
                HasSubstr("(texts 1 x 512 + encoder 65541 x 32 + ids 65541 x 8 x 3 + pieces "
                          "65541 x 32 x 3 + piece bytes 65536 x 8 x 3 + special pieces 1 x 4 x "));
  }
  {
    v1::TokenizeRequest request;
    request.add_texts("Once upon a time");
    request.set_return_pieces(true);
    request.set_return_offsets(true);
    grpc::ClientContext ctx;
    v1::TokenizeResponse response;
    EXPECT_TRUE(live_->tokenizer->Tokenize(&ctx, request, &response).ok());
  }
  {
    v1::ScoreRequest request;
    *request.mutable_hidden() = Hidden(16, 64);
    for (int id = 0; id < 4096; ++id) request.add_candidate_ids(id % 512);
    grpc::ClientContext ctx;
    v1::ScoreResponse response;
    grpc::Status st = live_->scoring->Score(&ctx, request, &response);
    ExpectOverBudget(st, "Score");
    EXPECT_THAT(st.error_message(), HasSubstr("candidates 16 x 4096 x 16 x 3"));
  }
  {
    v1::ScoreRequest request;
    *request.mutable_hidden() = Hidden(16, 64);
    request.set_top_k(8);
    request.set_return_pieces(true);
    for (int id : {261, 378}) request.add_candidate_ids(id);
    grpc::ClientContext ctx;
    v1::ScoreResponse response;
    grpc::Status st = live_->scoring->Score(&ctx, request, &response);
    ASSERT_TRUE(st.ok()) << st.error_message();
    EXPECT_EQ(response.rows(0).candidates_size(), 2);
  }
  {
    v1::GetVocabularyRequest request;
    request.set_page_size(10000);  // 512 entries exist
    grpc::ClientContext ctx;
    v1::GetVocabularyResponse response;
    ASSERT_TRUE(live_->tokenizer->GetVocabulary(&ctx, request, &response).ok());
    EXPECT_EQ(response.entries_size(), 512);
  }
}

// The documented total (4 x --max-text-bytes in one request) fits the
// default budget: stories260K's vocabulary has "▁", so one token per byte.
TEST_F(RequestBoundsTest, TokenizeOfFourMaxSizeTextsFitsTheDefaultBudget) {
  v1::TokenizeRequest request;
  std::string text;
  while (text.size() + 10 <= (size_t{1} << 20)) text += "Once upon ";
  for (int i = 0; i < 4; ++i) request.add_texts(text);
  grpc::ClientContext ctx;
  v1::TokenizeResponse response;
  grpc::Status st = live().tokenizer->Tokenize(&ctx, request, &response);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(response.results_size(), 4);
  // BOS, " Once" and " upon" per repetition, and the trailing space's "▁".
  EXPECT_EQ(response.results(0).ids_size(), 1 + 2 * static_cast<int>(text.size() / 10) + 1);
}

TEST(RequestMemoryTest, TokenizerAndScoreCandidateFormulas) {
  EXPECT_EQ(TokenizeMemory(100, 2, 3, 10, false, false).formula(),
            "texts 2 x 512 + encoder 310 x 32 + ids 310 x 8 x 3");
  EXPECT_EQ(TokenizeMemory(100, 2, 1, 10, false, false).formula(),
            "texts 2 x 512 + encoder 110 x 32 + ids 110 x 8 x 3");
  const RequestMemory all = TokenizeMemory(100, 2, 3, 10, true, true);
  EXPECT_EQ(all.formula(),
            "texts 2 x 512 + encoder 310 x 32 + ids 310 x 8 x 3 + offsets 310 x 16 x 3 + "
            "pieces 310 x 32 x 3 + piece bytes 100 x 8 x 3 + special pieces 2 x 4 x 10 x 3");
  EXPECT_EQ(all.bytes(),
            1024 + 310 * 32 + 310 * 24 + 310 * 48 + 310 * 96 + 100 * 24 + 2 * 4 * 10 * 3);
  const RequestMemory detok = DetokenizeMemory(3, 1000, 12);
  EXPECT_EQ(detok.formula(), "sequences 3 x 512 + ids 1000 x 8 x 2 + text 1000 x 12 x 3");
  EXPECT_EQ(detok.bytes(), 1536 + 16000 + 36000);
  EXPECT_EQ(VocabularyMemory(512, 12).bytes(), 512 * 72 * 3);
  const RequestMemory score = ScoreMemory(10, 64, 512, 256, 4, 3, 12);
  EXPECT_EQ(score.formula(),
            "hidden 10 x 64 x 4 + batch 10 x 576 x 4 + targets 10 x 8 + results 10 x 128 x 3"
            " + candidates 10 x 3 x 16 x 3 + pieces 10 x 8 x 40 x 3");
  EXPECT_EQ(score.bytes(), 2560 + 23040 + 80 + 3840 + 1440 + 9600);
  // Saturates: a text size near INT64_MAX is refused, never wraps.
  EXPECT_EQ(TokenizeMemory(std::numeric_limits<int64_t>::max() / 2, 1, 3, 10, true, true).bytes(),
            std::numeric_limits<int64_t>::max());
}

TEST(RequestMemoryTest, FormulasSaturateAndZeroBudgetIsUnbounded) {
  const RequestMemory huge = EmbedMemory(std::numeric_limits<int64_t>::max(), 0, 64, 4);
  EXPECT_EQ(huge.bytes(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(CheckRequestMemory(huge, 1).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(CheckRequestMemory(huge, 0).ok());
  const RequestMemory score = ScoreMemory(10, 64, 512, 256, 4);
  // hidden 10x64x4 + batch 10x(64+512)x4 + targets 10x8 + results 10x(64+64)x3
  EXPECT_EQ(score.bytes(), 2560 + 23040 + 80 + 3840);
  EXPECT_EQ(score.formula(),
            "hidden 10 x 64 x 4 + batch 10 x 576 x 4 + targets 10 x 8 + results 10 x 128 x 3");
}

// ---- request_fuzzer findings ------------------------------------------------

// fuzz/request_fuzzer crash-870a795a (7 bytes): GetSinusoidalPositions with
// num_positions 0 and dim = 3,053,453,310 passed num_positions x dim <= 2^26
// and the budget (0 bytes of table) and then allocated dim / 2 doubles (47.6 GB).
TEST_F(RequestBoundsTest, SinusoidalHugeDimWithZeroPositionsIsRefused) {
  v1::GetSinusoidalPositionsRequest request;
  request.set_num_positions(0);
  request.set_dim(11922309118);
  grpc::Status status;
  const Cost cost = Measure([&] {
    grpc::ClientContext ctx;
    v1::GetSinusoidalPositionsResponse response;
    status = live().positions->GetSinusoidalPositions(&ctx, request, &response);
  });
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "dim = 11922309118 exceeds 67108864 values");
  EXPECT_LT(cost.seconds, 0.5 * testing::kSanitizerSlowdown);
  EXPECT_RSS_LT(cost.peak_growth_bytes, 32 * kBoundsMiB);
}

// ---- non-finite input --------------------------------------------------------

TEST_F(RequestBoundsTest, NonFiniteHiddenAndQkAreInvalidArgumentUnlessAllowed) {
  std::vector<float> h(3 * 64, 0.25f);
  h[1 * 64 + 5] = std::numeric_limits<float>::quiet_NaN();
  h[2 * 64 + 9] = std::numeric_limits<float>::infinity();
  v1::ScoreRequest score;
  *score.mutable_hidden() = EncodeFloatTensor(h, {3, 64});
  {
    grpc::ClientContext ctx;
    v1::ScoreResponse response;
    grpc::Status st = live().scoring->Score(&ctx, score, &response);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(st.error_message(),
              "hidden[1, 5] = nan is not finite (set allow_non_finite to accept NaN/Inf)");
  }
  score.set_allow_non_finite(true);
  {
    grpc::ClientContext ctx;
    v1::ScoreResponse response;
    ASSERT_TRUE(live().scoring->Score(&ctx, score, &response).ok());
    EXPECT_TRUE(std::isnan(response.rows(1).logsumexp()));
    EXPECT_TRUE(std::isfinite(response.rows(0).logsumexp()));
  }
  v1::ComputeLogitsRequest logits;
  h[1 * 64 + 5] = 0.25f;
  *logits.mutable_hidden() = EncodeFloatTensor(h, {3, 64});
  {
    grpc::ClientContext ctx;
    v1::ComputeLogitsResponse response;
    grpc::Status st = live().scoring->ComputeLogits(&ctx, logits, &response);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(st.error_message(),
              "hidden[2, 9] = inf is not finite (set allow_non_finite to accept NaN/Inf)");
  }
  logits.set_allow_non_finite(true);
  {
    grpc::ClientContext ctx;
    v1::ComputeLogitsResponse response;
    EXPECT_TRUE(live().scoring->ComputeLogits(&ctx, logits, &response).ok());
  }
  // ApplyRope: q [1, 8, 4, 8] BHSD, k [1, 4, 4, 8].
  std::vector<float> q(1 * 8 * 4 * 8, 0.5f), k(1 * 4 * 4 * 8, 0.5f);
  k[((0 * 4 + 3) * 4 + 2) * 8 + 1] = -std::numeric_limits<float>::infinity();
  v1::ApplyRopeRequest rope;
  *rope.mutable_q() = EncodeFloatTensor(q, {1, 8, 4, 8});
  *rope.mutable_k() = EncodeFloatTensor(k, {1, 4, 4, 8});
  {
    grpc::ClientContext ctx;
    v1::ApplyRopeResponse response;
    grpc::Status st = live().positions->ApplyRope(&ctx, rope, &response);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(st.error_message(),
              "k[0, 3, 2, 1] = -inf is not finite (set allow_non_finite to accept NaN/Inf)");
  }
  q[5] = std::numeric_limits<float>::quiet_NaN();
  *rope.mutable_q() = EncodeFloatTensor(q, {1, 8, 4, 8});
  {
    grpc::ClientContext ctx;
    v1::ApplyRopeResponse response;
    grpc::Status st = live().positions->ApplyRope(&ctx, rope, &response);
    EXPECT_EQ(st.error_message(),
              "q[0, 0, 0, 5] = nan is not finite (set allow_non_finite to accept NaN/Inf)");
  }
  rope.set_allow_non_finite(true);
  {
    grpc::ClientContext ctx;
    v1::ApplyRopeResponse response;
    EXPECT_TRUE(live().positions->ApplyRope(&ctx, rope, &response).ok());
  }
}

TEST_F(RequestBoundsTest, FiniteRowsWhoseLogitsOverflowAreInvalidArgument) {
  // temperature 1e-40 (> 0, accepted) puts logits / T past FLT_MAX.
  const std::vector<float> h(2 * 64, 0.25f);
  v1::ScoreRequest score;
  *score.mutable_hidden() = EncodeFloatTensor(h, {2, 64});
  score.set_temperature(1e-40f);
  score.set_top_k(3);
  score.set_allow_non_finite(true);  // the rows are finite: refused either way
  {
    grpc::ClientContext ctx;
    v1::ScoreResponse response;
    grpc::Status st = live().scoring->Score(&ctx, score, &response);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(st.error_message(), ::testing::StartsWith("hidden[0] is finite but logits[0, "));
  }
  v1::ComputeLogitsRequest logits;
  *logits.mutable_hidden() = EncodeFloatTensor(h, {2, 64});
  logits.set_temperature(1e-40f);
  logits.set_log_softmax(true);
  {
    grpc::ClientContext ctx;
    v1::ComputeLogitsResponse response;
    grpc::Status st = live().scoring->ComputeLogits(&ctx, logits, &response);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(st.error_message(), ::testing::HasSubstr("leave float32's range"));
  }
  logits.set_temperature(0.5f);
  {
    grpc::ClientContext ctx;
    v1::ComputeLogitsResponse response;
    EXPECT_TRUE(live().scoring->ComputeLogits(&ctx, logits, &response).ok());
  }
}

}  // namespace
}  // namespace vocabd
