// Connection handling of the HTTP/JSON front door (server/http_gateway.h):
// the limits a reverse proxy would put in front of it, enforced on the
// socket before cpp-httplib sees a byte of the request.
//
// Why a wrapper: Debian's cpp-httplib 0.11.4 (a compiled library, its
// limits fixed at build time) reads a request head line by line with no
// bound on the number of header lines or their total size (732 MB of
// headers were accepted), grows a line without a newline without bound,
// restarts its per-read timeout on every byte (slowloris), reads a declared
// or chunked body whole before refusing it, keeps no bytes between requests
// of one connection (9 of 10 pipelined requests were dropped), and gives
// each connection a thread for as long as it stays open. Server and
// SSLServer let a subclass replace process_and_close_socket(): the guarded
// servers here do, and per connection
//
//   accept ─► count (> max_connections: 503, close)
//          ─► [TLS handshake, within header_timeout]
//          ─► loop: wait for a request's first byte (idle_timeout; the first
//                   request: header_timeout; drain wakes the wait and closes)
//                   read the head: request line + headers within
//                   header_timeout in total, max_header_bytes, max_headers
//                   frame the body: one Content-Length (conflicting
//                   duplicates 400) or chunked (not both), checked against
//                   max_body_bytes before reading; check_head (the
//                   gateway's: Content-Type, drain); 100-continue
//                   read the body within body_timeout, stopping at the limit
//                   hand httplib the head alone (Content-Length: 0) from
//                   memory; the handler takes the body from
//                   CurrentHttpExchange(); httplib writes the answer through
//                   the connection (write_timeout between two writes)
//                   bytes after the request stay buffered for the next one
//
// so httplib only parses request heads that are already bounded and
// well-formed, one at a time, in order. A refusal here is answered with the
// gateway's JSON error body and `Connection: close`, and the connection is
// closed (after reading and dropping at most 1 MiB / 1 s of what the client
// still sends, so it sees the answer rather than a reset).
#ifndef VOCABD_SERVER_HTTP_GATEWAY_CONNECTION_H_
#define VOCABD_SERVER_HTTP_GATEWAY_CONNECTION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace httplib {
class Server;
}

namespace vocabd {

// The HTTP front door's limits (flags --http-*; docs/operating.md).
struct HttpLimits {
  // --http-max-connections: connections open at once on the HTTP port; one
  // more is answered 503 UNAVAILABLE and closed at once (TLS: closed).
  int max_connections = 256;
  // --http-max-header-bytes: request line + header fields of one request.
  // More: 431.
  int64_t max_header_bytes = 64 << 10;
  // --http-max-headers: header fields of one request. More: 431.
  int max_headers = 100;
  // --http-max-body-bytes: request body bytes; 0 = the smaller of
  // 4 x --max-receive-message-bytes and --max-request-memory-bytes / 6 (a
  // JSON body costs 6 x its size to convert, server/http_json.h). More: 413
  // (on Content-Length before reading; chunked bodies at the limit).
  int64_t max_body_bytes = 0;
  // --http-header-timeout-ms: the whole request head must arrive within
  // this (total, not per byte; for a new connection counted from accept,
  // TLS handshake included). Else 408 (or close if nothing came).
  int64_t header_timeout_ms = 10000;
  // --http-body-timeout-ms: the whole body must arrive within this. Else 408.
  int64_t body_timeout_ms = 60000;
  // --http-idle-timeout-ms: a keep-alive connection waiting for its next
  // request is closed after this.
  int64_t idle_timeout_ms = 5000;
  // --http-write-timeout-ms: longest wait for the client to take more of
  // an answer; then the connection is closed.
  int64_t write_timeout_ms = 10000;
  // INVALID_ARGUMENT naming the flag.
  absl::Status Validate() const;
};

// Requests one connection may carry; the last answer says Connection: close.
inline constexpr int kMaxRequestsPerConnection = 1000;
// httplib's compiled-in bounds (CPPHTTPLIB_REQUEST_URI_MAX_LENGTH,
// CPPHTTPLIB_HEADER_MAX_LENGTH): refused here with their own message (414 /
// 431) instead of httplib's bare 400.
inline constexpr size_t kMaxRequestLineBytes = 8192;
inline constexpr size_t kMaxHeaderLineBytes = 8192;

// A request head as the guard parsed it.
struct HttpHead {
  std::string method;
  std::string target;
  std::string version;  // "HTTP/1.1" or "HTTP/1.0"
  std::vector<std::pair<std::string, std::string>> headers;  // as sent, values trimmed
  // The first value of header `name` (case-insensitive), or null.
  const std::string* Find(absl::string_view name) const;
};

// An answer the guard writes itself: {"code": code, "message": message}.
struct HttpRefusal {
  int http_status = 400;
  std::string code = "INVALID_ARGUMENT";  // gRPC code name
  std::string message;
};

// The request being served on this thread, for the handler.
struct HttpExchange {
  std::string body;  // the whole body (de-chunked)
  int fd = -1;       // the client's socket
  // True when the client closed or shut down its side of the connection
  // (poll POLLRDHUP / POLLHUP / POLLERR; no bytes are consumed).
  bool ClientGone() const;
};
// Non-null while a handler runs under a guarded server.
HttpExchange* CurrentHttpExchange();

struct HttpGuardOptions {
  HttpLimits limits;  // max_body_bytes > 0 (resolved by the caller)
  // Names where the body limit comes from in the 413 message.
  std::string body_limit_source = "--http-max-body-bytes";
  // Called once the head is parsed and framed, before the body is read;
  // `content_length` is -1 for a chunked body. A refusal is answered and
  // the connection closed.
  std::function<std::optional<HttpRefusal>(const HttpHead& head, int64_t content_length)>
      check_head;
};

// Shared by the connections of one server: the counts and the drain switch.
class HttpConnectionGuard;

// cpp-httplib servers whose connections go through the guard. `tls_*`
// empty = plain HTTP; else HTTPS (with client certificates from `tls_ca`
// when not empty). is_valid() is false when the TLS files do not load.
struct GuardedHttpServer {
  std::unique_ptr<httplib::Server> server;
  std::shared_ptr<HttpConnectionGuard> guard;
  // From now on connections waiting for a request (idle keep-alive or new)
  // close, and the others close after the request in progress.
  void BeginDrain();
};
GuardedHttpServer NewGuardedHttpServer(const HttpGuardOptions& options,
                                       const std::string& tls_cert, const std::string& tls_key,
                                       const std::string& tls_ca);

}  // namespace vocabd

#endif  // VOCABD_SERVER_HTTP_GATEWAY_CONNECTION_H_
