// A small synchronous C++ client for vocabd. Thread-safe; one instance can
// be shared. Every call returns the server's status as an absl::Status
// (gRPC code mapped 1:1, message kept).
#ifndef VOCABD_CLIENT_VOCABD_CLIENT_H_
#define VOCABD_CLIENT_VOCABD_CLIENT_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "vocabd/v1/embedding.grpc.pb.h"
#include "vocabd/v1/model.grpc.pb.h"
#include "vocabd/v1/position.grpc.pb.h"
#include "vocabd/v1/scoring.grpc.pb.h"
#include "vocabd/v1/tokenizer.grpc.pb.h"

namespace vocabd {

// The gRPC service config every vocabctl channel (VocabdClient, `vocabctl
// bench`) uses unless told otherwise; clients/python/vocabd/client.py
// DEFAULT_SERVICE_CONFIG is the same policy. gRPC's retry support
// (gRFC A6) re-sends a call that failed with UNAVAILABLE -- the server was
// unreachable, refused the connection, was draining (GOAWAY) or died with
// the call in flight -- or that the server ended CANCELLED (a draining
// server's transport cancels the calls it received but had not started;
// a call the client itself cancelled or whose deadline passed is never
// re-sent) up to maxAttempts times in all, after a
// randomized exponential backoff (50 ms x 2^n, at most 1 s), on another
// address when the channel has several (round_robin). It applies to every
// RPC that has no effect beyond its answer: all of EmbeddingService,
// ScoringService, PositionService, TokenizerService, grpc.health.v1.Health
// and ModelService/ListModels, GetModel. Streams (EmbedStream,
// ScoreStream) are retried only until their first response arrives (gRPC
// commits a call then). ModelService/LoadModel and UnloadModel change a
// replica's state and are never retried (the caller decides, knowing which
// replica it meant). A request larger than gRPC's retry buffer (256 KiB per
// call, grpc.per_rpc_retry_buffer_size) is sent once, not retried.
inline constexpr char kDefaultServiceConfig[] = R"json({
  "methodConfig": [
    {
      "name": [
        {"service": "vocabd.v1.EmbeddingService"},
        {"service": "vocabd.v1.ScoringService"},
        {"service": "vocabd.v1.PositionService"},
        {"service": "vocabd.v1.TokenizerService"},
        {"service": "grpc.health.v1.Health"},
        {"service": "vocabd.v1.ModelService", "method": "ListModels"},
        {"service": "vocabd.v1.ModelService", "method": "GetModel"}
      ],
      "retryPolicy": {
        "maxAttempts": 5,
        "initialBackoff": "0.05s",
        "maxBackoff": "1s",
        "backoffMultiplier": 2,
        "retryableStatusCodes": ["UNAVAILABLE", "CANCELLED"]
      }
    }
  ]
})json";

class VocabdClient {
 public:
  struct Options {
    // gRPC target, e.g. "127.0.0.1:50051" or "dns:///vocabd:50051".
    std::string target = "127.0.0.1:50051";
    // Per-call deadline; <= 0 means none.
    std::chrono::milliseconds timeout{30000};
    // Max response size accepted (bytes).
    int max_receive_message_bytes = 256 << 20;
    // Client-side load balancing policy, e.g. "round_robin" (with a
    // "dns:///host:port" target that resolves to every server, such as a
    // Kubernetes headless Service); empty = gRPC's default (pick_first).
    std::string lb_policy;
    // gRPC service config JSON (retry policy; see kDefaultServiceConfig);
    // empty = none (every call sent once).
    std::string service_config = kDefaultServiceConfig;
    // TLS: on when `tls` is true or any PEM file below is set.
    bool tls = false;
    std::string ca_file;    // PEM roots to verify the server (empty = system roots)
    std::string cert_file;  // PEM client certificate (mutual TLS), with key_file
    std::string key_file;
    // Overrides the name checked against the server certificate (testing,
    // or addressing pods by IP); empty = the target host.
    std::string tls_server_name;
    // Bearer token sent as `authorization: Bearer <token>` (needs TLS).
    std::string token;
    // File holding the token (first non-empty line); used when token is empty.
    std::string token_file;
  };
  // Creates a channel to options.target (insecure, or TLS when requested).
  // INVALID_ARGUMENT naming the option for a bad combination; NOT_FOUND
  // naming the file when a PEM or token file cannot be read.
  static absl::StatusOr<std::unique_ptr<VocabdClient>> Create(const Options& options);
  // Uses an existing channel (tests: in-process channel).
  VocabdClient(std::shared_ptr<grpc::Channel> channel, const Options& options);

