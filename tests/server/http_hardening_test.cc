// The HTTP/JSON front door (server/http_gateway.h) against hostile input
// (slow, oversized, malformed and flooding requests): each test sends the
// attack's bytes over a raw TCP socket to a live server and asserts the HTTP
// status, the
// message, this process's VmRSS growth (the server runs in it), and that a
// gRPC caller beside it is answered within a second meanwhile.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "server/http_gateway.h"
#include "server/metrics.h"
#include "server/server.h"
#include "tests/server/prometheus_text.h"
#include "tests/server/server_fixture.h"
#include "tests/test_util.h"
#include "vocabd/v1/embedding.grpc.pb.h"
#include "vocabd/v1/model.grpc.pb.h"
#include "vocabd/v1/tokenizer.grpc.pb.h"

namespace vocabd::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

constexpr int64_t kMiB = int64_t{1} << 20;

// ------------------------------------------------------------ raw HTTP ----

// A connected TCP socket to 127.0.0.1:port (-1 on failure).
int Connect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool SendAll(int fd, const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

struct RawResponse {
  int status = -1;  // -1: no complete response before EOF / timeout
  std::string head;
  std::string body;
  nlohmann::json json() const {
    return nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  }
  std::string message() const {
    const nlohmann::json j = json();
    return j.is_object() && j.contains("message") ? j["message"].get<std::string>() : body;
  }
  std::string code() const {
    const nlohmann::json j = json();
    return j.is_object() && j.contains("code") ? j["code"].get<std::string>() : "";
  }
};

// Reads until `buffer` holds `n` bytes (false on EOF / timeout).
bool Fill(int fd, std::string* buffer, size_t n, Clock::time_point deadline) {
  char chunk[65536];
  while (buffer->size() < n) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    const ssize_t got = ::recv(fd, chunk, sizeof(chunk), 0);
    if (got <= 0) return false;
    buffer->append(chunk, static_cast<size_t>(got));
  }
  return true;
}

// One response (status line, headers, Content-Length body) from `fd`;
// bytes after it stay in `buffer` (pipelining).
RawResponse ReadResponse(int fd, std::string* buffer,
                         std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  RawResponse r;
  const auto deadline = Clock::now() + timeout;
  size_t end = std::string::npos;
  while ((end = buffer->find("\r\n\r\n")) == std::string::npos) {
    if (!Fill(fd, buffer, buffer->size() + 1, deadline)) return r;
  }
  r.head = buffer->substr(0, end + 4);
  size_t length = 0;
  std::string lower = r.head;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (const size_t cl = lower.find("\r\ncontent-length:"); cl != std::string::npos) {
    length = std::stoul(lower.substr(cl + 17));
  }
  if (!Fill(fd, buffer, end + 4 + length, deadline)) return r;
  r.body = buffer->substr(end + 4, length);
  buffer->erase(0, end + 4 + length);
  r.status = std::stoi(r.head.substr(9, 3));
  return r;
}

// Sends `request` on a new connection and reads one response.
RawResponse Exchange(int port, const std::string& request,
                     std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const int fd = Connect(port);
  if (fd < 0) return {};
  SendAll(fd, request);
  std::string buffer;
  RawResponse r = ReadResponse(fd, &buffer, timeout);
  ::close(fd);
  return r;
}

// True when the server closed `fd` (EOF) within `timeout`.
bool ClosedByServer(int fd, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  char chunk[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    const ssize_t got = ::recv(fd, chunk, sizeof(chunk), 0);
    if (got <= 0) return true;  // EOF or reset
  }
}

std::string PostRequest(const std::string& path, const std::string& body,
                        const std::string& extra_headers = "",
                        const std::string& content_type = "application/json") {
  std::string r = "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  if (!content_type.empty()) r += "Content-Type: " + content_type + "\r\n";
  r += extra_headers;
  r += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  return r;
}

constexpr char kEmbedBody[] = R"({"sequences": [{"tokenIds": [1, 403]}]})";

// ---------------------------------------------------------- gRPC probe ----

