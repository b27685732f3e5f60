// Responses larger than --max-send-message-bytes, or than protobuf's 2 GiB
// limit, answer RESOURCE_EXHAUSTED naming the sizes; the server keeps
// serving. Regression: gRPC 1.51 aborts the process (`assertion failed:
// serializer_(msg_).ok()`) on a response of 2 GiB or more, which an 8 MB
// Embed request (8.4M token ids x hidden 64 x F32) asked for, as did
// GetRopeCache with rope.head_dim = 2^31 - 2 and num_positions = 0.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "proto/tensor_codec.h"
#include "client/vocabd_client.h"
#include "server/response_size.h"
#include "server/server.h"
#include "tests/test_util.h"
#include "vocabd/v1/position.grpc.pb.h"
#include "vocabd/v1/scoring.grpc.pb.h"

namespace vocabd {
namespace {

using ::testing::HasSubstr;

struct Running {
  std::unique_ptr<VocabdServer> server;
  std::unique_ptr<VocabdClient> client;
  ~Running() {
    client.reset();
    if (server) server->Shutdown();
  }
};

std::unique_ptr<Running> Start(int max_send_message_bytes) {
  VocabdServer::Options options;
  options.listen_address = "127.0.0.1:0";
  options.models = {{"stories260K", testing::Stories260KBin()}};
  options.max_send_message_bytes = max_send_message_bytes;
  auto r = std::make_unique<Running>();
  auto server = VocabdServer::Create(options);
  EXPECT_TRUE(server.ok()) << server.status();
  if (!server.ok()) return nullptr;
  r->server = std::move(*server);
  VocabdClient::Options client_options;
  client_options.target = r->server->target();
  auto client = VocabdClient::Create(client_options);
  EXPECT_TRUE(client.ok()) << client.status();
  if (!client.ok()) return nullptr;
  r->client = std::move(*client);
  return r;
}

v1::EmbedRequest EmbedTokens(int64_t n) {
  v1::EmbedRequest request;
  auto* ids = request.add_sequences()->mutable_token_ids();
  ids->Resize(static_cast<int>(n), 1);
  return request;
}

void ExpectStillServing(VocabdClient& client) {
  auto r = client.Embed(EmbedTokens(3));
  ASSERT_TRUE(r.ok()) << "server stopped serving: " << r.status();
  EXPECT_EQ(r->embeddings().shape(0), 3);
}

TEST(ResponseSizeTest, LimitIsCappedAtProtobufsTwoGiB) {
  EXPECT_EQ(ResponseByteLimit(0), kMaxProtobufMessageBytes);
  EXPECT_EQ(ResponseByteLimit(int64_t{1} << 40), kMaxProtobufMessageBytes);
  EXPECT_EQ(ResponseByteLimit(1024), 1024);
}

// --max-send-message-bytes at its largest (INT_MAX): only the 2 GiB cap
// stands between a request and the process abort.
TEST(ResponseSizeTest, ResponsesOverTwoGiBAreRefusedNotFatal) {
  auto r = Start(0x7fffffff);
  ASSERT_NE(r, nullptr);
  // 8,389,608 tokens x 64 x 4 bytes = 2,147,739,648 bytes > 2^31 - 1.
  auto embed = r->client->Embed(EmbedTokens(8389608));
  EXPECT_EQ(embed.status().code(), absl::StatusCode::kResourceExhausted) << embed.status();
  EXPECT_THAT(embed.status().message(),
              HasSubstr("8389608 tokens x hidden_size 64 x F32 = 2147739648 bytes > 2147483647"));
  ExpectStillServing(*r->client);

  // A RoPE config alone may not ask for a 2^30-entry inv_freq.
  auto position = v1::PositionService::NewStub(r->client->channel());
  v1::GetRopeCacheRequest cache;
  cache.mutable_rope()->set_pair_layout(v1::HALF_SPLIT);
  cache.mutable_rope()->set_head_dim(2147483646);
  cache.set_num_positions(0);
  v1::GetRopeCacheResponse cache_response;
  grpc::ClientContext ctx;
  grpc::Status st = position->GetRopeCache(&ctx, cache, &cache_response);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  EXPECT_THAT(st.error_message(), HasSubstr("rope.head_dim = 2147483646 must be <= 65536"));
  ExpectStillServing(*r->client);
}

// A small --max-send-message-bytes: every RPC names the sizes and the flag
// instead of gRPC's generic "Sent message larger than max".
TEST(ResponseSizeTest, EveryRpcRefusesResponsesOverMaxSendMessageBytes) {
  constexpr int kLimit = 1 << 20;
  auto r = Start(kLimit);
  ASSERT_NE(r, nullptr);
  VocabdClient& client = *r->client;

  // Embed: 5000 x 64 x 4 = 1,280,000 bytes; F16 halves it (fits).
  auto embed = client.Embed(EmbedTokens(5000));
  EXPECT_EQ(embed.status().code(), absl::StatusCode::kResourceExhausted) << embed.status();
  EXPECT_THAT(embed.status().message(),
              HasSubstr("5000 tokens x hidden_size 64 x F32 = 1280000 bytes > 1048576 "
                        "(--max-send-message-bytes)"));
  v1::EmbedRequest half = EmbedTokens(5000);
  half.set_output_dtype(v1::F16);
  EXPECT_TRUE(client.Embed(half).ok());

  // ComputeLogits: 600 x 512 x 4 bytes, refused before any compute.
  v1::ComputeLogitsRequest logits;
  *logits.mutable_hidden() = EncodeFloatTensor(std::vector<float>(600 * 64, 0.5f), {600, 64});
  auto l = client.ComputeLogits(logits);
  EXPECT_EQ(l.status().code(), absl::StatusCode::kResourceExhausted) << l.status();
  EXPECT_THAT(l.status().message(), HasSubstr("600 rows x vocab_size 512 x F32 = 1228800 bytes"));

  // Score: 300 rows x top-512 lists, checked on the finished message.
  v1::ScoreRequest score;
  *score.mutable_hidden() = EncodeFloatTensor(std::vector<float>(300 * 64, 0.5f), {300, 64});
  score.set_top_k(512);
  auto s = client.Score(score);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kResourceExhausted) << s.status();
  EXPECT_THAT(s.status().message(), HasSubstr("(--max-send-message-bytes)"));

