#include "client/vocabd_client.h"

#include <fstream>
#include <functional>
#include <sstream>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"

namespace vocabd {

namespace {

// Runs one unary call with a fresh, deadline-bearing context.
template <typename Stub, typename Request, typename Response>
absl::StatusOr<Response> Unary(
    Stub* stub, grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&, Response*),
    const Request& request, const std::function<void(grpc::ClientContext*)>& prepare) {
  grpc::ClientContext context;
  prepare(&context);
  Response response;
  grpc::Status status = (stub->*method)(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::StatusOr<std::string> ReadFileOption(const std::string& path, const char* option) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(option, " = '", path, "': cannot open"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const VocabdClient::Options& options, grpc::ChannelArguments* args) {
  std::string token = options.token;
  if (token.empty() && !options.token_file.empty()) {
    absl::StatusOr<std::string> text = ReadFileOption(options.token_file, "token_file");
    if (!text.ok()) return text.status();
    std::istringstream lines(*text);
    std::string line;
    while (token.empty() && std::getline(lines, line)) {
      token = std::string(absl::StripAsciiWhitespace(line));
      if (!token.empty() && token[0] == '#') token.clear();
    }
    if (token.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("token_file = '", options.token_file, "' holds no token"));
    }
  }
  const bool tls = options.tls || !options.ca_file.empty() || !options.cert_file.empty() ||
                   !options.key_file.empty();
  if (options.cert_file.empty() != options.key_file.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("cert_file = '", options.cert_file,
                                                   "' and key_file = '", options.key_file,
                                                   "' must be given together"));
  }
  if (!tls) {
    if (!token.empty()) {
      return absl::InvalidArgumentError(
          "a bearer token needs TLS (tls / ca_file): tokens are never sent in plaintext");
    }
    return grpc::InsecureChannelCredentials();
  }
  grpc::SslCredentialsOptions ssl;
  if (!options.ca_file.empty()) {
    absl::StatusOr<std::string> ca = ReadFileOption(options.ca_file, "ca_file");
    if (!ca.ok()) return ca.status();
    ssl.pem_root_certs = *ca;
  }
  if (!options.cert_file.empty()) {
    absl::StatusOr<std::string> cert = ReadFileOption(options.cert_file, "cert_file");
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadFileOption(options.key_file, "key_file");
    if (!key.ok()) return key.status();
    ssl.pem_cert_chain = *cert;
    ssl.pem_private_key = *key;
  }
  if (!options.tls_server_name.empty()) {
    args->SetSslTargetNameOverride(options.tls_server_name);
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::SslCredentials(ssl);
  if (!token.empty()) {
    credentials = grpc::CompositeChannelCredentials(credentials,
                                                    grpc::AccessTokenCredentials(token));
  }
  return credentials;
}

}  // namespace

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  // grpc::StatusCode and absl::StatusCode share the canonical numbering.
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

absl::StatusOr<std::unique_ptr<VocabdClient>> VocabdClient::Create(const Options& options) {
  if (options.target.empty()) {
    return absl::InvalidArgumentError("target is empty; expected host:port or a gRPC URI");
  }
  if (options.max_receive_message_bytes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("max_receive_message_bytes = ",
                                                   options.max_receive_message_bytes,
                                                   " must be > 0"));
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  args.SetMaxSendMessageSize(-1);  // the server enforces its own limit
  if (!options.lb_policy.empty()) {
    if (options.lb_policy != "round_robin" && options.lb_policy != "pick_first") {
      return absl::InvalidArgumentError(absl::StrCat(
          "lb_policy = '", options.lb_policy, "' must be round_robin or pick_first"));
    }
    args.SetLoadBalancingPolicyName(options.lb_policy);
  }
  if (!options.service_config.empty()) args.SetServiceConfigJSON(options.service_config);
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      MakeChannelCredentials(options, &args);
  if (!credentials.ok()) return credentials.status();
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(options.target, *credentials, args);
  if (channel == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("cannot create a channel to target \"",
                                                   options.target, "\""));
  }
  return std::make_unique<VocabdClient>(std::move(channel), options);
}

VocabdClient::VocabdClient(std::shared_ptr<grpc::Channel> channel, const Options& options)
    : channel_(std::move(channel)),
      options_(options),
      models_(v1::ModelService::NewStub(channel_)),
      embedding_(v1::EmbeddingService::NewStub(channel_)),
      scoring_(v1::ScoringService::NewStub(channel_)),
      position_(v1::PositionService::NewStub(channel_)),
      tokenizer_(v1::TokenizerService::NewStub(channel_)) {}