// Calls Embed over gRPC every 50 ms (1 s deadline each) until stopped; every
// call must succeed: a well-behaved caller is served while the attack runs.
class GrpcProbe : public ServingProbe {
 public:
  explicit GrpcProbe(const std::string& target)
      : ServingProbe([stub = std::shared_ptr<v1::EmbeddingService::Stub>(
                          v1::EmbeddingService::NewStub(grpc::CreateChannel(
                              target, grpc::InsecureChannelCredentials())))] {
          v1::EmbedRequest req;
          req.add_sequences()->add_token_ids(1);
          v1::EmbedResponse res;
          grpc::ClientContext ctx;
          ctx.set_deadline(std::chrono::system_clock::now() +
                           std::chrono::milliseconds(1000 * kSanitizerSlowdown));
          return stub->Embed(&ctx, req, &res);
        }) {}
};

// "[[[...]]]" nested `depth` levels.
std::string Nested(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

// {"type": "Sequence", "pretokenizers": [ ... ]} nested `levels` times
// around a ByteLevel pre-tokenizer.
std::string NestedPreTokenizerSequences(size_t levels) {
  std::string out;
  for (size_t i = 0; i < levels; ++i) out += R"({"type": "Sequence", "pretokenizers": [)";
  out += R"({"type": "ByteLevel", "add_prefix_space": false})";
  for (size_t i = 0; i < levels; ++i) out += "]}";
  return out;
}

std::string TokenizerJson(const std::string& pre_tokenizer) {
  return R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": []}, )"
         R"("pre_tokenizer": )" +
         pre_tokenizer + "}";
}

// ------------------------------------------------------------- fixture ----

class HttpHardeningTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new std::string(MakeTempDir());
    WriteRepoModel(*root_ + "/deep-tok", TokenizerJson(NestedPreTokenizerSequences(100000)));
    WriteRepoModel(*root_ + "/seq-tok", TokenizerJson(NestedPreTokenizerSequences(20)));
    VocabdServer::Options options;
    options.listen_address = "127.0.0.1:0";
    options.http_listen = "127.0.0.1:0";
    options.models = {{kBinModel, Stories260KBin()}};
    options.model_repository = *root_;
    auto server = VocabdServer::Create(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server).release();
  }
  static void TearDownTestSuite() {
    server_->Shutdown();
    delete server_;
    fs::remove_all(*root_);
    delete root_;
  }
  static int port() { return server_->http_port(); }

  static VocabdServer* server_;
  static std::string* root_;
};
VocabdServer* HttpHardeningTest::server_ = nullptr;
std::string* HttpHardeningTest::root_ = nullptr;

// ------------------------------------------------------- the crashes ----

// X-Request-Id with TAB, DEL or a byte >= 0x80 is legal HTTP but not gRPC
// metadata: forwarding it aborted the process. Refused, naming the byte.
TEST_F(HttpHardeningTest, RequestIdOutsidePrintableAsciiIsRefused) {
  GrpcProbe probe(server_->target());
  const int64_t rss_before = VmRssBytes();
  struct Case {
    char byte;
    std::string named;
  };
  for (const Case& c : {Case{'\t', "byte 2 is 0x09 (TAB)"}, Case{'\x7f', "byte 2 is 0x7f (DEL)"},
                        Case{'\x80', "byte 2 is 0x80"}, Case{'\xff', "byte 2 is 0xff"}}) {
    const std::string id = std::string("ab") + c.byte + "cd";
    RawResponse r = Exchange(port(), PostRequest("/v1/EmbeddingService/Embed", kEmbedBody,
                                                 "X-Request-Id: " + id + "\r\n"));
    EXPECT_EQ(r.status, 400) << c.named << " " << r.head << r.body;
    EXPECT_EQ(r.code(), "INVALID_ARGUMENT");
    EXPECT_THAT(r.message(), HasSubstr("X-Request-Id " + c.named));
    EXPECT_THAT(r.message(), HasSubstr("printable ASCII (0x20-0x7E), at most 128 bytes"));
  }
  // Length bound.
  RawResponse r = Exchange(port(), PostRequest("/v1/EmbeddingService/Embed", kEmbedBody,
                                               "X-Request-Id: " + std::string(129, 'x') + "\r\n"));
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_THAT(r.message(), HasSubstr("X-Request-Id is 129 bytes long; at most 128 bytes"));
  // At the bound (with a space, which gRPC allows): served.
  r = Exchange(port(), PostRequest("/v1/EmbeddingService/Embed", kEmbedBody,
                                   "X-Request-Id: a " + std::string(126, 'x') + "\r\n"));
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_RSS_LT(VmRssBytes() - rss_before, 16 * kMiB);
  probe.ExpectAllAnswered("X-Request-Id attack");
}

