// EmbeddingService/EmbedStream against the real server: answers equal to
// Embed in request order, the first failing request ends the stream naming
// requests[i], empty streams, client cancellation, a client that writes but
// does not read (the server's buffered responses stay bounded), and drain.
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <google/protobuf/util/message_differencer.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "server/embed_stream_reactor.h"
#include "server/server.h"
#include "tests/server/server_fixture.h"
#include "tests/test_util.h"
#include "vocabd/v1/embedding.grpc.pb.h"

namespace vocabd::testing {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using ::testing::HasSubstr;

constexpr int64_t kStreamVocab = 512;

v1::EmbedRequest MakeEmbed(int i, int tokens = 0) {
  v1::EmbedRequest r;
  r.set_request_id("req-" + std::to_string(i));
  r.set_model(i % 2 == 0 ? kBinModel : kHfModel);
  const int n = tokens > 0 ? tokens : 1 + i % 7;
  auto* seq = r.add_sequences();
  for (int t = 0; t < n; ++t) seq->add_token_ids((37 * i + 11 * t + 3) % kStreamVocab);
  if (i % 3 == 1) r.add_sequences()->add_token_ids(i % kStreamVocab);
  if (i % 4 == 3) r.set_output_dtype(v1::BF16);
  return r;
}

class EmbedStreamTest : public ServerTest {
 protected:
  std::unique_ptr<v1::EmbeddingService::Stub> Stub() {
    return v1::EmbeddingService::NewStub(client().channel());
  }
};

TEST_F(EmbedStreamTest, AnswersInOrderEqualToEmbed) {
  auto stub = Stub();
  grpc::ClientContext ctx;
  auto stream = stub->EmbedStream(&ctx);
  constexpr int kRequests = 40;
  for (int i = 0; i < kRequests; ++i) ASSERT_TRUE(stream->Write(MakeEmbed(i)));
  ASSERT_TRUE(stream->WritesDone());
  for (int i = 0; i < kRequests; ++i) {
    v1::EmbedResponse got;
    ASSERT_TRUE(stream->Read(&got)) << i;
    auto want = client().Embed(MakeEmbed(i));
    ASSERT_TRUE(want.ok()) << want.status();
    EXPECT_TRUE(MessageDifferencer::Equals(got, *want)) << "response " << i << " differs";
    EXPECT_EQ(got.request_id(), "req-" + std::to_string(i));
  }
  v1::EmbedResponse extra;
  EXPECT_FALSE(stream->Read(&extra));
  const grpc::Status st = stream->Finish();
  EXPECT_TRUE(st.ok()) << st.error_code() << " " << st.error_message();
}

TEST_F(EmbedStreamTest, InterleavedWritesAndReads) {
  auto stub = Stub();
  grpc::ClientContext ctx;
  auto stream = stub->EmbedStream(&ctx);
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(stream->Write(MakeEmbed(i)));
    v1::EmbedResponse got;
    ASSERT_TRUE(stream->Read(&got));
    EXPECT_EQ(got.request_id(), "req-" + std::to_string(i));
  }
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(EmbedStreamTest, FirstFailingRequestEndsTheStreamNamingItsIndex) {
  auto stub = Stub();
  grpc::ClientContext ctx;
  auto stream = stub->EmbedStream(&ctx);
  ASSERT_TRUE(stream->Write(MakeEmbed(0)));
  ASSERT_TRUE(stream->Write(MakeEmbed(1)));
  v1::EmbedRequest bad = MakeEmbed(2);
  bad.mutable_sequences(0)->set_token_ids(0, 9999);
  stream->Write(bad);
  stream->Write(MakeEmbed(3));  // never answered
  stream->WritesDone();
  v1::EmbedResponse got;
  int answers = 0;
  while (stream->Read(&got)) {
    EXPECT_EQ(got.request_id(), "req-" + std::to_string(answers));
    ++answers;
  }
  EXPECT_EQ(answers, 2);
  const grpc::Status st = stream->Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  EXPECT_THAT(st.error_message(), HasSubstr("requests[2]: "));
  EXPECT_THAT(st.error_message(), HasSubstr("9999"));

  // An unknown model is NOT_FOUND, for the first request too.
  grpc::ClientContext ctx2;
  auto stream2 = stub->EmbedStream(&ctx2);
  v1::EmbedRequest unknown = MakeEmbed(0);
  unknown.set_model("no-such-model");
  stream2->Write(unknown);
  stream2->WritesDone();
  EXPECT_FALSE(stream2->Read(&got));
  const grpc::Status st2 = stream2->Finish();
  EXPECT_EQ(st2.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(st2.error_message(), HasSubstr("requests[0]: "));
  // The server keeps serving.
  EXPECT_TRUE(client().Embed(MakeEmbed(5)).ok());
}

// A client that writes every request before reading any answer (what a
// synchronous client or a generator-fed one does), where a request fails
// while an earlier, large answer is still unsent: the server keeps reading
// (and dropping) the requests after the failure, so neither side waits on
// the other and the error arrives, not the deadline (a server that stopped
// reading would leave this call to end in DEADLINE_EXCEEDED). In-process
// (request_fuzzer's seed embed_stream_error_before_unsent_answer) any sizes
// show it; over TCP it needs answers and requests larger than the
// flow-control windows, as here (an 8 MiB answer, 16 MB of requests after it).
TEST_F(EmbedStreamTest, ClientWritingEverythingFirstGetsTheErrorNotADeadline) {
  auto stub = Stub();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::seconds(20 * kSanitizerSlowdown));
  auto stream = stub->EmbedStream(&ctx);
  v1::EmbedRequest large = MakeEmbed(0, 32768);  // answer: 32768 x 64 F32 = 8 MiB
  ASSERT_TRUE(stream->Write(large));
  v1::EmbedRequest bad = MakeEmbed(1);
  bad.mutable_sequences(0)->set_token_ids(0, 9999);
  ASSERT_TRUE(stream->Write(bad));
  for (int i = 2; i < 18; ++i) {  // 16 x ~1 MB of token ids, never answered
    if (!stream->Write(MakeEmbed(2 * i, 500000))) break;
  }
  stream->WritesDone();
  v1::EmbedResponse got;
  int answers = 0;
  while (stream->Read(&got)) ++answers;
  EXPECT_EQ(answers, 1);
  const grpc::Status st = stream->Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  EXPECT_THAT(st.error_message(), HasSubstr("requests[1]: "));
  EXPECT_TRUE(client().Embed(MakeEmbed(5)).ok());
}

TEST_F(EmbedStreamTest, EmptyStreamFinishesOk) {
  auto stub = Stub();
  grpc::ClientContext ctx;
  auto stream = stub->EmbedStream(&ctx);
  stream->WritesDone();
  v1::EmbedResponse got;
  EXPECT_FALSE(stream->Read(&got));
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(EmbedStreamTest, ClientCancellationEndsTheStream) {
  auto stub = Stub();
  for (int round = 0; round < 8; ++round) {
    grpc::ClientContext ctx;
    auto stream = stub->EmbedStream(&ctx);
    for (int i = 0; i < 20; ++i) {
      if (!stream->Write(MakeEmbed(i, 256))) break;
    }
    v1::EmbedResponse got;
    ASSERT_TRUE(stream->Read(&got));
    EXPECT_EQ(got.request_id(), "req-0");
    ctx.TryCancel();
    while (stream->Read(&got)) {
    }
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  EXPECT_TRUE(client().Embed(MakeEmbed(1)).ok());
}

// A client that keeps writing but does not read: the server stops reading
// once kMaxBufferedBytes of responses wait (each response here is 1 MiB, the
// requests ask for 96 MiB), and every response still arrives in order once
// the client reads.
TEST_F(EmbedStreamTest, SlowReaderKeepsServerBufferBounded) {
  auto stub = Stub();
  grpc::ClientContext ctx;
  auto stream = stub->EmbedStream(&ctx);
  constexpr int kRequests = 96;
  constexpr int kTokens = 4096;  // x hidden 64 x F32 = 1 MiB per response
  std::vector<v1::EmbedRequest> requests;
  for (int i = 0; i < kRequests; ++i) {
    requests.push_back(MakeEmbed(i, kTokens));
    requests.back().clear_output_dtype();
    requests.back().mutable_sequences()->DeleteSubrange(1, requests.back().sequences_size() - 1);
  }
  std::atomic<int> written{0};
  std::thread writer([&] {
    for (const v1::EmbedRequest& r : requests) {
      if (!stream->Write(r)) return;
      written.fetch_add(1);
    }
    stream->WritesDone();
  });
  // Wait until the writer is done or stuck (requests are small: all of them
  // may fit the transport's buffers): no progress for 1 s once the server
  // holds its bound, or for 5 s (slow sanitizer builds).
  const int64_t response_bytes = kTokens * 64 * 4 + 64;
  int last = -1;
  int still = 0;
  for (int polls = 0; polls < 600 && still < 50; ++polls) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const int now = written.load();
    still = now == last ? still + 1 : 0;
    last = now;
    if (still >= 10 && EmbedStreamReactor::PeakBufferedBytes() >=
                           EmbedStreamReactor::kMaxBufferedBytes - response_bytes) {
      break;
    }
  }
  const int64_t peak = EmbedStreamReactor::PeakBufferedBytes();
  EXPECT_LE(peak, EmbedStreamReactor::kMaxBufferedBytes + 2 * response_bytes)
      << "the server read on while the client did not read";
  EXPECT_GE(peak, EmbedStreamReactor::kMaxBufferedBytes / 2)
      << "the responses did not pile up: the test did not exercise the bound";
  for (int i = 0; i < kRequests; ++i) {
    v1::EmbedResponse got;
    ASSERT_TRUE(stream->Read(&got)) << i;
    EXPECT_EQ(got.request_id(), "req-" + std::to_string(i));
    EXPECT_EQ(got.embeddings().data().size(), static_cast<size_t>(kTokens * 64 * 4));
  }
  writer.join();
  EXPECT_EQ(written.load(), kRequests);
  const grpc::Status st = stream->Finish();
  EXPECT_TRUE(st.ok()) << st.error_message();
}

// Drain: a stream open when Shutdown starts is still served; one that stays
// open past --drain-timeout-ms is ended, and Shutdown returns.
TEST(EmbedStreamDrainTest, OpenStreamsAreServedThenEndedAtTheDrainDeadline) {
  VocabdServer::Options options;
  options.listen_address = "127.0.0.1:0";
  options.models = {{kBinModel, Stories260KBin()}};
  // Long enough for one small Embed round trip during the drain on a loaded
  // machine (an ASan run on 2 busy cores took longer than the 300 ms this was).
  options.drain_timeout = std::chrono::milliseconds(500 * kSanitizerSlowdown);
  auto server = VocabdServer::Create(options);
  ASSERT_TRUE(server.ok()) << server.status();
  auto channel = grpc::CreateChannel((*server)->target(), grpc::InsecureChannelCredentials());
  auto stub = v1::EmbeddingService::NewStub(channel);
  grpc::ClientContext finishing_ctx;
  auto finishing = stub->EmbedStream(&finishing_ctx);
  grpc::ClientContext open_ctx;
  auto open = stub->EmbedStream(&open_ctx);
  v1::EmbedResponse got;
  ASSERT_TRUE(finishing->Write(MakeEmbed(0)));
  ASSERT_TRUE(finishing->Read(&got));
  ASSERT_TRUE(open->Write(MakeEmbed(0)));
  ASSERT_TRUE(open->Read(&got));

  std::thread shutdown([&] { (*server)->Shutdown(); });
  struct Join {  // a failed ASSERT below must not leave the thread joinable
    std::thread& t;
    ~Join() {
      if (t.joinable()) t.join();
    }
  } join{shutdown};
  // Served during the drain: a new request on the open stream, then
  // half-close ends it with OK.
  ASSERT_TRUE(finishing->Write(MakeEmbed(2)));
  ASSERT_TRUE(finishing->Read(&got));
  EXPECT_EQ(got.request_id(), "req-2");
  finishing->WritesDone();
  EXPECT_TRUE(finishing->Finish().ok());
  // Never half-closed: ended by the server at the drain deadline.
  EXPECT_FALSE(open->Read(&got));
  const grpc::Status st = open->Finish();
  EXPECT_FALSE(st.ok());
  EXPECT_TRUE(st.error_code() == grpc::StatusCode::CANCELLED ||
              st.error_code() == grpc::StatusCode::UNAVAILABLE)
      << st.error_code() << " " << st.error_message();
}

}  // namespace
}  // namespace vocabd::testing