  // grpc.health.v1.Health/Check for `service` ("" = overall). Returns the
  // serving status name ("SERVING", "NOT_SERVING", ...).
  absl::StatusOr<std::string> HealthCheck(const std::string& service = "");

  absl::StatusOr<v1::ListModelsResponse> ListModels();
  absl::StatusOr<v1::ModelInfo> GetModel(const std::string& name);
  // Returns when the model is READY (or with the reason it failed).
  absl::StatusOr<v1::ModelInfo> LoadModel(const std::string& name);
  // Returns when the model's in-flight calls have ended and it is freed.
  absl::StatusOr<v1::UnloadModelResponse> UnloadModel(const std::string& name);
  absl::StatusOr<v1::EmbedResponse> Embed(const v1::EmbedRequest& request);
  // EmbeddingService/EmbedStream: every request on one bidirectional stream
  // (written from a writer thread), the responses in order, one per request;
  // the stream's status if it ends with an error (`requests[i]: ` prefix).
  absl::StatusOr<std::vector<v1::EmbedResponse>> EmbedStream(
      const std::vector<v1::EmbedRequest>& requests);
  absl::StatusOr<v1::ComputeLogitsResponse> ComputeLogits(const v1::ComputeLogitsRequest& request);
  absl::StatusOr<v1::ScoreResponse> Score(const v1::ScoreRequest& request);
  // ScoringService/ScoreStream: sends every request on one bidirectional
  // stream (from a writer thread, so flow control never blocks both sides)
  // and returns the responses in order, one per request. The stream's status
  // if it ends with an error (the server prefixes `requests[i]: `).
  absl::StatusOr<std::vector<v1::ScoreResponse>> ScoreStream(
      const std::vector<v1::ScoreRequest>& requests);
  absl::StatusOr<v1::ApplyRopeResponse> ApplyRope(const v1::ApplyRopeRequest& request);
  absl::StatusOr<v1::GetRopeCacheResponse> GetRopeCache(const v1::GetRopeCacheRequest& request);
  absl::StatusOr<v1::GetSinusoidalPositionsResponse> GetSinusoidalPositions(
      const v1::GetSinusoidalPositionsRequest& request);
  absl::StatusOr<v1::GetAlibiSlopesResponse> GetAlibiSlopes(
      const v1::GetAlibiSlopesRequest& request);

  // TokenizerService (the model's own tokenizer).
  absl::StatusOr<v1::TokenizeResponse> Tokenize(const v1::TokenizeRequest& request);
  absl::StatusOr<v1::DetokenizeResponse> Detokenize(const v1::DetokenizeRequest& request);
  absl::StatusOr<v1::GetVocabularyResponse> GetVocabulary(const v1::GetVocabularyRequest& request);

  // Server reflection: fully-qualified service names the server lists.
  absl::StatusOr<std::vector<std::string>> ListServices();

  std::shared_ptr<grpc::Channel> channel() const { return channel_; }

 private:
  void PrepareContext(grpc::ClientContext* context) const;
  std::shared_ptr<grpc::Channel> channel_;
  Options options_;
  std::unique_ptr<v1::ModelService::Stub> models_;
  std::unique_ptr<v1::EmbeddingService::Stub> embedding_;
  std::unique_ptr<v1::ScoringService::Stub> scoring_;
  std::unique_ptr<v1::PositionService::Stub> position_;
  std::unique_ptr<v1::TokenizerService::Stub> tokenizer_;
};

// grpc::Status -> absl::Status with the same code and message.
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace vocabd

#endif  // VOCABD_CLIENT_VOCABD_CLIENT_H_