// {"values": [[[[... 70,000 levels overflowed the JSON parser's stack.
TEST_F(HttpHardeningTest, DeeplyNestedJsonBodyIsRefusedBeforeParsing) {
  GrpcProbe probe(server_->target());
  const int64_t rss_before = VmRssBytes();
  for (const std::string& body :
       {R"({"values": )" + Nested(70000) + "}", R"({"sequences": )" + Nested(70000) + "}"}) {
    RawResponse r = Exchange(port(), PostRequest("/v1/EmbeddingService/Embed", body));
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_EQ(r.code(), "INVALID_ARGUMENT");
    EXPECT_THAT(r.message(),
                HasSubstr("request body: JSON nesting depth 70001 is above the limit of 100"));
  }
  // 100 levels are within the limit: the body reaches protobuf's parser.
  RawResponse r = Exchange(port(), PostRequest("/v1/EmbeddingService/Embed",
                                               R"({"sequences": )" + Nested(99) + "}"));
  EXPECT_NE(r.status, -1);
  EXPECT_THAT(r.body, ::testing::Not(HasSubstr("nesting depth")));
  EXPECT_RSS_LT(VmRssBytes() - rss_before, 16 * kMiB);
  probe.ExpectAllAnswered("nested JSON attack");
}

grpc::Status Tokenize(const std::string& target, const std::string& model) {
  auto stub = v1::TokenizerService::NewStub(
      grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  v1::TokenizeRequest req;
  req.set_model(model);
  req.add_texts("ab");
  v1::TokenizeResponse res;
  return stub->Tokenize(&ctx, req, &res);
}

// A repository model whose tokenizer.json nests 100,000 Sequences: loading
// it overflowed the stack. The model loads (its tables serve) and its
// tokenizer is refused with the depth and the limit.
TEST_F(HttpHardeningTest, RepositoryTokenizerJsonNestedTooDeepIsRefused) {
  GrpcProbe probe(server_->target());
  const int64_t rss_before = VmRssBytes();
  const grpc::Status loaded = LoadRepoModel(server_->target(), "deep-tok");
  const grpc::Status tokenized = Tokenize(server_->target(), "deep-tok");
  const std::string said = loaded.error_message() + " | " + tokenized.error_message();
  EXPECT_FALSE(tokenized.ok());
  EXPECT_THAT(said, HasSubstr("tokenizer.json: JSON nesting depth 200002 is above the limit of 128"));
  EXPECT_RSS_LT(VmRssBytes() - rss_before, 64 * kMiB);
  probe.ExpectAllAnswered("nested tokenizer.json");
}

// Within the JSON bound, Sequence inside Sequence is bounded by the loader.
TEST_F(HttpHardeningTest, RepositoryTokenizerSequencesNestedTooDeepAreRefused) {
  const grpc::Status loaded = LoadRepoModel(server_->target(), "seq-tok");
  const grpc::Status tokenized = Tokenize(server_->target(), "seq-tok");
  const std::string said = loaded.error_message() + " | " + tokenized.error_message();
  EXPECT_FALSE(tokenized.ok());
  EXPECT_THAT(said, HasSubstr("is a Sequence nested more than 16 levels deep"));
}

// ------------------------------------------- limits (small, for speed) ----

int OpenFds() {
  int n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

HttpLimits SmallLimits() {
  HttpLimits l;
  l.max_connections = 8;
  l.max_header_bytes = 4096;
  l.max_headers = 20;
  l.max_body_bytes = 64 << 10;
  l.header_timeout_ms = 500;
  l.body_timeout_ms = 500;
  l.idle_timeout_ms = 300;
  l.write_timeout_ms = 1000;
  return l;
}

class HttpLimitsTest : public ::testing::Test {
 protected:
  static std::unique_ptr<VocabdServer> Start(const HttpLimits& limits) {
    VocabdServer::Options options;
    options.listen_address = "127.0.0.1:0";
    options.http_listen = "127.0.0.1:0";
    options.models = {{kBinModel, Stories260KBin()}};
    options.http_limits = limits;
    auto server = VocabdServer::Create(options);
    EXPECT_TRUE(server.ok()) << server.status();
    return server.ok() ? std::move(*server) : nullptr;
  }
  void SetUp() override {
    server_ = Start(SmallLimits());
    ASSERT_NE(server_, nullptr);
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }
  int port() const { return server_->http_port(); }
  std::unique_ptr<VocabdServer> server_;
};

// GET /v1/%FF: the 404 message quoted the non-UTF-8 path, the JSON printer
// threw and the connection was never answered nor closed (1,100 of them
// took the process to its fd limit).
TEST_F(HttpLimitsTest, InvalidUtf8PathIsAnsweredAndClosed) {
  GrpcProbe probe(server_->target());
  const int fds_before = OpenFds();
  const int64_t rss_before = VmRssBytes();
  for (int i = 0; i < 300; ++i) {
    RawResponse r = Exchange(port(), "GET /v1/%FF HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    ASSERT_EQ(r.status, 404) << i << " " << r.head;
    if (i == 0) {
      EXPECT_THAT(r.message(), HasSubstr("no such path GET /v1/"));
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_LT(OpenFds() - fds_before, 20);
  EXPECT_RSS_LT(VmRssBytes() - rss_before, 16 * kMiB);
  probe.ExpectAllAnswered("GET /v1/%FF");
}

// Many short header lines were accepted without limit (732 MB in 40 s).
TEST_F(HttpLimitsTest, HeaderFloodIsRefusedByCountAndBytes) {
  GrpcProbe probe(server_->target());
  const int64_t rss_before = VmRssBytes();
  std::string fields;
  for (int i = 0; i < 21; ++i) fields += "X-" + std::to_string(i) + ": y\r\n";
  RawResponse r = Exchange(port(), PostRequest("/v1/EmbeddingService/Embed", kEmbedBody, fields));
  EXPECT_EQ(r.status, 431) << r.body;
  EXPECT_EQ(r.code(), "RESOURCE_EXHAUSTED");
  EXPECT_THAT(r.message(), HasSubstr("at most 20 are accepted (--http-max-headers)"));
  // An endless flood: refused once 4096 bytes are in, whatever follows.
  const int fd = Connect(port());
  ASSERT_GE(fd, 0);
  SendAll(fd, "POST /v1/EmbeddingService/Embed HTTP/1.1\r\n");
  std::string line = "X-A: " + std::string(100, 'b') + "\r\n";
  std::string flood;
  for (int i = 0; i < 100; ++i) flood += line;
  for (int i = 0; i < 100 && SendAll(fd, flood); ++i) {
  }
  std::string buffer;
  r = ReadResponse(fd, &buffer, std::chrono::seconds(5));
  ::close(fd);
  EXPECT_EQ(r.status, 431);
  EXPECT_THAT(r.message(), HasSubstr("larger than 4096 bytes (--http-max-header-bytes)"));
  EXPECT_RSS_LT(VmRssBytes() - rss_before, 16 * kMiB);
  probe.ExpectAllAnswered("header flood");
}

// Slow and idle connections stalled the port (a thread each, 256 of them).
TEST_F(HttpLimitsTest, SlowConnectionsAreCappedAndTimedOut) {
  // The server counts a connection when a worker takes it up; under a
  // sanitizer that can take longer than the default 500 ms header timeout
  // leaves, so the timeout and the wait scale with the slowdown.
  HttpLimits limits = SmallLimits();
  limits.header_timeout_ms = 500 * kSanitizerSlowdown;
  server_->Shutdown();
  server_ = Start(limits);
  ASSERT_NE(server_, nullptr);
  GrpcProbe probe(server_->target());
  std::vector<int> slow;
  for (int i = 0; i < 8; ++i) {
    slow.push_back(Connect(port()));
    ASSERT_GE(slow.back(), 0);
    SendAll(slow.back(), "P");  // a head that never completes
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100 * kSanitizerSlowdown));
  // Over the limit: answered at once.
  const auto t0 = Clock::now();
  RawResponse r = Exchange(port(), PostRequest("/v1/EmbeddingService/Embed", kEmbedBody));
  EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(400 * kSanitizerSlowdown));
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_THAT(r.message(), HasSubstr("8 connections open, its limit (--http-max-connections)"));
  // Each slow connection gets 408 after the total header timeout.
  for (int fd : slow) {
    std::string buffer;
    RawResponse timed_out = ReadResponse(
        fd, &buffer, std::chrono::milliseconds(limits.header_timeout_ms + 3000 * kSanitizerSlowdown));
    EXPECT_EQ(timed_out.status, 408);
    EXPECT_THAT(timed_out.message(),
                HasSubstr(absl::StrCat("not complete within ", limits.header_timeout_ms,
                                       " ms (--http-header-timeout-ms)")));
    ::close(fd);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  r = Exchange(port(), PostRequest("/v1/EmbeddingService/Embed", kEmbedBody));
  EXPECT_EQ(r.status, 200) << r.body;
  probe.ExpectAllAnswered("slow connections");
}

// Byte-by-byte headers: the header timeout is total, not per byte.
TEST_F(HttpLimitsTest, SlowlorisHeadIsCutAtTheTotalHeaderTimeout) {
  const int fd = Connect(port());
  ASSERT_GE(fd, 0);
  const std::string head = "POST /v1/EmbeddingService/Embed HTTP/1.1\r\nX-Slow: " + std::string(200, 'z');
  const auto t0 = Clock::now();
  bool cut = false;
  for (char c : head) {
    if (!SendAll(fd, std::string(1, c))) {
      cut = true;
      break;
    }
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) > 0) {
      cut = true;
      break;
    }
  }
  std::string buffer;
  RawResponse r = ReadResponse(fd, &buffer, std::chrono::seconds(3));
  ::close(fd);
  EXPECT_TRUE(cut);
  EXPECT_EQ(r.status, 408);
  EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(3000));
}

// A keep-alive connection that sends nothing more is closed after the idle
// timeout.
TEST_F(HttpLimitsTest, IdleKeepAliveConnectionIsClosed) {
  const int fd = Connect(port());
  ASSERT_GE(fd, 0);
  SendAll(fd, PostRequest("/v1/EmbeddingService/Embed", kEmbedBody));
  std::string buffer;
  RawResponse r = ReadResponse(fd, &buffer);
  EXPECT_EQ(r.status, 200);
  EXPECT_THAT(r.head, HasSubstr("Keep-Alive: timeout=1"));
  EXPECT_TRUE(ClosedByServer(fd, std::chrono::seconds(2)));
  ::close(fd);
}

std::string ChunkOf(const std::string& data) {
  char size[32];
  std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
  return size + data + "\r\n";
}

// Bodies: refused on Content-Length before reading; chunked stopped at the
// limit; conflicting Content-Length refused.
TEST_F(HttpLimitsTest, BodiesAreBoundedBeforeReading) {
  GrpcProbe probe(server_->target());
  const int64_t rss_before = VmRssBytes();
  const auto t0 = Clock::now();
  RawResponse r = Exchange(port(), "POST /v1/EmbeddingService/Embed HTTP/1.1\r\nContent-Type: "
                                   "application/json\r\nContent-Length: 1000000000000\r\n\r\n{");
  EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(1500));
  EXPECT_EQ(r.status, 413);
  EXPECT_THAT(r.message(), HasSubstr("request body of 1000000000000 bytes (Content-Length) is "
                                     "larger than the HTTP limit of 65536 bytes "
                                     "(--http-max-body-bytes)"));
  // Chunked: 1 MiB in 4 KiB chunks, refused at the 64 KiB limit.
  const int fd = Connect(port());
  ASSERT_GE(fd, 0);
  SendAll(fd, "POST /v1/EmbeddingService/Embed HTTP/1.1\r\nContent-Type: application/json\r\n"
              "Transfer-Encoding: chunked\r\n\r\n");
  const std::string chunk = "1000\r\n" + std::string(4096, ' ') + "\r\n";
  for (int i = 0; i < 256 && SendAll(fd, chunk); ++i) {
  }
  std::string buffer;
  r = ReadResponse(fd, &buffer);
  ::close(fd);
  EXPECT_EQ(r.status, 413);
  EXPECT_THAT(r.message(), HasSubstr("chunked request body is larger than the HTTP limit of 65536"));
  // A chunked body within the limit is served.
  r = Exchange(port(), "POST /v1/EmbeddingService/Embed HTTP/1.1\r\nContent-Type: application/json\r\n"
                       "Transfer-Encoding: chunked\r\n\r\n5\r\n{\"seq\r\n" + ChunkOf("uences\": [{\"tokenIds\": [1]}]}") +
                       "0\r\n\r\n");
  EXPECT_EQ(r.status, 200) << r.body;
  // Two Content-Length values that disagree.
  r = Exchange(port(), "POST /v1/EmbeddingService/Embed HTTP/1.1\r\nContent-Type: application/json\r\n"
                       "Content-Length: 2\r\nContent-Length: 40\r\n\r\n{}");
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(r.message(), HasSubstr("conflicting Content-Length values 2 and 40"));
  EXPECT_RSS_LT(VmRssBytes() - rss_before, 16 * kMiB);
  probe.ExpectAllAnswered("bodies");
}

