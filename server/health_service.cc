#include "server/health_service.h"

#include <optional>
#include <utility>

#include "lib/core/happens_before.h"

namespace vocabd {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

// One Watch stream. Lock order: HealthService::mu_, then mu_ (the service
// calls Update with its lock held; the reactor never takes the service's
// lock while holding its own).
class HealthService::WatchReactor : public grpc::ServerWriteReactor<HealthCheckResponse> {
 public:
  WatchReactor(HealthService* service, std::string name)
      : service_(service), name_(std::move(name)) {}

  const std::string& name() const { return name_; }

  // Called with service_->mu_ held: `status` is the newest status; `end`
  // finishes the stream once it has been written.
  void Update(ServingStatus status, bool end) {
    std::lock_guard<std::mutex> lock(mu_);
    pending_ = status;
    end_ = end_ || end;
    if (!writing_) NextLocked();
  }

  void OnWriteDone(bool ok) override {
    CallbackScope scope(this);
    std::lock_guard<std::mutex> lock(mu_);
    writing_ = false;
    if (!ok) cancelled_ = true;  // the stream is broken: nothing more to send
    NextLocked();
  }

  void OnCancel() override {
    CallbackScope scope(this);
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
    if (!writing_) NextLocked();
  }

  void OnDone() override {
    HappensAfter(this);  // after every other callback (gRPC's order)
    {
      std::lock_guard<std::mutex> lock(service_->mu_);
      service_->watches_.erase(this);
    }
    delete this;
  }

 private:
  // With mu_ held and no write in flight: the next write, or Finish.
  void NextLocked() {
    if (finished_) return;
    if (cancelled_) {
      finished_ = true;
      Finish(grpc::Status::CANCELLED);
      return;
    }
    if (pending_.has_value() && pending_ != last_sent_) {
      response_.set_status(*pending_);
      last_sent_ = pending_;
      pending_.reset();
      writing_ = true;
      StartWrite(&response_);
      return;
    }
    pending_.reset();
    if (end_) {
      finished_ = true;
      Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "vocabd is draining"));
    }
  }

  HealthService* const service_;
  const std::string name_;
  std::mutex mu_;
  HealthCheckResponse response_;  // the write buffer
  std::optional<ServingStatus> pending_;
  std::optional<ServingStatus> last_sent_;
  bool writing_ = false;
  bool end_ = false;        // finish after the pending status is written
  bool cancelled_ = false;  // OnCancel, or a write failed
  bool finished_ = false;   // Finish called
};

HealthService::HealthService() { statuses_[""] = HealthCheckResponse::SERVING; }

HealthService::~HealthService() = default;

HealthService::ServingStatus HealthService::StatusLocked(const std::string& service) const {
  auto it = statuses_.find(service);
  return it == statuses_.end() ? HealthCheckResponse::SERVICE_UNKNOWN : it->second;
}

void HealthService::SetServingStatus(const std::string& service, bool serving) {
  std::lock_guard<std::mutex> lock(mu_);
  const ServingStatus status =
      serving && !shutdown_ ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING;
  statuses_[service] = status;
  for (WatchReactor* w : watches_) {
    if (w->name() == service) w->Update(status, /*end=*/false);
  }
}

void HealthService::Shutdown() {
  std::lock_guard<std::mutex> lock(mu_);
  if (shutdown_) return;
  shutdown_ = true;
  for (auto& [name, status] : statuses_) status = HealthCheckResponse::NOT_SERVING;
  // Watchers of services never registered too (as gRPC's default service).
  for (WatchReactor* w : watches_) w->Update(HealthCheckResponse::NOT_SERVING, /*end=*/true);
}

size_t HealthService::open_watches() const {
  std::lock_guard<std::mutex> lock(mu_);
  return watches_.size();
}

grpc::ServerUnaryReactor* HealthService::Check(grpc::CallbackServerContext* context,
                                               const HealthCheckRequest* request,
                                               HealthCheckResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  std::optional<ServingStatus> status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = statuses_.find(request->service());
    if (it != statuses_.end()) status = it->second;
  }
  if (!status.has_value()) {
    reactor->Finish(grpc::Status(grpc::StatusCode::NOT_FOUND, "service name unknown"));
  } else {
    response->set_status(*status);
    reactor->Finish(grpc::Status::OK);
  }
  return reactor;
}

grpc::ServerWriteReactor<HealthCheckResponse>* HealthService::Watch(
    grpc::CallbackServerContext* context, const HealthCheckRequest* request) {
  auto* reactor = new WatchReactor(this, request->service());
  std::lock_guard<std::mutex> lock(mu_);
  watches_.insert(reactor);
  // Under mu_, so no update can overtake the first status. After Shutdown()
  // the stream gets NOT_SERVING and ends at once.
  reactor->Update(shutdown_ ? HealthCheckResponse::NOT_SERVING : StatusLocked(request->service()),
                  /*end=*/shutdown_);
  HappensBefore(reactor);  // gRPC runs its callbacks on other threads
  return reactor;
}

}  // namespace vocabd
