// The HTTP/JSON front door (--http-listen, server/http_gateway.h) against the
// real server with a real HTTP client (httplib::Client): every unary RPC
// answers what gRPC answers (requests written with protobuf's own JSON
// printer, answers parsed with its parser and compared field by field),
// errors as JSON with the mapped HTTP status, health / readiness / metrics,
// number-array tensors, limits, and TLS / mutual TLS / bearer tokens.
#include <httplib.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "client/vocabd_client.h"
#include "lib/checkpoint/checkpoint.h"
#include "lib/core/dtype.h"
#include "proto/tensor_codec.h"
#include "server/http_gateway.h"
#include "server/metrics.h"
#include "server/server.h"
#include "tests/server/prometheus_text.h"
#include "tests/server/server_fixture.h"
#include "tests/test_util.h"
#include "vocabd/v1/embedding.pb.h"
#include "vocabd/v1/model.pb.h"
#include "vocabd/v1/position.pb.h"
#include "vocabd/v1/scoring.pb.h"

namespace vocabd::testing {
namespace {

namespace fs = std::filesystem;
using ::google::protobuf::Message;
using ::google::protobuf::util::MessageDifferencer;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using json = nlohmann::json;

constexpr int64_t kHidden = 64;
constexpr char kServices[][24] = {"ModelService", "EmbeddingService", "ScoringService",
                                  "PositionService", "TokenizerService"};

std::string ToJson(const Message& m) {
  std::string out;
  EXPECT_TRUE(google::protobuf::util::MessageToJsonString(m, &out).ok());
  return out;
}

std::vector<float> SomeFloats(size_t n, double phase) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(std::sin(phase * (i + 1)));
  return v;
}

// gRPC answer of `method` ("/vocabd.v1.S/M") for serialized `request`.
struct GrpcAnswer {
  grpc::Status status;
  std::string bytes;
};
GrpcAnswer CallGrpc(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                    const std::string& request) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  grpc::Slice slice(request);
  grpc::ByteBuffer in(&slice, 1);
  grpc::ByteBuffer out;
  std::promise<grpc::Status> done;
  HappensBefore(&done);  // gRPC's thread runs the callback (lib/core/happens_before.h)
  stub.UnaryCall(&ctx, method, grpc::StubOptions(), &in, &out, [&done](grpc::Status s) {
    HappensAfter(&done);
    done.set_value(std::move(s));
  });
  GrpcAnswer answer;
  answer.status = done.get_future().get();
  std::vector<grpc::Slice> slices;
  if (answer.status.ok() && out.Dump(&slices).ok()) {
    for (const grpc::Slice& s : slices) {
      answer.bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
  }
  return answer;
}

class HttpGatewayTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new std::string(MakeTempDir());
    fs::copy(Stories260KHfDir(), *root_ + "/repo-hf");
    VocabdServer::Options options;
    options.listen_address = "127.0.0.1:0";
    options.http_listen = "127.0.0.1:0";
    options.models = {{kBinModel, Stories260KBin()}, {kHfModel, Stories260KHfDir()}};
    options.model_repository = *root_;
    options.compute_threads = 2;
    auto server = VocabdServer::Create(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server).release();
    ASSERT_GT(server_->http_port(), 0);
    channel_ = new std::shared_ptr<grpc::Channel>(
        grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials()));
  }
  static void TearDownTestSuite() {
    delete channel_;
    server_->Shutdown();
    delete server_;
    fs::remove_all(*root_);
    delete root_;
  }
  static httplib::Client Http() {
    httplib::Client client("127.0.0.1", server_->http_port());
    client.set_read_timeout(30, 0);
    return client;
  }
  static httplib::Result Post(const std::string& path, const std::string& body,
                              const httplib::Headers& headers = {}) {
    return Http().Post(path.c_str(), headers, body, "application/json");
  }
  static std::unique_ptr<Message> NewMessage(const google::protobuf::Descriptor* type) {
    return std::unique_ptr<Message>(
        google::protobuf::MessageFactory::generated_factory()->GetPrototype(type)->New());
  }
  // POSTs `request` to /v1/<service>/<method> and checks the answer equals
  // the gRPC answer to the same request: the same response message, or the
  // same error (code name, message, mapped HTTP status).
  // Returns whether gRPC answered OK.
  static bool ExpectSameAsGrpc(const std::string& service, const std::string& method,
                               const Message& request) {
    SCOPED_TRACE(service + "/" + method);
    const auto* desc = google::protobuf::DescriptorPool::generated_pool()
                           ->FindServiceByName("vocabd.v1." + service)
                           ->FindMethodByName(method);
    EXPECT_NE(desc, nullptr);
    if (desc == nullptr) return false;
    const GrpcAnswer want = CallGrpc(*channel_, "/vocabd.v1." + service + "/" + method,
                                     request.SerializeAsString());
    auto got = Post("/v1/" + service + "/" + method, ToJson(request));
    EXPECT_TRUE(got) << httplib::to_string(got.error());
    if (!got) return false;
    CompareAnswers(*got, want, desc);
    return want.status.ok();
  }
  static void CompareAnswers(const httplib::Response& response, const GrpcAnswer& want,
                             const google::protobuf::MethodDescriptor* desc) {
    const httplib::Response* got = &response;
    EXPECT_EQ(got->get_header_value("Content-Type"), "application/json");
    if (want.status.ok()) {
      ASSERT_EQ(got->status, 200) << got->body;
      auto from_http = NewMessage(desc->output_type());
      auto from_grpc = NewMessage(desc->output_type());
      ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(got->body, from_http.get()).ok())
          << got->body;
      ASSERT_TRUE(from_grpc->ParseFromString(want.bytes));
      std::string differences;
      MessageDifferencer differencer;
      differencer.ReportDifferencesToString(&differences);
      // EQUIVALENT: an absent proto3 scalar equals its default. A -0.0 score
      // is on the gRPC wire but protobuf's JSON printer omits it as a default.
      differencer.set_message_field_comparison(MessageDifferencer::EQUIVALENT);
      EXPECT_TRUE(differencer.Compare(*from_http, *from_grpc))
          << "HTTP vs gRPC:\n" << differences.substr(0, 2000);
    } else {
      EXPECT_EQ(got->status, HttpStatusFor(want.status.error_code())) << got->body;
      const json body = json::parse(got->body);
      EXPECT_EQ(body["code"], absl::StatusCodeToString(
                                  static_cast<absl::StatusCode>(want.status.error_code())));
      EXPECT_EQ(body["message"], want.status.error_message());
    }
  }
  static VocabdServer* server_;
  static std::shared_ptr<grpc::Channel>* channel_;
  static std::string* root_;
};
VocabdServer* HttpGatewayTest::server_ = nullptr;
std::shared_ptr<grpc::Channel>* HttpGatewayTest::channel_ = nullptr;
std::string* HttpGatewayTest::root_ = nullptr;