TEST_F(HttpLimitsTest, OnlyJsonBodiesAreAccepted) {
  for (const std::string& type : {std::string("text/plain"), std::string("application/x-www-form-urlencoded")}) {
    RawResponse r = Exchange(port(), PostRequest("/v1/EmbeddingService/Embed", kEmbedBody, "", type));
    EXPECT_EQ(r.status, 415) << type;
    EXPECT_THAT(r.message(), HasSubstr("Content-Type '" + type + "' is not accepted"));
  }
  RawResponse r = Exchange(port(), PostRequest("/v1/EmbeddingService/Embed", kEmbedBody, "", ""));
  EXPECT_EQ(r.status, 415);
  EXPECT_THAT(r.message(), HasSubstr("need Content-Type: application/json (none was sent)"));
  r = Exchange(port(), PostRequest("/v1/EmbeddingService/Embed", kEmbedBody, "",
                                   "application/json; charset=utf-16"));
  EXPECT_EQ(r.status, 415);
  EXPECT_THAT(r.message(), HasSubstr("charset 'utf-16' is not accepted"));
  r = Exchange(port(), PostRequest("/v1/EmbeddingService/Embed", kEmbedBody, "",
                                   "Application/JSON; charset=UTF-8"));
  EXPECT_EQ(r.status, 200) << r.body;
  // UTF-16 text sent as JSON: 400, not 500.
  std::string utf16 = "\xff\xfe";
  for (char c : std::string(kEmbedBody)) utf16 += std::string(1, c) + '\0';
  r = Exchange(port(), PostRequest("/v1/EmbeddingService/Embed", utf16));
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(r.message(), HasSubstr("UTF-16 byte order mark 0xff 0xfe"));
  r = Exchange(port(), PostRequest("/v1/EmbeddingService/Embed", utf16.substr(2)));
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(r.message(), HasSubstr("byte 1 is 0x00"));
}

