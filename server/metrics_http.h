// Serves Metrics::Render() (prometheus-cpp's TextSerializer over the
// registry) over HTTP (cpp-httplib) for Prometheus:
//   GET /metrics  -> 200 text/plain; version=0.0.4
//   GET /healthz  -> 200 "ok" (process is up; gRPC health is the real probe)
// Plain HTTP on its own listen address (--metrics-listen); keep it on a
// cluster-internal port.
//
// Why cpp-httplib and not prometheus-cpp's pull Exposer: both servers give
// each accepted connection to one worker thread until it closes or times out
// (civetweb: request_timeout_ms, 30 s by default; httplib: the 5 s
// keep-alive wait), so idle connections starve a fixed pool (the Exposer
// starts 2 workers, httplib's default pool 8 here: 40 idle connections
// starved /metrics). The Exposer only serves registered
// collectables (no /healthz) and would add civetweb to the runtime image.
// Here httplib keeps serving both paths, with a task queue that gives every
// connection its own thread (ConnectionThreads in the .cc, up to
// kMaxConnectionThreads), and a listen backlog raised from httplib's 5, so a
// scrape is answered while up to that many idle connections are open
// (tests/server/operations_test.cc opens 64).
#ifndef VOCABD_SERVER_METRICS_HTTP_H_
#define VOCABD_SERVER_METRICS_HTTP_H_

#include <cstddef>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "server/metrics.h"

namespace httplib {
class Server;
class TaskQueue;
}

namespace vocabd {

class MetricsHttpServer {
 public:
  struct Options {
    // host:port; port 0 picks a free port (see port()).
    std::string listen_address = "0.0.0.0:9090";
    // INVALID_ARGUMENT naming --metrics-listen when not host:port.
    absl::Status Validate() const;
  };
  // Binds and starts the HTTP thread. UNAVAILABLE when it cannot bind.
  // `metrics` must outlive the server.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Create(const Options& options,
                                                                   const Metrics* metrics);
  ~MetricsHttpServer();
  int port() const { return port_; }
  // Connections served at once, each on its own thread (started as
  // connections arrive, reused, ended after 10 s without work); beyond it
  // connections wait for a thread.
  static constexpr size_t kMaxConnectionThreads = 256;
  // Stops the listener and joins the thread. Idempotent.
  void Stop();

 private:
  MetricsHttpServer() = default;
  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  int port_ = 0;
};

// The thread-per-connection task queue described above (up to `max_threads`
// threads), for httplib::Server::new_task_queue; also used by the HTTP/JSON
// gateway (server/http_gateway.h).
httplib::TaskQueue* NewConnectionThreads(size_t max_threads);

// Splits "host:port" / "[v6]:port"; INVALID_ARGUMENT naming `flag`.
absl::Status SplitHostPort(const std::string& address, const std::string& flag,
                           std::string* host, int* port);

}  // namespace vocabd

#endif  // VOCABD_SERVER_METRICS_HTTP_H_