// A meaningful request per unary RPC; RPCs without one here (added later)
// are still called with an empty request and must answer as gRPC does.
std::unique_ptr<Message> SampleRequest(const std::string& service, const std::string& method) {
  if (method == "ListModels") return std::make_unique<v1::ListModelsRequest>();
  if (method == "GetModel") {
    auto r = std::make_unique<v1::GetModelRequest>();
    r->set_name(kHfModel);
    return r;
  }
  if (method == "LoadModel" || method == "UnloadModel") return nullptr;  // own test
  if (method == "Embed") {
    auto r = std::make_unique<v1::EmbedRequest>();
    r->set_request_id("http-1");
    for (int64_t id : {1, 403, 407}) r->add_sequences()->add_token_ids(id);
    r->mutable_sequences(1)->add_token_ids(511);
    r->set_output_dtype(v1::BF16);
    return r;
  }
  if (method == "ComputeLogits") {
    auto r = std::make_unique<v1::ComputeLogitsRequest>();
    *r->mutable_hidden() = EncodeFloatTensor(SomeFloats(2 * kHidden, 0.3), {2, kHidden});
    r->set_log_softmax(true);
    return r;
  }
  if (method == "Score") {
    auto r = std::make_unique<v1::ScoreRequest>();
    r->set_model(kHfModel);
    *r->mutable_hidden() = EncodeFloatTensor(SomeFloats(3 * kHidden, 0.7), {3, kHidden});
    for (int64_t id : {5, 42, 300}) r->add_target_ids(id);
    r->set_top_k(4);
    return r;
  }
  if (method == "ApplyRope") {
    auto r = std::make_unique<v1::ApplyRopeRequest>();
    r->set_layout(v1::BSHD);
    // stories260K: 8 query heads, 4 kv heads, head_dim 8.
    *r->mutable_q() = EncodeFloatTensor(SomeFloats(1 * 3 * 8 * 8, 0.11), {1, 3, 8, 8});
    *r->mutable_k() = EncodeFloatTensor(SomeFloats(1 * 3 * 4 * 8, 0.13), {1, 3, 4, 8});
    *r->mutable_position_ids() = EncodeInt64Tensor({0, 5, 9}, {1, 3});
    return r;
  }
  if (method == "GetRopeCache") {
    auto r = std::make_unique<v1::GetRopeCacheRequest>();
    r->set_num_positions(6);
    r->set_start_position(2);
    return r;
  }
  if (method == "GetSinusoidalPositions") {
    auto r = std::make_unique<v1::GetSinusoidalPositionsRequest>();
    r->set_num_positions(4);
    r->set_dim(8);
    return r;
  }
  if (method == "GetAlibiSlopes") {
    auto r = std::make_unique<v1::GetAlibiSlopesRequest>();
    r->set_num_heads(6);
    return r;
  }
  (void)service;
  return nullptr;
}