TEST_F(HttpLimitsTest, TimeoutHeaderOverflowIsRefused) {
  RawResponse r = Exchange(port(), PostRequest("/v1/EmbeddingService/Embed", kEmbedBody,
                                               "X-Vocabd-Timeout-Ms: 9223372036854775807\r\n"));
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(r.message(), HasSubstr("must be a whole number of milliseconds in [1, 86400000]"));
  r = Exchange(port(), PostRequest("/v1/EmbeddingService/Embed", kEmbedBody,
                                   "X-Vocabd-Timeout-Ms: 86400000\r\n"));
  EXPECT_EQ(r.status, 200) << r.body;
}

// Ten requests in one write: ten answers, in order.
TEST_F(HttpLimitsTest, PipelinedRequestsAreAnsweredInOrder) {
  std::string all;
  for (int i = 0; i < 10; ++i) {
    all += PostRequest("/v1/EmbeddingService/Embed",
                       R"({"sequences": [{"tokenIds": [1]}], "requestId": "r)" + std::to_string(i) + "\"}");
  }
  const int fd = Connect(port());
  ASSERT_GE(fd, 0);
  SendAll(fd, all);
  std::string buffer;
  for (int i = 0; i < 10; ++i) {
    RawResponse r = ReadResponse(fd, &buffer);
    ASSERT_EQ(r.status, 200) << i;
    EXPECT_EQ(r.json()["requestId"], "r" + std::to_string(i));
  }
  ::close(fd);
}