  // ScoreStream: the oversized answer ends the stream naming the request.
  auto scoring = v1::ScoringService::NewStub(client.channel());
  {
    grpc::ClientContext ctx;
    auto stream = scoring->ScoreStream(&ctx);
    v1::ScoreRequest small = score;
    *small.mutable_hidden() = EncodeFloatTensor(std::vector<float>(64, 0.5f), {1, 64});
    ASSERT_TRUE(stream->Write(small));
    stream->Write(score);
    stream->WritesDone();
    v1::ScoreResponse got;
    EXPECT_TRUE(stream->Read(&got));
    EXPECT_FALSE(stream->Read(&got));
    grpc::Status st = stream->Finish();
    EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
    EXPECT_THAT(st.error_message(), HasSubstr("requests[1]: response would be"));
  }

  // PositionService: a 512 x 1024 F32 table is 2 MiB.
  auto position = v1::PositionService::NewStub(client.channel());
  v1::GetSinusoidalPositionsRequest table;
  table.set_num_positions(512);
  table.set_dim(1024);
  v1::GetSinusoidalPositionsResponse table_response;
  grpc::ClientContext ctx;
  grpc::Status st = position->GetSinusoidalPositions(&ctx, table, &table_response);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
  EXPECT_THAT(st.error_message(), HasSubstr("> 1048576 (--max-send-message-bytes)"));
  ExpectStillServing(client);
}

}  // namespace
}  // namespace vocabd
