// HTTP/JSON front door (--http-listen): every unary vocabd.v1 RPC at
//   POST /v1/<Service>/<Method>        e.g. /v1/EmbeddingService/Embed
// with the request and response in the protobuf JSON mapping
// (server/http_json.h), plus
//   GET /healthz   200 {"status":"SERVING"} while the process serves
//   GET /readyz    200 {"model":...,"status":"READY"} when the default model
//                  answers; 503 (JSON error) before that and while draining
//   GET /metrics   the Prometheus text of the gRPC server's metrics
//
// Design: the gateway is a gRPC client of the server it belongs to, over an
// in-process channel (grpc::Server::InProcessChannel). A request is parsed
// into the method's input message (found by name in the generated
// descriptor pool, so every unary RPC of every registered vocabd.v1 service
// - present and future - is reachable without per-method code), serialized
// and sent as a generic call; the reply is printed back as JSON. The RPC
// therefore runs through the very same handler, CallTracker interceptor
// (limits: --max-concurrent-requests, --max-tokens-per-request; metrics
// vocabd_requests_total / request_duration_seconds; the debug request log
// line, with peer=http:<client address>), deadlines and size checks as a
// gRPC call. Streaming RPCs are gRPC-only (501 UNIMPLEMENTED here).
//
// Transport: plain HTTP, or HTTPS with the server's --tls-cert / --tls-key
// (cpp-httplib SSLServer); with --tls-client-ca clients must present a
// certificate from that CA (mutual TLS) as on gRPC. With --auth-token-file
// every path except /healthz and /readyz needs `Authorization: Bearer
// <token>` (the same tokens; a refusal is 401 UNAUTHENTICATED and counted in
// vocabd_requests_total like a gRPC refusal).
//
// Errors: {"code": "<gRPC code name>", "message": "..."} with the HTTP
// status of the standard gRPC -> HTTP mapping (HttpStatusFor). Connection
// and request framing limits (connections per port, head bytes and fields,
// body bytes, timeouts; 503 / 431 / 413 / 408 before the body is read) are
// server/http_gateway_connection.h's; the decoded request is then held to
// --max-receive-message-bytes by the gRPC server. POST bodies must be
// `Content-Type: application/json` (charset, if given, utf-8), else 415.
// A client that closes its connection while its RPC runs cancels the call.
//
// Headers: `X-Request-Id` (printable ASCII, at most 128 bytes, else 400) is
// passed on as the call's x-request-id;
// `X-Vocabd-Tensors: values` (or ?tensors=values) returns small tensors as
// number arrays; `X-Vocabd-Timeout-Ms: <ms>` (1 .. 86400000) sets the
// call's deadline.
#ifndef VOCABD_SERVER_HTTP_GATEWAY_H_
#define VOCABD_SERVER_HTTP_GATEWAY_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/http_gateway_connection.h"
#include "server/metrics.h"
#include "server/transport_security.h"

namespace httplib {
class Server;
}

namespace vocabd {

// The standard gRPC code -> HTTP status mapping (google/rpc/code.proto):
// OK 200, CANCELLED 499, INVALID_ARGUMENT / FAILED_PRECONDITION /
// OUT_OF_RANGE 400, UNAUTHENTICATED 401, PERMISSION_DENIED 403, NOT_FOUND
// 404, ALREADY_EXISTS / ABORTED 409, RESOURCE_EXHAUSTED 429, UNIMPLEMENTED
// 501, UNAVAILABLE 503, DEADLINE_EXCEEDED 504, UNKNOWN / INTERNAL /
// DATA_LOSS 500.
int HttpStatusFor(grpc::StatusCode code);

// X-Request-Id is passed on as gRPC metadata, which allows only printable
// ASCII (0x20-0x7E); at most this many bytes.
inline constexpr size_t kMaxHttpRequestIdBytes = 128;  // = kMaxRequestIdBytes
// OK, or INVALID_ARGUMENT naming the length and the bound, or the first
// byte outside 0x20-0x7E ("X-Request-Id byte 3 is 0x09 (TAB): ...").
absl::Status CheckRequestIdHeader(std::string_view id);
// Largest X-Vocabd-Timeout-Ms accepted (24 h); larger values are refused
// (400) rather than overflowing the deadline.
inline constexpr int64_t kMaxHttpTimeoutMs = int64_t{24} * 3600 * 1000;

class HttpGateway {
 public:
  struct Options {
    // host:port (--http-listen); port 0 picks a free port (see port()).
    std::string listen_address;
    // TLS / mTLS / token files, as given to the gRPC server.
    TransportSecurityOptions security;
    // Connection, head, body and timeout limits (--http-*,
    // server/http_gateway_connection.h). limits.max_body_bytes 0 = the
    // smaller of 4 x max_receive_message_bytes and
    // max_request_memory_bytes / 6.
    HttpLimits limits;
    // --max-receive-message-bytes (for the derived body limit).
    int64_t max_receive_message_bytes = 64 << 20;
    // --max-request-memory-bytes: the JSON conversions of a request body and
    // of an answer are refused above it (http_json.h); <= 0 = no bound.
    int64_t max_request_memory_bytes = 0;
    // OK with the default model's name when it can answer, else the reason
    // (/readyz). Required.
    std::function<absl::StatusOr<std::string>()> ready;
    // INVALID_ARGUMENT naming --http-listen / the limit.
    absl::Status Validate() const;
  };

  // Binds and starts the HTTP thread. `channel` is an in-process channel to
  // the running gRPC server; `metrics` (not null) must outlive the gateway.
  // UNAVAILABLE when it cannot bind, INVALID_ARGUMENT / NOT_FOUND for bad
  // TLS or token files.
  static absl::StatusOr<std::unique_ptr<HttpGateway>> Create(const Options& options,
                                                             std::shared_ptr<grpc::Channel> channel,
                                                             Metrics* metrics);
  ~HttpGateway();
  int port() const { return port_; }
  bool tls() const { return tls_; }
  // Drain: /readyz and every RPC answer 503 from now on, connections close
  // after the request in progress (idle ones at once). Returns once no
  // request is between its admission and the start of its in-process call,
  // so no call is started after this returns (the gRPC server may then shut
  // down; calls already started drain with it).
  void StartDraining();
  // Stops accepting, lets requests in progress finish, joins. Idempotent.
  void Stop();

 private:
  HttpGateway() = default;
  struct State;
  std::shared_ptr<State> state_;
  std::unique_ptr<httplib::Server> http_;
  std::shared_ptr<HttpConnectionGuard> guard_;
  std::thread thread_;
  int port_ = 0;
  bool tls_ = false;
};

}  // namespace vocabd

#endif  // VOCABD_SERVER_HTTP_GATEWAY_H_