void VocabdClient::PrepareContext(grpc::ClientContext* context) const {
  if (options_.timeout.count() > 0) {
    context->set_deadline(std::chrono::system_clock::now() + options_.timeout);
  }
}

absl::StatusOr<std::string> VocabdClient::HealthCheck(const std::string& service) {
  auto stub = grpc::health::v1::Health::NewStub(channel_);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  grpc::ClientContext context;
  PrepareContext(&context);
  grpc::Status status = stub->Check(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return grpc::health::v1::HealthCheckResponse_ServingStatus_Name(response.status());
}

absl::StatusOr<v1::ListModelsResponse> VocabdClient::ListModels() {
  return Unary(models_.get(), &v1::ModelService::Stub::ListModels, v1::ListModelsRequest(),
               [this](grpc::ClientContext* c) { PrepareContext(c); });
}

absl::StatusOr<v1::ModelInfo> VocabdClient::GetModel(const std::string& name) {
  v1::GetModelRequest request;
  request.set_name(name);
  return Unary(models_.get(), &v1::ModelService::Stub::GetModel, request,
               [this](grpc::ClientContext* c) { PrepareContext(c); });
}

absl::StatusOr<v1::ModelInfo> VocabdClient::LoadModel(const std::string& name) {
  v1::LoadModelRequest request;
  request.set_name(name);
  return Unary(models_.get(), &v1::ModelService::Stub::LoadModel, request,
               [this](grpc::ClientContext* c) { PrepareContext(c); });
}

absl::StatusOr<v1::UnloadModelResponse> VocabdClient::UnloadModel(const std::string& name) {
  v1::UnloadModelRequest request;
  request.set_name(name);
  return Unary(models_.get(), &v1::ModelService::Stub::UnloadModel, request,
               [this](grpc::ClientContext* c) { PrepareContext(c); });
}

absl::StatusOr<v1::EmbedResponse> VocabdClient::Embed(const v1::EmbedRequest& request) {
  return Unary(embedding_.get(), &v1::EmbeddingService::Stub::Embed, request,
               [this](grpc::ClientContext* c) { PrepareContext(c); });
}

absl::StatusOr<v1::ComputeLogitsResponse> VocabdClient::ComputeLogits(
    const v1::ComputeLogitsRequest& request) {
  return Unary(scoring_.get(), &v1::ScoringService::Stub::ComputeLogits, request,
               [this](grpc::ClientContext* c) { PrepareContext(c); });
}

absl::StatusOr<v1::ScoreResponse> VocabdClient::Score(const v1::ScoreRequest& request) {
  return Unary(scoring_.get(), &v1::ScoringService::Stub::Score, request,
               [this](grpc::ClientContext* c) { PrepareContext(c); });
}

absl::StatusOr<std::vector<v1::ScoreResponse>> VocabdClient::ScoreStream(
    const std::vector<v1::ScoreRequest>& requests) {
  grpc::ClientContext context;
  PrepareContext(&context);
  std::unique_ptr<grpc::ClientReaderWriter<v1::ScoreRequest, v1::ScoreResponse>> stream =
      scoring_->ScoreStream(&context);
  // A failed write means the stream is broken; Finish() has the reason.
  std::thread writer([&stream, &requests]() {
    for (const v1::ScoreRequest& request : requests) {
      if (!stream->Write(request)) return;
    }
    stream->WritesDone();
  });
  std::vector<v1::ScoreResponse> responses;
  v1::ScoreResponse response;
  while (stream->Read(&response)) responses.push_back(std::move(response));
  writer.join();
  grpc::Status status = stream->Finish();
  if (!status.ok()) return FromGrpcStatus(status);
  if (responses.size() != requests.size()) {
    return absl::InternalError(absl::StrCat("ScoreStream answered ", responses.size(),
                                            " responses to ", requests.size(), " requests"));
  }
  return responses;
}

absl::StatusOr<std::vector<v1::EmbedResponse>> VocabdClient::EmbedStream(
    const std::vector<v1::EmbedRequest>& requests) {
  grpc::ClientContext context;
  PrepareContext(&context);
  std::unique_ptr<grpc::ClientReaderWriter<v1::EmbedRequest, v1::EmbedResponse>> stream =
      embedding_->EmbedStream(&context);
  // A failed write means the stream is broken; Finish() has the reason.
  std::thread writer([&stream, &requests]() {
    for (const v1::EmbedRequest& request : requests) {
      if (!stream->Write(request)) return;
    }
    stream->WritesDone();
  });
  std::vector<v1::EmbedResponse> responses;
  v1::EmbedResponse response;
  while (stream->Read(&response)) responses.push_back(std::move(response));
  writer.join();
  grpc::Status status = stream->Finish();
  if (!status.ok()) return FromGrpcStatus(status);
  if (responses.size() != requests.size()) {
    return absl::InternalError(absl::StrCat("EmbedStream answered ", responses.size(),
                                            " responses to ", requests.size(), " requests"));
  }
  return responses;
}

absl::StatusOr<v1::ApplyRopeResponse> VocabdClient::ApplyRope(
    const v1::ApplyRopeRequest& request) {
  return Unary(position_.get(), &v1::PositionService::Stub::ApplyRope, request,
               [this](grpc::ClientContext* c) { PrepareContext(c); });
}

absl::StatusOr<v1::GetRopeCacheResponse> VocabdClient::GetRopeCache(
    const v1::GetRopeCacheRequest& request) {
  return Unary(position_.get(), &v1::PositionService::Stub::GetRopeCache, request,
               [this](grpc::ClientContext* c) { PrepareContext(c); });
}

absl::StatusOr<v1::GetSinusoidalPositionsResponse> VocabdClient::GetSinusoidalPositions(
    const v1::GetSinusoidalPositionsRequest& request) {
  return Unary(position_.get(), &v1::PositionService::Stub::GetSinusoidalPositions, request,
               [this](grpc::ClientContext* c) { PrepareContext(c); });
}

absl::StatusOr<v1::GetAlibiSlopesResponse> VocabdClient::GetAlibiSlopes(
    const v1::GetAlibiSlopesRequest& request) {
  return Unary(position_.get(), &v1::PositionService::Stub::GetAlibiSlopes, request,
               [this](grpc::ClientContext* c) { PrepareContext(c); });
}

absl::StatusOr<v1::TokenizeResponse> VocabdClient::Tokenize(const v1::TokenizeRequest& request) {
  return Unary(tokenizer_.get(), &v1::TokenizerService::Stub::Tokenize, request,
               [this](grpc::ClientContext* c) { PrepareContext(c); });
}

absl::StatusOr<v1::DetokenizeResponse> VocabdClient::Detokenize(
    const v1::DetokenizeRequest& request) {
  return Unary(tokenizer_.get(), &v1::TokenizerService::Stub::Detokenize, request,
               [this](grpc::ClientContext* c) { PrepareContext(c); });
}

absl::StatusOr<v1::GetVocabularyResponse> VocabdClient::GetVocabulary(
    const v1::GetVocabularyRequest& request) {
  return Unary(tokenizer_.get(), &v1::TokenizerService::Stub::GetVocabulary, request,
               [this](grpc::ClientContext* c) { PrepareContext(c); });
}

absl::StatusOr<std::vector<std::string>> VocabdClient::ListServices() {
  namespace refl = grpc::reflection::v1alpha;
  auto stub = refl::ServerReflection::NewStub(channel_);
  grpc::ClientContext context;
  PrepareContext(&context);
  auto stream = stub->ServerReflectionInfo(&context);
  refl::ServerReflectionRequest request;
  request.set_list_services("*");
  // A failed write means the stream is broken; Finish() has the reason.
  const bool written = stream->Write(request) && stream->WritesDone();
  refl::ServerReflectionResponse response;
  const bool got = written && stream->Read(&response);
  if (got) {
    // Drain so Finish() does not block on unread messages.
    refl::ServerReflectionResponse extra;
    while (stream->Read(&extra)) {
    }
  }
  grpc::Status status = stream->Finish();
  if (!status.ok()) return FromGrpcStatus(status);
  if (!got) return absl::UnavailableError("server reflection closed the stream without a reply");
  if (response.has_error_response()) {
    return absl::Status(static_cast<absl::StatusCode>(response.error_response().error_code()),
                        absl::StrCat("server reflection: ",
                                     response.error_response().error_message()));
  }
  if (!response.has_list_services_response()) {
    return absl::InternalError("server reflection answered list_services with another reply");
  }
  std::vector<std::string> names;
  for (const auto& service : response.list_services_response().service()) {
    names.push_back(service.name());
  }
  return names;
}

}  // namespace vocabd
