// vocabd's gRPC server: owns the models, the compute pool and the gRPC
// services (callback API), health and reflection.
#ifndef VOCABD_SERVER_SERVER_H_
#define VOCABD_SERVER_SERVER_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/channel.h>

#include "absl/status/statusor.h"
#include "server/http_gateway_connection.h"
#include "server/model_serving_options.h"
#include "server/transport_security.h"

namespace vocabd {

class Metrics;
class ModelRegistry;

class VocabdServer {
 public:
  struct ModelSpec {
    std::string name;
    std::string path;
  };
  struct Options {
    // host:port; port 0 picks a free port (see port()).
    std::string listen_address = "127.0.0.1:50051";
    // Models to load at start; the first is the default model.
    std::vector<ModelSpec> models;
    // Model repository root (each subfolder a model, LoadModel/UnloadModel
    // by name); empty = none.
    std::string model_repository;
    // Repository models loaded at start (after `models`).
    std::vector<std::string> load_models;
    // Model answering requests that name none; empty = the first of
    // `models`, else of `load_models`, else the first loaded later.
    std::string default_model;
    // Weights dtype and dynamic batching per model (--weights-dtype,
    // --dynamic-batching, --max-batch-rows, --max-queue-delay-us,
    // --max-queue-rows, --batching; server/model_serving_options.h).
    ModelServingOptions serving;
    // Threads of the compute pool that runs the LM head (>= 1).
    int compute_threads = 1;
    // Threads of the tokenization pool (large Tokenize / Detokenize calls):
    // its own pool, so tokenization never queues ahead of LM-head work.
    int tokenize_threads = 1;
    // Tasks the compute pool may queue before RESOURCE_EXHAUSTED.
    int max_queue_size = 1024;
    // Largest request accepted (bytes).
    int max_receive_message_bytes = 64 << 20;
    // Largest response sent (bytes).
    int max_send_message_bytes = 256 << 20;
    // In-flight calls get this long to finish on Shutdown().
    std::chrono::milliseconds drain_timeout{10000};
    // Shutdown(): after the admitted calls finished, the drain also waits
    // until no call arrived for this long (counted from the later of the last
    // call and the drain's start), so calls in transit are refused
    // UNAVAILABLE rather than cancelled by gRPC's shutdown
    // (CallTracker::Options::drain_quiet_period). 0 = no wait. Only for
    // callers that stop sending when health turns NOT_SERVING: a client that
    // keeps sending to the draining server holds the drain until
    // drain_timeout.
    std::chrono::milliseconds drain_quiet_period{0};
    // Operations (see docs/operating.md):
    // Prometheus /metrics HTTP address host:port; empty = no HTTP listener
    // (metrics are still collected, see metrics()).
    std::string metrics_listen;
    // HTTP/JSON front door (server/http_gateway.h) host:port: every unary
    // RPC at POST /v1/<Service>/<Method>, /healthz, /readyz, /metrics, with
    // the TLS, token, limits, logging and metrics of gRPC; empty = off.
    std::string http_listen;
    // The HTTP front door's limits (--http-max-connections, --http-max-*,
    // --http-*-timeout-ms; server/http_gateway_connection.h).
    HttpLimits http_limits;
    // TLS / mTLS / bearer-token auth (server/transport_security.h).
    TransportSecurityOptions security;
    // Request limits (server/call_tracker.h); 0 = no limit.
    int64_t max_tokens_per_request = 0;
    int max_concurrent_requests = 0;
    // Bytes one call's work may need (lib/serving/request_memory.h computes
    // them per RPC from the request before allocating); more =
    // RESOURCE_EXHAUSTED naming --max-request-memory-bytes. 0 = no bound.
    int64_t max_request_memory_bytes = int64_t{256} << 20;
    // Largest text Tokenize accepts, bytes (a request: 4 x this); more =
    // RESOURCE_EXHAUSTED naming texts[i].
    int64_t max_text_bytes = 1 << 20;

    // INVALID_ARGUMENT naming the flag for bad values.
    absl::Status Validate() const;
  };

  // Loads every model, then starts serving. Health is SERVING for "" and
  // each vocabd.v1 service once this returns.
  static absl::StatusOr<std::unique_ptr<VocabdServer>> Create(const Options& options);
  ~VocabdServer();

  // The bound port (useful with port 0).
  int port() const;
  // "127.0.0.1:<port>"-style target for clients.
  std::string target() const;
  // The bound /metrics port (0 when metrics_listen is empty).
  int metrics_port() const;
  // The bound HTTP/JSON port (0 when http_listen is empty).
  int http_port() const;
  // The server's metrics (never null).
  Metrics& metrics() const;
  // A channel to the server that bypasses the network (for in-process
  // callers such as fuzz/request_fuzzer.cc); same handlers and interceptors.
  std::shared_ptr<grpc::Channel> InProcessChannel() const;
  // Health -> NOT_SERVING, stop accepting, let in-flight calls finish
  // (up to drain_timeout), stop. Idempotent.
  void Shutdown();
  // Blocks until Shutdown() completes.
  void Wait();

 private:
  struct Impl;
  explicit VocabdServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace vocabd

#endif  // VOCABD_SERVER_SERVER_H_