TEST_F(HttpGatewayTest, EveryUnaryRpcAnswersAsGrpcDoes) {
  int covered = 0;
  for (const char* service : kServices) {
    const auto* s = google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
        std::string("vocabd.v1.") + service);
    if (s == nullptr) continue;
    for (int i = 0; i < s->method_count(); ++i) {
      const auto* m = s->method(i);
      if (m->client_streaming() || m->server_streaming()) continue;
      if (m->name() == "LoadModel" || m->name() == "UnloadModel") continue;  // below
      std::unique_ptr<Message> request = SampleRequest(service, m->name());
      if (request != nullptr) {
        // The samples are valid requests: a real answer is compared.
        EXPECT_TRUE(ExpectSameAsGrpc(service, m->name(), *request)) << m->name();
        ++covered;
      }
      // The empty request too (defaults or the same error).
      ExpectSameAsGrpc(service, m->name(), *NewMessage(m->input_type()));
    }
  }
  EXPECT_EQ(covered, 9);  // ListModels GetModel Embed ComputeLogits Score + 4 PositionService
}

TEST_F(HttpGatewayTest, LoadAndUnloadModelOverHttp) {
  auto loaded = Post("/v1/ModelService/LoadModel", R"({"name": "repo-hf"})");
  ASSERT_TRUE(loaded);
  ASSERT_EQ(loaded->status, 200) << loaded->body;
  v1::ModelInfo from_http;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(loaded->body, &from_http).ok());
  v1::GetModelRequest get;
  get.set_name("repo-hf");
  const GrpcAnswer info = CallGrpc(*channel_, "/vocabd.v1.ModelService/GetModel",
                                   get.SerializeAsString());
  ASSERT_TRUE(info.status.ok()) << info.status.error_message();
  v1::ModelInfo from_grpc;
  ASSERT_TRUE(from_grpc.ParseFromString(info.bytes));
  // lm_head_memory may change in between: LoadModel answers while the
  // head's background huge-page copy runs, GetModel may come after it.
  EXPECT_THAT(from_http.lm_head_memory(), AnyOf("huge pages (packed at load)",
                                                "file mapping, copying to huge pages",
                                                "huge pages (copied at load)"));
  EXPECT_EQ(from_grpc.lm_head_memory().empty(), false);
  from_http.clear_lm_head_memory();
  from_grpc.clear_lm_head_memory();
  EXPECT_TRUE(MessageDifferencer::Equals(from_http, from_grpc));

  auto unloaded = Post("/v1/ModelService/UnloadModel", R"({"name": "repo-hf"})");
  ASSERT_TRUE(unloaded);
  EXPECT_EQ(unloaded->status, 200) << unloaded->body;
  EXPECT_EQ(json::parse(unloaded->body), json::object());
  // Errors equal gRPC's: unknown repository model, unloading an unknown model.
  v1::LoadModelRequest load;
  load.set_name("no-such-model");
  ExpectSameAsGrpc("ModelService", "LoadModel", load);
  v1::UnloadModelRequest unload;
  unload.set_name("repo-hf");
  ExpectSameAsGrpc("ModelService", "UnloadModel", unload);
}

