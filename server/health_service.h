// grpc.health.v1.Health on the callback API, replacing gRPC's default health
// service so that a drain can end Watch streams.
//
// gRPC's default service (grpc::EnableDefaultHealthCheckService) sends
// NOT_SERVING to Watch streams on HealthCheckServiceInterface::Shutdown() but
// keeps them open, and grpc::Server::Shutdown(deadline) waits for every open
// call, so one watcher (a load balancer, a sidecar, `grpcurl ... Watch`) held
// the whole drain until --drain-timeout-ms. This service behaves like the
// default one while serving (Check: status or NOT_FOUND for an unknown
// service; Watch: the current status at once, then every change, unknown
// services as SERVICE_UNKNOWN) and on Shutdown():
//   1. every status turns NOT_SERVING (later SetServingStatus calls are
//      ignored, as in gRPC's service);
//   2. every Watch stream (an unknown service's too, as in gRPC's service)
//      is sent NOT_SERVING, unless that was already the last status it got,
//      and then finished with UNAVAILABLE "vocabd is draining", so the client
//      learns the new state and the stream no longer counts as an in-flight
//      call;
//   3. a Watch that starts afterwards gets NOT_SERVING and ends the same way.
// Reactors never block: one write in flight per stream, the newest pending
// status replaces an older one.
#ifndef VOCABD_SERVER_HEALTH_SERVICE_H_
#define VOCABD_SERVER_HEALTH_SERVICE_H_

#include <map>
#include <mutex>
#include <set>
#include <string>

#include <grpcpp/grpcpp.h>

#include "grpc/health/v1/health.grpc.pb.h"

namespace vocabd {

class HealthService : public grpc::health::v1::Health::CallbackService {
 public:
  using ServingStatus = grpc::health::v1::HealthCheckResponse::ServingStatus;

  // Overall status ("") starts SERVING, as in gRPC's default service.
  HealthService();
  ~HealthService() override;

  // Sets one service's status ("" = overall) and tells its watchers.
  // Ignored (NOT_SERVING stays) after Shutdown().
  void SetServingStatus(const std::string& service, bool serving);
  // NOT_SERVING for every known service, then every Watch stream ends (see
  // the file comment). Idempotent.
  void Shutdown();

  // Watch streams open now (for tests).
  size_t open_watches() const;

  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* context,
                                  const grpc::health::v1::HealthCheckRequest* request,
                                  grpc::health::v1::HealthCheckResponse* response) override;
  grpc::ServerWriteReactor<grpc::health::v1::HealthCheckResponse>* Watch(
      grpc::CallbackServerContext* context,
      const grpc::health::v1::HealthCheckRequest* request) override;

 private:
  class WatchReactor;
  friend class WatchReactor;

  // With mu_ held: the status Watch reports for `service`.
  ServingStatus StatusLocked(const std::string& service) const;

  mutable std::mutex mu_;
  std::map<std::string, ServingStatus> statuses_;
  std::set<WatchReactor*> watches_;
  bool shutdown_ = false;
};

}  // namespace vocabd

#endif  // VOCABD_SERVER_HEALTH_SERVICE_H_
