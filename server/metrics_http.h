// Serves Metrics::Render() over HTTP (cpp-httplib) for Prometheus:
//   GET /metrics  -> 200 text/plain; version=0.0.4
//   GET /healthz  -> 200 "ok" (process is up; gRPC health is the real probe)
// Plain HTTP on its own listen address (--metrics-listen); keep it on a
// cluster-internal port.
#ifndef VOCABD_SERVER_METRICS_HTTP_H_
#define VOCABD_SERVER_METRICS_HTTP_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "server/metrics.h"

namespace httplib {
class Server;
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
  // Stops the listener and joins the thread. Idempotent.
  void Stop();

 private:
  MetricsHttpServer() = default;
  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  int port_ = 0;
};

// Splits "host:port" / "[v6]:port"; INVALID_ARGUMENT naming `flag`.
absl::Status SplitHostPort(const std::string& address, const std::string& flag,
                           std::string* host, int* port);

}  // namespace vocabd

#endif  // VOCABD_SERVER_METRICS_HTTP_H_