TEST_F(HttpGatewayTest, ErrorsAreJsonWithTheMappedHttpStatus) {
  struct Case {
    std::string path;
    std::string body;
    int status;
    std::string code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"/v1/EmbeddingService/Embed", R"({"sequences": [{"tokenIds": [9999]}]})", 400,
       "INVALID_ARGUMENT", "9999"},
      {"/v1/EmbeddingService/Embed", R"({"model": "nope", "sequences": [{"tokenIds": [1]}]})",
       404, "NOT_FOUND", "nope"},
      {"/v1/EmbeddingService/Embed", R"({"sequences": )", 400, "INVALID_ARGUMENT",
       "vocabd.v1.EmbedRequest"},
      {"/v1/EmbeddingService/Embed", R"({"sequencez": []})", 400, "INVALID_ARGUMENT",
       "sequencez"},
      {"/v1/EmbeddingService/Nope", "{}", 404, "NOT_FOUND", "/v1/EmbeddingService/Embed"},
      {"/v1/NoService/Embed", "{}", 404, "NOT_FOUND", "no RPC vocabd.v1.NoService/Embed"},
      {"/v1/EmbeddingService/EmbedStream", "{}", 501, "UNIMPLEMENTED", "streaming"},
      {"/v2/EmbeddingService/Embed", "{}", 404, "NOT_FOUND", "POST /v1/<Service>/<Method>"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.path + " " + c.body);
    auto res = Post(c.path, c.body);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, c.status) << res->body;
    const json body = json::parse(res->body, nullptr, false);
    ASSERT_FALSE(body.is_discarded()) << res->body;
    EXPECT_EQ(body["code"], c.code);
    EXPECT_THAT(body["message"].get<std::string>(), HasSubstr(c.message));
  }
  // GET on an RPC path.
  auto get = Http().Get("/v1/EmbeddingService/Embed");
  ASSERT_TRUE(get);
  EXPECT_EQ(get->status, 404);
  EXPECT_EQ(json::parse(get->body)["code"], "NOT_FOUND");
}

TEST(HttpStatusForTest, StandardGrpcToHttpMapping) {
  using C = grpc::StatusCode;
  const std::vector<std::pair<C, int>> want = {
      {C::OK, 200},          {C::CANCELLED, 499},         {C::UNKNOWN, 500},
      {C::INVALID_ARGUMENT, 400}, {C::DEADLINE_EXCEEDED, 504}, {C::NOT_FOUND, 404},
      {C::ALREADY_EXISTS, 409},   {C::PERMISSION_DENIED, 403}, {C::RESOURCE_EXHAUSTED, 429},
      {C::FAILED_PRECONDITION, 400}, {C::ABORTED, 409},    {C::OUT_OF_RANGE, 400},
      {C::UNIMPLEMENTED, 501},    {C::INTERNAL, 500},      {C::UNAVAILABLE, 503},
      {C::DATA_LOSS, 500},        {C::UNAUTHENTICATED, 401}};
  for (const auto& [code, status] : want) EXPECT_EQ(HttpStatusFor(code), status) << code;
}

