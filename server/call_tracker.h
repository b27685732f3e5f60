// Per-call bookkeeping shared by every RPC: a gRPC server interceptor counts
// calls in flight, records vocabd_requests_total / request_duration_seconds
// and writes one debug log line per finished call
//   request id=<id> rpc=<Service/Method> model=<name> rows=<tokens> status=<CODE>
//           latency_ms=<ms> peer=<peer>
// (id: the request's request_id field, else the x-request-id metadata, else
// a server-assigned "srv-<n>"). Admit() applies the request limits before a
// handler does any work.
#ifndef VOCABD_SERVER_CALL_TRACKER_H_
#define VOCABD_SERVER_CALL_TRACKER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include <google/protobuf/message.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/server_interceptor.h>

#include "absl/status/status.h"
#include "server/metrics.h"
#include "server/request_info.h"

namespace vocabd {

// Request metadata (every header's name + value + 32, HTTP/2's accounting)
// a vocabd.v1 call may carry.
inline constexpr int64_t kMaxMetadataBytes = 16 << 10;

class CallTracker {
 public:
  struct Options {
    // Largest request in tokens (see RequestInfo::tokens); 0 = no limit.
    int64_t max_tokens_per_request = 0;
    // vocabd.v1 calls allowed in flight at once (health and reflection are
    // not counted); 0 = no limit. Calls beyond it get RESOURCE_EXHAUSTED.
    int max_concurrent_requests = 0;
    // Drain (WaitUntilDrained): once the admitted calls finished, how long
    // no new call may have arrived, counted from the later of the last call
    // and the start of the drain, before the drain ends (0 = no wait). Calls
    // a client sent just before the drain began can still be on their way (in
    // the socket, or received by gRPC and waiting for a handler); gRPC's own
    // shutdown would cancel those, so the drain lets them arrive and refuses
    // them UNAVAILABLE (a status clients retry elsewhere) first.
    std::chrono::milliseconds drain_quiet_period{0};
    // INVALID_ARGUMENT naming the flag for negative values.
    absl::Status Validate() const;
  };
  // `metrics` must outlive the tracker; it may be null (no metrics).
  static absl::StatusOr<std::unique_ptr<CallTracker>> Create(const Options& options,
                                                             Metrics* metrics);

  // For grpc::ServerBuilder::experimental().SetInterceptorCreators().
  std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MakeInterceptorFactory();

  // OK, or the status to finish the call with before doing any work:
  //   DEADLINE_EXCEEDED   the deadline passed before the handler ran
  //   CANCELLED           the client already cancelled
  //   RESOURCE_EXHAUSTED  more than max_concurrent_requests calls in flight, or
  //                       the request has more than max_tokens_per_request tokens
  //   INVALID_ARGUMENT    a request id outside the bounds (CheckRequestId)
  //   RESOURCE_EXHAUSTED  request metadata above kMaxMetadataBytes
  //   UNAVAILABLE         the server is draining (StartDraining): a call not
  //                       admitted before is refused, one admitted before (a
  //                       stream's later message) goes on
  grpc::Status Admit(grpc::CallbackServerContext* context,
                     const google::protobuf::Message& request);

  // Drain (VocabdServer::Shutdown): from now on Admit refuses calls it has
  // not admitted before with UNAVAILABLE "vocabd is draining ...", so the
  // calls admitted so far can finish while no new work starts.
  void StartDraining();
  // Waits until no admitted vocabd.v1 call is in flight, then until no call
  // at all is in flight (the refused ones answered) and neither a call nor
  // the drain started within options.drain_quiet_period; at most until
  // `deadline`. Returns whether no call is left in flight.
  bool WaitUntilDrained(std::chrono::system_clock::time_point deadline);

  // vocabd.v1 calls started whose status is not sent yet.
  int64_t in_flight() const { return in_flight_.load(std::memory_order_relaxed); }

  // Interceptor hooks (internal). A call takes one of the
  // max_concurrent_requests slots when its interceptor is created (calls are
  // ordered by arrival: of two racing calls with one slot left, exactly one
  // is refused) and gives it back when its status is sent; Admit() refuses a
  // call that found no slot.
  void CallStarted(const grpc::ServerContextBase* context);
  void CallEnded(const grpc::ServerContextBase* context);
  // 0 when the call holds a slot (or there is no limit), else the calls in
  // flight when it arrived, itself included (> max_concurrent_requests).
  int64_t RefusedInFlight(const grpc::ServerContextBase* context);
  Metrics* metrics() const { return metrics_; }
  std::string NextRequestId();
  // Admit() saves what the log line needs about the request; the
  // interceptor takes it when the call ends (empty if never saved).
  void SaveRequestInfo(const grpc::ServerContextBase* context, RequestInfo info);
  RequestInfo TakeRequestInfo(const grpc::ServerContextBase* context);

 private:
  CallTracker(const Options& options, Metrics* metrics) : options_(options), metrics_(metrics) {}
  Options options_;
  Metrics* metrics_;
  std::atomic<int64_t> in_flight_{0};
  std::atomic<int64_t> slots_in_use_{0};  // calls holding a max_concurrent_requests slot
  std::atomic<uint64_t> next_id_{1};
  // steady_clock times (ns) of the last CallStarted and of StartDraining.
  std::atomic<int64_t> last_call_started_ns_{0};
  std::atomic<int64_t> drain_started_ns_{0};
  std::mutex mu_;
  std::unordered_map<const grpc::ServerContextBase*, RequestInfo> requests_;
  // Calls that found every slot taken -> calls in flight counting them.
  std::unordered_map<const grpc::ServerContextBase*, int64_t> refused_;
  // Calls Admit let through whose status is not sent yet (guarded by mu_).
  std::unordered_set<const grpc::ServerContextBase*> admitted_;
  bool draining_ = false;  // guarded by mu_
  std::condition_variable admitted_cv_;
};

// Whether a call is still wanted before work on it starts: DEADLINE_EXCEEDED
// when its deadline has passed ("deadline exceeded <when>"), else CANCELLED
// when the client cancelled ("call cancelled <when>"); each counted in
// `metrics` (may be null) as skipped work. The deadline is checked first:
// gRPC marks a call whose deadline passed as cancelled too, and the caller
// should see the reason.
absl::Status CheckCallWanted(grpc::CallbackServerContext* context, Metrics* metrics,
                             const char* when);

// Finishes `reactor` and returns true when `tracker` (may be null) rejects
// the call; handlers call it first:
//   if (RejectIfNotAdmitted(tracker, context, *request, reactor)) return reactor;
bool RejectIfNotAdmitted(CallTracker* tracker, grpc::CallbackServerContext* context,
                         const google::protobuf::Message& request,
                         grpc::ServerUnaryReactor* reactor);

}  // namespace vocabd

#endif  // VOCABD_SERVER_CALL_TRACKER_H_