// SIGTERM's Shutdown() while a keep-alive client sends requests: every
// answer is 200 or 503 (or the connection closes); no in-process call is
// made after the gRPC server shut down (that crashed the process).
TEST_F(HttpLimitsTest, ShutdownWithKeepAliveClientDoesNotCrash) {
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, unavailable{0}, other{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&, p = port()] {
      while (!stop) {
        const int fd = Connect(p);
        if (fd < 0) return;
        std::string buffer;
        for (int i = 0; i < 50 && !stop; ++i) {
          if (!SendAll(fd, PostRequest("/v1/EmbeddingService/Embed", kEmbedBody))) break;
          RawResponse r = ReadResponse(fd, &buffer, std::chrono::seconds(5));
          if (r.status == 200) {
            ++ok;
          } else if (r.status == 503) {
            ++unavailable;
          } else if (r.status != -1) {
            ++other;
          }
          if (r.status != 200) break;
        }
        ::close(fd);
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  server_->Shutdown();
  stop = true;
  for (auto& c : clients) c.join();
  EXPECT_GT(ok.load(), 0);
  EXPECT_EQ(other.load(), 0);
}

// HTTP calls whose clients hang up kept computing (8 of them held the
// compute pool 18.9 s). With the one tokenize thread busy, four HTTP
// Tokenize calls queue behind it and their clients close the connection:
// each in-process call is cancelled, so the pool drops the queued work
// ("cancelled" in vocabd_skipped_work_total) instead of tokenizing it. The
// clients close only once the blocker is in flight and all four calls wait
// in the tokenize queue (vocabd_queue_depth): on a loaded machine a fixed
// sleep let a client go before the gateway had handed its call over, and
// that call was never queued (3 of 4 counted).
TEST(HttpAbandonedCallTest, ClientHangingUpCancelsTheInProcessCall) {
  VocabdServer::Options options;
  options.listen_address = "127.0.0.1:0";
  options.http_listen = "127.0.0.1:0";
  options.models = {{kBinModel, Stories260KBin()}};
  options.compute_threads = 1;
  auto server = VocabdServer::Create(options);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string text(1 << 20, 'a');
  // Blocker: 4 x 1 MiB over gRPC on the single compute thread.
  std::thread blocker([&] {
    auto stub = v1::TokenizerService::NewStub(
        grpc::CreateChannel((*server)->target(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    v1::TokenizeRequest req;
    for (int i = 0; i < 4; ++i) req.add_texts(text);
    v1::TokenizeResponse res;
    stub->Tokenize(&ctx, req, &res);
  });
  auto gauge = [&](const char* name, const PrometheusText::Labels& labels) {
    return PrometheusText((*server)->metrics().Render()).Value(name, labels).value_or(-1);
  };
  ASSERT_TRUE(WaitFor([&] { return gauge("vocabd_in_flight_requests", {}) >= 1; },
                      std::chrono::seconds(30)));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the handler submits it
  const uint64_t skipped_before = (*server)->metrics().skipped_work("cancelled");
  const std::string body =
      R"({"texts": [")" + absl::Base64Escape(text) + R"("]})";
  std::vector<int> fds;
  for (int i = 0; i < 4; ++i) {
    const int fd = Connect((*server)->http_port());
    ASSERT_GE(fd, 0);
    SendAll(fd, PostRequest("/v1/TokenizerService/Tokenize", body));
    fds.push_back(fd);
  }
  EXPECT_TRUE(WaitFor([&] { return gauge("vocabd_queue_depth", {{"queue", "tokenize"}}) == 4; },
                      std::chrono::seconds(30)))
      << "the four HTTP calls never all waited in the tokenize queue";
  for (int fd : fds) ::close(fd);  // the clients go away
  blocker.join();
  // The queued calls, cancelled, are dropped when the thread reaches them.
  for (int i = 0; i < 100 && (*server)->metrics().skipped_work("cancelled") < skipped_before + 4;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ((*server)->metrics().skipped_work("cancelled") - skipped_before, 4u);
  (*server)->Shutdown();
}

}  // namespace
}  // namespace vocabd::testing