TEST_F(HttpGatewayTest, HealthReadinessAndMetrics) {
  auto health = Http().Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(json::parse(health->body)["status"], "SERVING");
  auto ready = Http().Get("/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200);
  EXPECT_EQ(json::parse(ready->body)["status"], "READY");
  EXPECT_EQ(json::parse(ready->body)["model"], kBinModel);

  // HTTP calls are counted by the same metrics as gRPC calls.
  constexpr char kAlibi[] = "/vocabd.v1.PositionService/GetAlibiSlopes";
  const uint64_t before = server_->metrics().requests(kAlibi, "OK");
  auto r = Post("/v1/PositionService/GetAlibiSlopes", R"({"numHeads": 4})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(server_->metrics().requests(kAlibi, "OK"), before + 1);
  auto metrics = Http().Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  const PrometheusText p(metrics->body);
  EXPECT_THAT(p.Value("vocabd_requests_total", {{"method", kAlibi}, {"code", "OK"}}),
              ::testing::Optional(static_cast<double>(before + 1)));
}

TEST_F(HttpGatewayTest, RequestIdHeaderAndTimeout) {
  auto r = Post("/v1/EmbeddingService/Embed", R"({"sequences": [{"tokenIds": ["7"]}]})",
                {{"X-Vocabd-Timeout-Ms", "abc"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_THAT(r->body, HasSubstr("X-Vocabd-Timeout-Ms"));
  r = Post("/v1/EmbeddingService/Embed", R"({"sequences": [{"tokenIds": ["7"]}]})",
           {{"X-Vocabd-Timeout-Ms", "10000"}, {"X-Request-Id", "abc-1"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
}

// Number arrays: requests may carry "values"; ?tensors=values (or the
// X-Vocabd-Tensors header) returns them, exactly the F32 the server computed.
TEST_F(HttpGatewayTest, TensorsAsNumberArrays) {
  auto ckpt = LoadCheckpoint(Stories260KBin());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  const float* table = (*ckpt)->embedding().f32();
  for (const bool header : {false, true}) {
    auto r = header ? Post("/v1/EmbeddingService/Embed",
                           R"({"sequences": [{"tokenIds": [403, 7]}]})",
                           {{"X-Vocabd-Tensors", "values"}})
                    : Post("/v1/EmbeddingService/Embed?tensors=values",
                           R"({"sequences": [{"tokenIds": [403, 7]}]})");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const json body = json::parse(r->body);
    const json& t = body["embeddings"];
    EXPECT_EQ(t["dtype"], "F32");
    EXPECT_EQ(t["shape"], json::array({"2", "64"}));
    EXPECT_FALSE(t.contains("data"));
    ASSERT_EQ(t["values"].size(), 2u * kHidden);
    for (int64_t j = 0; j < kHidden; ++j) {
      EXPECT_EQ(t["values"][j].get<float>(), table[403 * kHidden + j]) << j;
      EXPECT_EQ(t["values"][kHidden + j].get<float>(), table[7 * kHidden + j]) << j;
    }
  }
  // BF16 output as numbers: the rounded values.
  auto bf = Post("/v1/EmbeddingService/Embed?tensors=values",
                 R"({"sequences": [{"tokenIds": [403]}], "outputDtype": "BF16"})");
  ASSERT_TRUE(bf);
  ASSERT_EQ(bf->status, 200) << bf->body;
  const json bt = json::parse(bf->body)["embeddings"];
  EXPECT_EQ(bt["dtype"], "BF16");
  for (int64_t j = 0; j < kHidden; ++j) {
    EXPECT_EQ(bt["values"][j].get<float>(),
              BFloat16ToFloat(FloatToBFloat16(table[403 * kHidden + j])));
  }

  // Score with "values" hidden equals Score with the base64 tensor.
  const std::vector<float> hidden = SomeFloats(2 * kHidden, 0.9);
  v1::ScoreRequest score;
  *score.mutable_hidden() = EncodeFloatTensor(hidden, {2, kHidden});
  score.add_target_ids(3);
  score.add_target_ids(77);
  score.set_top_k(3);
  json with_values = json::parse(ToJson(score));
  with_values["hidden"].erase("data");
  with_values["hidden"].erase("dtype");  // F32 by default
  with_values["hidden"]["values"] = json::array();
  for (float x : hidden) with_values["hidden"]["values"].push_back(x);
  auto a = Post("/v1/ScoringService/Score", with_values.dump());
  auto b = Post("/v1/ScoringService/Score", ToJson(score));
  ASSERT_TRUE(a && b);
  ASSERT_EQ(a->status, 200) << a->body;
  EXPECT_EQ(json::parse(a->body), json::parse(b->body));

  // ApplyRope with q, k as numbers and position ids as I64 numbers, answers
  // as numbers: equal to the base64 request's answer decoded.
  std::unique_ptr<Message> rope = SampleRequest("PositionService", "ApplyRope");
  const auto& rr = static_cast<const v1::ApplyRopeRequest&>(*rope);
  json rope_values = json::parse(ToJson(rr));
  for (const char* field : {"q", "k"}) {
    const auto f = *DecodeFloatTensor(field[0] == 'q' ? rr.q() : rr.k(), field);
    rope_values[field].erase("data");
    rope_values[field]["values"] = f;
  }
  rope_values["positionIds"] = {{"dtype", "I64"}, {"shape", {1, 3}}, {"values", {0, 5, 9}}};
  auto rv = Post("/v1/PositionService/ApplyRope?tensors=values", rope_values.dump());
  auto rb = Post("/v1/PositionService/ApplyRope", ToJson(rr));
  ASSERT_TRUE(rv && rb);
  ASSERT_EQ(rv->status, 200) << rv->body;
  v1::ApplyRopeResponse base64_answer;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(rb->body, &base64_answer).ok());
  const json rvj = json::parse(rv->body);
  const auto want_q = *DecodeFloatTensor(base64_answer.q(), "q");
  ASSERT_EQ(rvj["q"]["values"].size(), want_q.size());
  for (size_t i = 0; i < want_q.size(); ++i) {
    EXPECT_EQ(rvj["q"]["values"][i].get<float>(), want_q[i]) << i;
  }

  // Bad "values" tensors name the field.
  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"({"hidden": {"shape": [2, 64], "values": [1, 2, 3]}})",
       "hidden.values has 3 numbers but shape [2, 64] needs 128"},
      {R"({"hidden": {"values": [1], "data": "AAAAAA=="}})", "not both"},
      {R"({"hidden": {"values": [1, "x"]}})", "hidden.values[1] = \"x\" is not a number"},
      {R"({"hidden": {"dtype": "F64", "values": [1]}})", "hidden.dtype = 'F64'"},
      // Numbers the dtype rounds to +-inf (FLT_MAX itself, 3.4028235e38, is in range).
      {R"({"hidden": {"values": [3.4028235e38, -1e39]}})",
       "hidden.values[1] = -1e+39 is out of range for F32 (it rounds to -inf)"},
      {R"({"hidden": {"dtype": "F16", "values": [65519, 65520]}})",
       "hidden.values[1] = 65520 is out of range for F16 (it rounds to inf)"},
      {R"({"hidden": {"dtype": "BF16", "values": [3.3e38, 3.4e38]}})",
       "hidden.values[1] = 3.4e+38 is out of range for BF16 (it rounds to inf)"},
  };
  for (const auto& [body, message] : bad) {
    auto res = Post("/v1/ScoringService/Score", body);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 400) << body;
    EXPECT_EQ(json::parse(res->body)["code"], "INVALID_ARGUMENT");
    EXPECT_THAT(json::parse(res->body)["message"].get<std::string>(), HasSubstr(message)) << body;
  }
  // Masked logits are -Infinity, written as the mapping writes floats.
  std::string halves = "0.5";
  for (int i = 1; i < kHidden; ++i) halves += ", 0.5";
  auto masked = Post("/v1/ScoringService/ComputeLogits?tensors=values",
                     R"({"hidden": {"shape": [1, 64], "values": [)" + halves +
                         R"(]}, "vocabLimit": 500})");
  ASSERT_TRUE(masked);
  ASSERT_EQ(masked->status, 200) << masked->body;
  const json logits = json::parse(masked->body)["logits"]["values"];
  ASSERT_EQ(logits.size(), 512u);
  EXPECT_TRUE(logits[100].is_number());
  EXPECT_EQ(logits[500], "-Infinity");
  EXPECT_EQ(logits[511], "-Infinity");
  auto i32 = Post("/v1/PositionService/ApplyRope",
                  R"({"positionIds": {"dtype": "I32", "values": [1.5]}})");
  ASSERT_TRUE(i32);
  EXPECT_EQ(i32->status, 400);
  EXPECT_THAT(i32->body, HasSubstr("positionIds.values[0] = 1.5 is not an integer"));
}

// Limits: the same --max-tokens-per-request, --max-receive-message-bytes and
// HTTP body limit (4 x the message limit).
TEST(HttpGatewayLimitsTest, LimitsApplyAsOnGrpc) {
  VocabdServer::Options options;
  options.listen_address = "127.0.0.1:0";
  options.http_listen = "127.0.0.1:0";
  options.models = {{kBinModel, Stories260KBin()}};
  options.max_tokens_per_request = 4;
  options.max_receive_message_bytes = 2048;
  auto server = VocabdServer::Create(options);
  ASSERT_TRUE(server.ok()) << server.status();
  httplib::Client http("127.0.0.1", (*server)->http_port());
  auto ok = http.Post("/v1/EmbeddingService/Embed", R"({"sequences": [{"tokenIds": [1, 2]}]})",
                      "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  auto many = http.Post("/v1/EmbeddingService/Embed",
                        R"({"sequences": [{"tokenIds": [1, 2, 3, 4, 5]}]})", "application/json");
  ASSERT_TRUE(many);
  EXPECT_EQ(many->status, 429) << many->body;
  EXPECT_EQ(json::parse(many->body)["code"], "RESOURCE_EXHAUSTED");
  // 1000 floats: a 4 KB message (over 2048) in a body under 4 x 2048.
  json big = {{"hidden", {{"shape", {1, 1000}}, {"values", json::array()}}}};
  for (int i = 0; i < 1000; ++i) big["hidden"]["values"].push_back(0.5);
  ASSERT_LT(big.dump().size(), 4u * 2048);
  auto too_big = http.Post("/v1/ScoringService/Score", big.dump(), "application/json");
  ASSERT_TRUE(too_big);
  EXPECT_EQ(too_big->status, 429) << too_big->body;
  EXPECT_EQ(json::parse(too_big->body)["code"], "RESOURCE_EXHAUSTED");
  // A body over the HTTP limit.
  auto body_too_big = http.Post("/v1/ScoringService/Score", std::string(9000, ' ') + "{}",
                                "application/json");
  ASSERT_TRUE(body_too_big);
  EXPECT_EQ(body_too_big->status, 413);
  EXPECT_EQ(json::parse(body_too_big->body)["code"], "RESOURCE_EXHAUSTED");
  (*server)->Shutdown();
  // After shutdown the port is closed.
  EXPECT_FALSE(http.Get("/healthz"));
}

// Detokenize with 1,000,000 empty sequences is a 3 MB JSON body that
// protobuf's JSON mapping would turn into a 1.2 GB peak. The body's
// conversion cost is checked against --max-request-memory-bytes first.
TEST(HttpGatewayLimitsTest, JsonConversionIsBoundedByTheRequestMemoryBudget) {
  VocabdServer::Options options;
  options.listen_address = "127.0.0.1:0";
  options.http_listen = "127.0.0.1:0";
  options.models = {{kBinModel, Stories260KBin()}};
  auto server = VocabdServer::Create(options);
  ASSERT_TRUE(server.ok()) << server.status();
  httplib::Client http("127.0.0.1", (*server)->http_port());
  std::string body = R"({"sequences": [)";
  for (int i = 0; i < 1000000; ++i) body += i == 0 ? "{}" : ",{}";
  body += "]}";
  auto r = http.Post("/v1/TokenizerService/Detokenize", body, "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429) << r->body;
  const json error = json::parse(r->body);
  EXPECT_EQ(error["code"], "RESOURCE_EXHAUSTED");
  EXPECT_EQ(error["message"],
            "HTTP/JSON request needs 1042000608 bytes (body 3000016 x 6 + values 2000001 x 512) "
            "> --max-request-memory-bytes = 268435456");
  // A small batch still works.
  auto ok = http.Post("/v1/TokenizerService/Detokenize",
                      R"({"sequences": [{"ids": [403, 407]}, {}]})", "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  EXPECT_EQ(json::parse(ok->body)["results"][0]["text"], "Once upon");
  (*server)->Shutdown();
}

TEST(HttpGatewayOptionsTest, BadListenAddressFailsCreateNamingTheFlag) {
  VocabdServer::Options options;
  options.listen_address = "127.0.0.1:0";
  options.http_listen = "nonsense";
  options.models = {{kBinModel, Stories260KBin()}};
  auto server = VocabdServer::Create(options);
  ASSERT_FALSE(server.ok());
  EXPECT_THAT(server.status().message(), HasSubstr("--http-listen"));
}

// TLS, mutual TLS and bearer tokens on the HTTP port, with certificates made
// by the openssl CLI (as tests/server/tls_auth_test.cc does).
class HttpGatewayTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(MakeTempDir());
    const std::string d = *dir_;
    std::ofstream(d + "/server.ext") << "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                                     << "extendedKeyUsage=serverAuth\n";
    std::ofstream(d + "/client.ext") << "extendedKeyUsage=clientAuth\n";
    std::ofstream(d + "/tokens") << "s3cret-token\n";
    const std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    const std::string script =
        "openssl req -x509 " + key + " -keyout " + d + "/ca.key -out " + d +
        "/ca.pem -days 2 -subj /CN=ca -addext basicConstraints=critical,CA:TRUE"
        " -addext keyUsage=critical,keyCertSign,cRLSign && "
        "openssl req " + key + " -keyout " + d + "/server.key -out " + d +
        "/server.csr -subj /CN=server && openssl x509 -req -in " + d + "/server.csr -CA " + d +
        "/ca.pem -CAkey " + d + "/ca.key -CAcreateserial -days 2 -out " + d +
        "/server.pem -extfile " + d + "/server.ext && "
        "openssl req " + key + " -keyout " + d + "/client.key -out " + d +
        "/client.csr -subj /CN=client && openssl x509 -req -in " + d + "/client.csr -CA " + d +
        "/ca.pem -CAkey " + d + "/ca.key -CAcreateserial -days 2 -out " + d +
        "/client.pem -extfile " + d + "/client.ext";
    ASSERT_EQ(std::system(("(" + script + ") >" + d + "/openssl.log 2>&1").c_str()), 0)
        << ReadFileBytes(d + "/openssl.log");
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }
  static std::string F(const std::string& name) { return *dir_ + "/" + name; }
  static std::unique_ptr<VocabdServer> Start(bool mtls, bool token) {
    VocabdServer::Options options;
    options.listen_address = "127.0.0.1:0";
    options.http_listen = "127.0.0.1:0";
    options.models = {{kBinModel, Stories260KBin()}};
    options.security.tls_cert_file = F("server.pem");
    options.security.tls_key_file = F("server.key");
    if (mtls) options.security.tls_client_ca_file = F("ca.pem");
    if (token) options.security.auth_token_file = F("tokens");
    auto server = VocabdServer::Create(options);
    EXPECT_TRUE(server.ok()) << server.status();
    return server.ok() ? std::move(*server) : nullptr;
  }
  static std::unique_ptr<httplib::SSLClient> Https(const VocabdServer& server, bool client_cert) {
    auto c = client_cert ? std::make_unique<httplib::SSLClient>(
                               "127.0.0.1", server.http_port(), F("client.pem"), F("client.key"))
                         : std::make_unique<httplib::SSLClient>("127.0.0.1", server.http_port());
    c->set_ca_cert_path(F("ca.pem").c_str());
    c->enable_server_certificate_verification(true);
    return c;
  }
  static constexpr char kEmbedBody[] = R"({"sequences": [{"tokenIds": [1, 2]}]})";
  static std::string* dir_;
};
std::string* HttpGatewayTlsTest::dir_ = nullptr;

TEST_F(HttpGatewayTlsTest, TlsServesHttpsOnlyAndAnswersAsGrpc) {
  auto server = Start(/*mtls=*/false, /*token=*/false);
  ASSERT_NE(server, nullptr);
  auto https = Https(*server, false);
  auto r = https->Post("/v1/EmbeddingService/Embed", kEmbedBody, "application/json");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200) << r->body;
  // Plain HTTP against the TLS port gets no answer.
  httplib::Client plain("127.0.0.1", server->http_port());
  plain.set_read_timeout(5, 0);
  EXPECT_FALSE(plain.Get("/healthz"));
  server->Shutdown();
}

TEST_F(HttpGatewayTlsTest, MutualTlsNeedsAClientCertificate) {
  auto server = Start(/*mtls=*/true, /*token=*/false);
  ASSERT_NE(server, nullptr);
  EXPECT_FALSE(Https(*server, false)->Get("/healthz"));
  auto r = Https(*server, true)->Post("/v1/EmbeddingService/Embed", kEmbedBody,
                                      "application/json");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200) << r->body;
  server->Shutdown();
}

TEST_F(HttpGatewayTlsTest, BearerTokenIsCheckedAndRefusalsCounted) {
  auto server = Start(/*mtls=*/false, /*token=*/true);
  ASSERT_NE(server, nullptr);
  auto https = Https(*server, false);
  constexpr char kEmbed[] = "/vocabd.v1.EmbeddingService/Embed";
  auto none = https->Post("/v1/EmbeddingService/Embed", kEmbedBody, "application/json");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401);
  EXPECT_EQ(json::parse(none->body)["code"], "UNAUTHENTICATED");
  EXPECT_THAT(none->body, HasSubstr("Authorization: Bearer"));
  auto wrong = https->Post("/v1/EmbeddingService/Embed", {{"Authorization", "Bearer nope"}},
                           kEmbedBody, "application/json");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  EXPECT_THAT(wrong->body, HasSubstr("not accepted"));
  auto ok = https->Post("/v1/EmbeddingService/Embed", {{"Authorization", "Bearer s3cret-token"}},
                        kEmbedBody, "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  EXPECT_EQ(server->metrics().requests(kEmbed, "UNAUTHENTICATED"), 2u);
  EXPECT_EQ(server->metrics().requests(kEmbed, "OK"), 1u);
  // Health and readiness need no token; metrics do.
  auto health = https->Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  auto ready = https->Get("/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200);
  auto metrics = https->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 401);
  auto metrics_ok = https->Get("/metrics", {{"Authorization", "Bearer s3cret-token"}});
  ASSERT_TRUE(metrics_ok);
  EXPECT_EQ(metrics_ok->status, 200);
  server->Shutdown();
}

}  // namespace
}  // namespace vocabd::testing
